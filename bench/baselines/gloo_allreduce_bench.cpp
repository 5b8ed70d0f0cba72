// gloo-allreduce-bench: gloo::allreduce (float sum, ring algorithm, TCP transport on 127.0.0.1,
// or on the interface GLOO_SOCKET_IFNAME names, as torch.distributed's Gloo takes it), measured
// and printed as occl-bench measures and prints occl's AllReduce (see baseline.hpp).
//   gloo-allreduce-bench -g 4 -b 8 -e 64M -f 2        4 ranks as threads, in-memory store
//   RANK=r WORLD_SIZE=4 GLOO_STORE_DIR=DIR gloo-allreduce-bench ...   one rank per process
// (OMPI_COMM_WORLD_RANK/SIZE, as mpirun sets them, work too). Processes meet through a file store
// in GLOO_STORE_DIR, which must be empty: keys left by an earlier run would send ranks to dead
// addresses. Ranks on several hosts (bench/baselines/run_net_comparison.sh) set GLOO_SOCKET_IFNAME.
//
// Gloo's algorithm is in place by nature: it reduces in the output buffer. Given a separate
// input, it copies each segment of it into the output just before the segment is first sent or
// reduced, so the out-of-place column is that copy plus the in-place algorithm.
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baseline.hpp"
#include "gloo_ranks.hpp"

namespace {

using namespace occl::bench;
using namespace occl::bench::baseline;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

class Gloo final : public Library {
 public:
  // One TCP device (one event-loop thread) per rank, as each rank would have in its own process.
  Gloo(gloo::rendezvous::Store& store, int rank, int nRanks) : context_(gloo_ranks::connect(store, rank, nRanks)) {}

  void allreduce(const float* send, float* recv, size_t count) override {
    if (count == 0) return;  // gloo refuses empty buffers, and there is nothing to reduce
    gloo::AllreduceOptions opts(context_);
    if (send != recv) opts.setInput(const_cast<float*>(send), count);  // only read
    opts.setOutput(recv, count);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }
  void barrier() override { gloo_ranks::barrier(context_); }
  double max(double value) override { return gloo_ranks::reduce(context_, value, /*max=*/true); }
  double sum(double value) override { return gloo_ranks::reduce(context_, value, /*max=*/false); }

 private:

  std::shared_ptr<gloo::Context> context_;
};

std::mutex errorMutex;

std::string preamble(const Options& o, int nRanks, bool processes) {
  return "# gloo-allreduce-bench: gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
         std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + ", " + std::to_string(nRanks) +
         " rank(s) as " + (processes ? "processes (file store)" : "threads (in-memory store)") +
         ", gloo::allreduce float sum over TCP on " + gloo_ranks::where() + " (in place by nature: out of place copies first)\n" +
         sweepLine(o);
}

int runRank(const Options& o, gloo::rendezvous::Store& store, int rank, int nRanks, bool processes) {
  try {
    Gloo library(store, rank, nRanks);
    return runSweep(o, library, rank, nRanks, rank == 0 ? &std::cout : nullptr, preamble(o, nRanks, processes));
  } catch (const std::exception& e) {
    // A rank that fails leaves its peers waiting until gloo's timeout fails them too.
    std::lock_guard<std::mutex> lock(errorMutex);
    std::cerr << "gloo-allreduce-bench: rank " << rank << ": " << e.what() << "\n";
    return kExitFailed;
  }
}

int runThreads(const Options& o) {
  gloo::rendezvous::HashStore store;
  std::vector<int> codes(static_cast<size_t>(o.localRanks), kExitOk);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < o.localRanks; ++r)
      threads.emplace_back([&, r] { codes[static_cast<size_t>(r)] = runRank(o, store, r, o.localRanks, false); });
  }
  for (int c : codes)
    if (c != kExitOk) return c;
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  const std::string program = std::filesystem::path(args[0]).filename().string();
  Options options;
  if (std::string error = parse(args, options); !error.empty()) {
    std::cerr << program << ": " << error << "\n";
    return kExitUsage;
  }
  if (options.help) {
    std::cout << usage(program,
                       "  -g,--ngpus N           ranks as threads of this process (at least 2)\n"
                       "  processes: RANK, WORLD_SIZE and GLOO_STORE_DIR (an empty shared directory)\n");
    return kExitOk;
  }
  if (options.version) {
    std::cout << occl::cli::versionLine(program) << "\n";
    return kExitOk;
  }
  const gloo_ranks::Placement placed = gloo_ranks::placement(options.localRanks, options.mpi);
  if (!placed.error.empty()) {
    std::cerr << program << ": " << placed.error << "\n";
    return kExitUsage;
  }
  if (!placed.processes) return runThreads(options);
  std::filesystem::create_directories(placed.storeDir);
  gloo::rendezvous::FileStore store(placed.storeDir);
  return runRank(options, store, placed.rank, placed.nRanks, true);
}
