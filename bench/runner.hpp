// One rank's benchmark loop: each (datatype, op) first warms up at the largest and the smallest
// size, as nccl-tests' TimeTest does; then every size's row registers its collective, warms up,
// times out-of-place then in-place runs, checks the results, and agrees with the other ranks on
// the row's numbers through the side channel. Every rank makes the same side-channel calls in
// the same order whatever happened locally, so a failure on one rank never strands the others.
// Buffers live where the rank's daemon reads them (memory.hpp); inputs are written and results
// checked on the host and staged across for device ranks, outside the timed loop.
#pragma once

#include <array>
#include <barrier>
#include <chrono>
#include <memory>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

#include "check.hpp"
#include "device/simt_crossings.hpp"
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
  // `device`: the rank's CUDA device, or -1 for a host rank; `make` allocates its buffers there.
  // `localSync`: every rank of this process arrives at it (nullptr: this process runs one rank);
  // the simt crossing count reads the process's counts while none of them runs a collective.
  RankRunner(const Options& options, occlComm_t comm, int rank, int nRanks, int device, Report& report,
             ErrorSink& errors, std::chrono::milliseconds bound, BufferMaker make = makeBuffer,
             std::barrier<>* localSync = nullptr);

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
  // Where a run's send and receive windows lie: a buffer and a byte offset each (in place, both
  // in recv_).
  struct Layout {
    RunBuffer* send;
    size_t sendOffset;
    RunBuffer* recv;
    size_t recvOffset;
    RunBuffers device() const { return {send->data() + sendOffset, recv->data() + recvOffset}; }
    RunBuffers host() const { return {send->host() + sendOffset, recv->host() + recvOffset}; }
  };

  std::string introduce();
  Row makeRow(int dtype, int op, uint64_t bytes, uint64_t sizeIndex) const;
  std::string warmUp(int dtype, int op, uint64_t bytes, uint64_t sizeIndex, bool settle);
  std::string runRow(int dtype, int op, uint64_t bytes, uint64_t sizeIndex, RowResult& out);
  std::string agreeOnTimes(const RowResult& out, std::array<double, 2>& times);
  std::string registerRow(const Row& row);
  void deregisterRow(const Row& row);
  PlaceResult measure(const Row& row, bool inPlace, std::string& error, bool& lost);
  Layout layoutFor(const SizePlan& plan, bool inPlace);
  void writeInputs(const Row& row, const Layout& at);
  void prepareCheck(const Row& row, const Layout& at);
  int64_t checkResults(const Row& row, const Layout& at);
  RunStatus runOnce(const Row& row, const RunBuffers& buffers);
  RunStatus barrier();
  PlaceResult::Crossings perCollective(const exec::simt::Crossings& before, const exec::simt::Crossings& after,
                                       int runs, size_t submissions) const;
  std::optional<PlaceResult::Phases> phases(const Row& row, int timed) const;

  const Options& options_;
  occlComm_t comm_;
  int rank_;
  int nRanks_;
  int device_;  // CUDA device, or -1 for a host rank
  std::barrier<>* localSync_;
  Report& report_;
  ErrorSink& errors_;
  std::chrono::milliseconds bound_;
  SideChannel side_;
  Completion done_;
  std::unique_ptr<RunBuffer> send_;
  std::unique_ptr<RunBuffer> recv_;
  std::unique_ptr<RunStream> stream_;  // --submit stream: the rank's stream
};

}  // namespace occl::bench
