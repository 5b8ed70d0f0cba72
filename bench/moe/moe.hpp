// An MoE-shaped token exchange, the same for every library it is measured on: each rank routes
// its T tokens (of --token-bytes bytes each) to the ranks' experts, one expert per rank, drawn
// from a Zipf distribution over the experts (exponent --zipf) whose order is shuffled each step,
// so the hot expert moves; the step's AllToAllv sends each rank its tokens, blocks packed in rank
// order. --steps distinct routings are cycled through the timed iterations. A library only says
// how to run one blocking AllToAllv of bytes, a barrier, and the max and sum ranks agree on
// (occl-moe-bench, mpi-moe-bench, gloo-moe-bench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace occl::bench::moe {

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Options {
  int localRanks = 1;                  // -g: ranks as threads of this process
  uint64_t minTokens = 16, maxTokens = 4096;  // -b, -e: tokens per rank, the sweep's ends
  uint64_t factor = 4;                 // -f: multiply between rows
  uint64_t tokenBytes = 2048;          // --token-bytes: a token's activations (1024 bfloat16)
  double zipf = 1.2;                   // --zipf: the experts' popularity exponent
  int steps = 8;                       // --steps: distinct routings per row
  int iters = 20, warmup = 8;          // -n, -w (warmup: each of the 8 routings once)
  // --settle-iters: the first row's warm-up runs at least this many steps. With more busy ranks
  // than cores the scheduler may keep an uneven placement of the ranks for the first few hundred
  // milliseconds of a launch (8 ranks on 2 cores at 4 tokens: 18-35 us a step before it settles,
  // 18-19 after), longer than a row's warm-up lasts; as occl-bench's --settle-iters. 0 = off.
  int settleIters = 0;
  uint64_t seed = 1;                   // --seed
  bool help = false, version = false;
};

// Parses the flags into `o`; "" or the message to print before exiting with kExitUsage.
std::string parse(const std::vector<std::string>& args, Options& o);
std::string usage(const std::string& program, const std::string& ranksHelp);

// A step's routing: counts[r][q] = the tokens rank r sends rank q (each row sums to `tokens`).
// Every rank computes the whole matrix from (seed, tokens, step), so all agree without talking.
std::vector<std::vector<uint64_t>> routing(const Options& o, uint64_t tokens, int nRanks, int step);

// One rank's handle on the library measured. Every call is collective and blocking.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // Before a row: the most bytes one block of it may hold (a registration's bound).
  virtual void prepare(uint64_t maxBlockBytes) { (void)maxBlockBytes; }
  // Block q of `send` (sendCounts[q] bytes at sendDispls[q]) goes to rank q, which stores it as
  // block `rank` of its `recv`.
  virtual void alltoallv(const uint8_t* send, const std::vector<size_t>& sendCounts,
                         const std::vector<size_t>& sendDispls, uint8_t* recv, const std::vector<size_t>& recvCounts,
                         const std::vector<size_t>& recvDispls) = 0;
  virtual void barrier() = 0;
  virtual double max(double value) = 0;
  virtual double sum(double value) = 0;  // exact for the wrong-byte counts (< 2^53)
  // A buffer of at least `bytes` (which: 0 send, 1 receive) of the memory the library wants, valid
  // until the next call with the same `which`: plain memory here.
  virtual uint8_t* buffer(int which, size_t bytes) {
    std::vector<uint8_t>& b = buffers_[which];
    if (b.size() < bytes) b.resize(bytes);
    return b.data();
  }

 private:
  std::vector<uint8_t> buffers_[2];
};

// Runs the sweep on one rank and returns the exit code. Rank 0 prints `preamble`, the table and
// the footer on `out`; the other ranks pass nullptr.
int run(const Options& o, Exchange& exchange, int rank, int nRanks, std::ostream* out, const std::string& preamble);

}  // namespace occl::bench::moe
