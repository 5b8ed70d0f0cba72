// gloo-moe-bench: the MoE token exchange (moe.hpp) on gloo::alltoallv (bytes, blocks packed in
// rank order, as torch.distributed's Gloo all_to_all_single passes them), over Gloo's TCP
// transport (gloo_ranks.hpp):
//   gloo-moe-bench -g 8                                      8 ranks as threads
//   GLOO_STORE_DIR=DIR mpirun -np 8 gloo-moe-bench           one rank per process
#include <gloo/alltoallv.h>
#include <gloo/config.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>

#include <filesystem>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/flags.hpp"
#include "gloo_ranks.hpp"
#include "moe.hpp"

namespace {

using namespace occl::bench;
using namespace occl::bench::moe;

class Gloo final : public Exchange {
 public:
  Gloo(gloo::rendezvous::Store& store, int rank, int nRanks) : context_(gloo_ranks::connect(store, rank, nRanks)) {}

  void alltoallv(const uint8_t* send, const std::vector<size_t>& sendCounts, const std::vector<size_t>&, uint8_t* recv,
                 const std::vector<size_t>& recvCounts, const std::vector<size_t>&) override {
    gloo::AlltoallvOptions opts(context_);
    opts.setInput(const_cast<uint8_t*>(send), std::vector<int64_t>(sendCounts.begin(), sendCounts.end()));
    opts.setOutput(recv, std::vector<int64_t>(recvCounts.begin(), recvCounts.end()));
    gloo::alltoallv(opts);
  }
  void barrier() override { gloo_ranks::barrier(context_); }
  double max(double value) override { return gloo_ranks::reduce(context_, value, /*max=*/true); }
  double sum(double value) override { return gloo_ranks::reduce(context_, value, /*max=*/false); }

 private:
  std::shared_ptr<gloo::Context> context_;
};

std::mutex errorMutex;

int runRank(const Options& o, gloo::rendezvous::Store& store, int rank, int nRanks, bool processes) {
  try {
    Gloo exchange(store, rank, nRanks);
    const std::string preamble = "# gloo-moe-bench: gloo " + std::to_string(GLOO_VERSION_MAJOR) + "." +
                                 std::to_string(GLOO_VERSION_MINOR) + "." + std::to_string(GLOO_VERSION_PATCH) +
                                 ", gloo::alltoallv over TCP on " + gloo_ranks::where() + ", " +
                                 std::to_string(nRanks) + " rank(s) as " + (processes ? "processes" : "threads") + "\n";
    return run(o, exchange, rank, nRanks, rank == 0 ? &std::cout : nullptr, preamble);
  } catch (const std::exception& e) {
    std::lock_guard<std::mutex> lock(errorMutex);
    std::cerr << "gloo-moe-bench: rank " << rank << ": " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv, argv + argc);
  const std::string program = std::filesystem::path(args[0]).filename().string();
  Options o;
  if (std::string error = parse(args, o); !error.empty()) {
    std::cerr << program << ": " << error << "\n";
    return kExitUsage;
  }
  if (o.help) {
    std::cout << usage(program, "  -g,--ngpus N         ranks as threads of this process (at least 2)\n"
                                "  processes: RANK, WORLD_SIZE (or mpirun's) and GLOO_STORE_DIR, an empty directory\n");
    return kExitOk;
  }
  if (o.version) {
    std::cout << occl::cli::versionLine(program) << "\n";
    return kExitOk;
  }
  const gloo_ranks::Placement placed = gloo_ranks::placement(o.localRanks, false);
  if (!placed.error.empty()) {
    std::cerr << program << ": " << placed.error << "\n";
    return kExitUsage;
  }
  if (placed.processes) {
    std::filesystem::create_directories(placed.storeDir);
    gloo::rendezvous::FileStore store(placed.storeDir);
    return runRank(o, store, placed.rank, placed.nRanks, true);
  }
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
