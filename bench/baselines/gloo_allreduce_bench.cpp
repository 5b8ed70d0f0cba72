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
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "baseline.hpp"

namespace {

using namespace occl::bench;
using namespace occl::bench::baseline;
using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// The interface GLOO_SOCKET_IFNAME names, else the loopback address.
gloo::transport::tcp::attr deviceAttr() {
  gloo::transport::tcp::attr attr;
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    attr.iface = ifname;
  } else {
    attr.hostname = "127.0.0.1";
  }
  return attr;
}

std::string where() {
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  return ifname != nullptr && *ifname != '\0' ? std::string("interface ") + ifname : std::string("127.0.0.1");
}

class Gloo final : public Library {
 public:
  // One TCP device (one event-loop thread) per rank, as each rank would have in its own process.
  Gloo(gloo::rendezvous::Store& store, int rank, int nRanks) {
    auto device = gloo::transport::tcp::CreateDevice(deviceAttr());
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, nRanks);
    context->connectFullMesh(store, device);
    context_ = context;
  }

  void allreduce(const float* send, float* recv, size_t count) override {
    if (count == 0) return;  // gloo refuses empty buffers, and there is nothing to reduce
    gloo::AllreduceOptions opts(context_);
    if (send != recv) opts.setInput(const_cast<float*>(send), count);  // only read
    opts.setOutput(recv, count);
    opts.setReduceFunction(static_cast<ReduceFn>(&gloo::sum<float>));
    gloo::allreduce(opts);
  }
  void barrier() override {
    gloo::BarrierOptions opts(context_);
    gloo::barrier(opts);
  }
  double max(double value) override { return reduce(value, &gloo::max<double>); }
  double sum(double value) override { return reduce(value, &gloo::sum<double>); }

 private:
  double reduce(double value, ReduceFn fn) {
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(&value, 1);
    opts.setReduceFunction(fn);
    gloo::allreduce(opts);
    return value;
  }

  std::shared_ptr<gloo::Context> context_;
};

std::mutex errorMutex;

std::string preamble(const Options& o, int nRanks, bool processes) {
  return "# gloo-allreduce-bench: gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
         std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) + ", " + std::to_string(nRanks) +
         " rank(s) as " + (processes ? "processes (file store)" : "threads (in-memory store)") +
         ", gloo::allreduce float sum over TCP on " + where() + " (in place by nature: out of place copies first)\n" +
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

std::optional<int> envInt(const char* torchrun, const char* mpirun) {
  for (const char* name : {torchrun, mpirun})
    if (const char* v = std::getenv(name); v != nullptr && *v != '\0') return std::atoi(v);
  return std::nullopt;
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
  const std::optional<int> rank = envInt("RANK", "OMPI_COMM_WORLD_RANK");
  const std::optional<int> size = envInt("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE");
  const char* storeDir = std::getenv("GLOO_STORE_DIR");
  const bool processes = options.mpi || rank.has_value() || size.has_value();
  std::string error;
  if (processes && (!rank || !size || storeDir == nullptr || *storeDir == '\0'))
    error = "one rank per process needs RANK and WORLD_SIZE (or mpirun's) and GLOO_STORE_DIR, an empty directory";
  else if (processes && options.localRanks != 1)
    error = "-g/--ngpus: expected 1 with one rank per process";
  else if ((processes ? *size : options.localRanks) < 2)
    error = "gloo's ring needs at least 2 ranks: use -g N or one process per rank";
  if (!error.empty()) {
    std::cerr << program << ": " << error << "\n";
    return kExitUsage;
  }
  if (!processes) return runThreads(options);
  std::filesystem::create_directories(storeDir);
  gloo::rendezvous::FileStore store(storeDir);
  return runRank(options, store, *rank, *size, true);
}
