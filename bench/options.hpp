// occl-bench command line (src/cli's parser): nccl-tests' flags with their meanings, or a clear
// refusal where occl has none, plus occl's own (collective, backend, algorithm, devices, blocks,
// NCCL comparison, JSON output). Parsing never exits or throws: a bad argument comes back as a
// message naming the flag and what it expects, and the caller exits with code 2.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cli/flags.hpp"
#include "occl/occl.h"

namespace occl::bench {

// The collectives occl-bench measures; SendRecv pairs an occlCollSend to the next rank with an
// occlCollRecv from the previous one, as nccl-tests' sendrecv_perf does.
enum class Coll { AllReduce, AllGather, ReduceScatter, Reduce, Broadcast, AllToAll, SendRecv, Gather, Scatter };

// --submit: how a timed submission starts (docs/design.md, Gates and streams). Plain: occlSubmit.
// Gated: occlSubmitGated, its gate opened by the submitting thread right after (the gate's own
// cost). Stream: occlSubmitOnStream on a stream of the rank's device, which is synchronised
// before the callback is awaited (CUDA ranks).
enum class SubmitMode { Plain, Gated, Stream };

struct Options {
  Coll coll = Coll::AllReduce;
  bool collGiven = false;  // named on the command line or by the program name (all_gather_perf)
  // Sizes in bytes, nccl-tests' defaults: one 32 MiB run.
  uint64_t minBytes = uint64_t{32} << 20;
  uint64_t maxBytes = uint64_t{32} << 20;
  uint64_t stepBytes = uint64_t{1} << 20;
  uint64_t stepFactor = 1;  // > 1: sizes grow geometrically and stepBytes is unused
  int iters = 20;
  int warmupIters = 5;
  // --small-iters: rows of at most smallMaxBytes run smallIters timed iterations and a tenth of
  // that (at least warmupIters) untimed, as OSU's benchmarks give small messages more iterations
  // than large ones: 20 iterations of a 6 us collective time 120 us, which one descheduling of a
  // rank decides. 0 = every row runs iters.
  int smallIters = 0;
  uint64_t smallMaxBytes = 8192;
  // --settle-iters: the warm-up at the smallest size before the first row runs at least this many
  // iterations: with more busy ranks than cores, the scheduler may keep an uneven placement for the
  // first 50-200 ms of a run (4 ranks on 2 cores: 6-8 us per small AllReduce, 3.4 once settled, and
  // always 3.4 with 2 ranks bound to each core), longer than the per-row warm-up lasts. 0 = off.
  int settleIters = 0;
  int check = 1;  // -c: checked runs after the timed ones, each on fresh inputs (0: none)
  // -a, nccl-tests' --average: how the ranks' times make a row's: 0 rank 0's, 1 the mean, 2 the
  // least, 3 the most (occl's default: a row is as slow as its slowest rank).
  int average = 3;
  int timeoutS = 0;  // -T: config.collTimeoutMs in seconds (0: occl's default)
  std::vector<int> dtypes{occlFloat32};  // occlDataType_t values, in run order
  std::vector<int> ops{occlSum};         // occlRedOp_t values, in run order
  int root = 0;
  int localRanks = 1;  // ranks as threads of this process: -t times -g
  int threads = 1;     // -t, nccl-tests' threads per process (each a thread per rank here)
  int gpus = 1;        // -g, nccl-tests' GPUs per thread
  occlBackend_t backend = occlBackendAuto;
  std::vector<int> devlist;  // --devlist: the CUDA device of each rank of -g; empty = rank r on r % devices
  std::string algorithm;  // --algo: passed as occlCollDesc_t.algorithm; empty = built-in
  int blocks = 0;         // --blocks: occlCollDesc_t.nBlocks; 0 = the algorithm's default
  // --shared-buffers: buffers from occlMemAlloc, registered with occlCollDesc_t.sharedBuffers;
  // -1 (auto) = 1 for host ranks as processes (under a launcher), else 0.
  int sharedBuffers = -1;
  bool compareNccl = false;
  std::string jsonPath;
  bool mpi = false;  // --mpi: one rank per process even without a launcher's variables
  bool timeline = false;  // --timeline: config.timelineDepth, and a footer line per row from it
  SubmitMode submit = SubmitMode::Plain;  // --submit
  // --max-count: every size registered for this many bytes with desc.variableCount, and submitted
  // with its own count (occlSubmitCount), as a framework with changing shapes registers; 0: each
  // size registered for its own count.
  uint64_t maxCountBytes = 0;
  bool help = false;
  bool version = false;
};

struct ParsedArgs {
  Options options;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};

// args[0] is the program path: its basename selects the collective when it is an nccl-tests
// binary name (all_reduce_perf, ...). Later flags override earlier ones, as with getopt.
ParsedArgs parseArgs(const std::vector<std::string>& args);

// "64", "64K", "1M", "2g": a byte count with an optional binary K/M/G suffix (either case).
using cli::parseBytes;
// "allreduce", "all_reduce", "all_reduce_perf", "AllReduce", ... -> Coll.
std::optional<Coll> collFromName(std::string_view name);
std::optional<int> dtypeFromName(std::string_view name);
std::optional<int> opFromName(std::string_view name);

const char* collName(Coll coll);
const char* dtypeName(int dtype);  // nccl-tests' spelling: half, float, bfloat16, ...
const char* opName(int op);
size_t dtypeSize(int dtype);

// The timed and untimed iterations of a row of `bytes` (--small-iters, --small-max, -n, -w).
struct IterCounts {
  int warmup;
  int timed;
};
IterCounts itersFor(const Options& options, uint64_t bytes);
// The header lines that say what --small-iters and --settle-iters changed ("" when both are off),
// for occl-bench's table and the baselines'.
std::string iterationLines(const Options& options);
// Iterations of the warm-up at the smallest size before the first row (--settle-iters).
int settleWarmUpIters(const Options& options, uint64_t bytes);

// -a: the row's time from this rank's `t` and the ranks' `max` and `sum` of a value (each rank
// calls with its own; every rank gets the same answer).
template <class Max, class Sum>
double agreedTime(int average, double t, int rank, int nRanks, Max max, Sum sum) {
  switch (average) {
    case 0: return sum(rank == 0 ? t : 0.0);
    case 1: return sum(t) / nRanks;
    case 2: return -max(-t);
    default: return max(t);
  }
}

// The sizes to run, nccl-tests' sequence: minBytes, then times stepFactor (or plus stepBytes)
// while not above maxBytes.
std::vector<uint64_t> sizeSequence(const Options& options);

std::string usage(const std::string& program);
// The usage lines of the size sweep and the check (-b -e -f -i -n -w -c) and of --help and
// --version, which the baselines in bench/baselines share.
std::string sweepUsage();

}  // namespace occl::bench
