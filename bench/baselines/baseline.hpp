// What mpi-allreduce-bench and gloo-allreduce-bench share with occl-bench and with each other:
// occl-bench's command line, inputs, verification and table (bench/*.hpp), and one sweep loop
// that times a library's AllReduce exactly as occl-bench times occl's. A baseline only says how
// to run one AllReduce, a barrier, and the max/sum that ranks agree on.
#pragma once

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

#include "options.hpp"

namespace occl::bench::baseline {

// Exit codes, as occl-bench's.
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

// One rank's handle on the library being measured. Every call is collective and blocking.
class Library {
 public:
  virtual ~Library() = default;
  // float32 sum over all ranks of `count` elements; send == recv means in place. Returns when
  // this rank's result is in `recv`.
  virtual void allreduce(const float* send, float* recv, size_t count) = 0;
  virtual void barrier() = 0;
  virtual double max(double value) = 0;
  virtual double sum(double value) = 0;  // exact for the wrong-element counts (< 2^53)
};

// Parses occl-bench's flags into `options`; "" or the message to print before exiting with
// kExitUsage. Flags that only make sense for occl (--algo, --blocks, ...), collectives other than
// allreduce and types/ops other than float/sum are refused rather than silently ignored.
std::string parse(const std::vector<std::string>& args, Options& options);
std::string usage(const std::string& program, const std::string& launchHelp);

// "# minBytes ... validation: 1": the sweep parameters, as occl-bench's second preamble line.
std::string sweepLine(const Options& options);

// Runs the sweep on one rank and returns the exit code. Rank 0 prints `preamble`, the table and
// the footer on `out`; the other ranks pass nullptr.
int runSweep(const Options& options, Library& library, int rank, int nRanks, std::ostream* out,
             const std::string& preamble);

}  // namespace occl::bench::baseline
