// One rank's benchmark loop: every (datatype, op, size) row registers its collective, warms up,
// times out-of-place then in-place runs, checks the results, and agrees with the other ranks on
// the row's numbers through the side channel. Every rank makes the same side-channel calls in
// the same order whatever happened locally, so a failure on one rank never strands the others.
#pragma once

#include <chrono>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "check.hpp"
#include "memory.hpp"
#include "options.hpp"
#include "plan.hpp"
#include "report.hpp"
#include "side_channel.hpp"
#include "submit.hpp"

namespace occl::bench {

// Where non-zero ranks report failures that rank 0's table cannot show; shared by rank threads.
struct ErrorSink {
  std::ostream& err;
  std::mutex mu;
  void line(int rank, const std::string& message);
};

class RankRunner {
 public:
  RankRunner(const Options& options, occlComm_t comm, int rank, int nRanks, Report& report, ErrorSink& errors,
             std::chrono::milliseconds bound);

  // Runs every row; returns "" or a fatal error after which the communicator must be aborted.
  std::string run();
  // Aborts the communicator while this runner (whose Completions pending callbacks point at) is
  // still alive. The communicator is gone afterwards.
  void abortComm();

 private:
  struct Row {
    SizePlan plan;
    CheckSpec spec;
    std::vector<Registration> regs;
  };

  std::string introduce();
  std::string runRow(int dtype, int op, uint64_t bytes, uint64_t sizeIndex, RowResult& out);
  std::string registerRow(const Row& row);
  void deregisterRow(const Row& row);
  PlaceResult measure(const Row& row, bool inPlace, std::string& error, bool& lost);
  RunBuffers buffersFor(const SizePlan& plan, bool inPlace);
  RunStatus runOnce(const Row& row, const RunBuffers& buffers);
  RunStatus barrier();

  const Options& options_;
  occlComm_t comm_;
  int rank_;
  int nRanks_;
  Report& report_;
  ErrorSink& errors_;
  std::chrono::milliseconds bound_;
  SideChannel side_;
  Completion done_;
  HostBuffer send_;
  HostBuffer recv_;
};

}  // namespace occl::bench
