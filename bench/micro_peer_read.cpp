// occl-micro: what a host AllReduce costs when ranks use each other's buffers in place instead of
// passing every byte through connector slots: the bound of occl's peer program
// (primitives/peer_read.hpp) on this machine, without its daemon, notices or preemption. See
// bench/results/host-2026-11-26c.md. 4 ranks as threads, float sum; one iteration is one
// AllReduce of all 4 (RankTeam).
//   BM_PeerReadAllReduce/bytes  : pull. Rank r sums slice r of the 4 inputs into its output,
//                                 tile by tile (reduceCopy, as a step does), then copies the 3
//                                 other slices from their owners' outputs.
//   BM_PeerPushAllReduce/bytes:B/stream:S : push, what the peer program does. Rank r folds slice
//                                 r of the 4 inputs tile by tile and writes each tile into the
//                                 3 other outputs as the program does (copyToPeer): memcpy
//                                 (S = 0) or streaming stores (S = 1), out of place.
// Both end at a barrier where the program waits for notices (every output written before the
// next run overwrites one), and pull also waits between its phases.
// Bytes/s counts one rank's buffer (algorithm bandwidth, as occl-bench's algbw); the `busbw`
// counter is occl-bench's AllReduce bus bandwidth, 2 (n-1)/n of it.
//   BM_ProcessVmReadv/bytes     : what ranks as processes would pay to read a peer's buffer
//                                 without shared memory (cross-memory attach, process_vm_readv),
//                                 in tiles of 128 KiB. It reads this process's own memory: the
//                                 kernel's path (pin the source pages, copy) is the same.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cstddef>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

#include "primitives/peer_read.hpp"
#include "primitives/reduce_copy.hpp"
#include "primitives/reduce_ops.hpp"

namespace {

constexpr int kRanks = 4;
constexpr size_t kTileElems = (128 << 10) / sizeof(float);  // the default tile within a host

struct PeerReadRun {
  explicit PeerReadRun(size_t elems) : n(elems), in(kRanks), out(kRanks), sync(kRanks) {
    for (int r = 0; r < kRanks; ++r) {
      in[r].assign(n, static_cast<float>(r + 1));
      out[r].assign(n, 0.0f);
    }
  }
  size_t n;
  std::vector<std::vector<float>> in, out;
  std::barrier<> sync;  // between the pull version's two phases

  size_t begin(int rank) const { return std::min(n, rank * slice()); }
  size_t end(int rank) const { return std::min(n, (rank + 1) * slice()); }
  size_t slice() const { return (n + kRanks - 1) / kRanks; }
};

// Ranks 1..kRanks-1 on threads of their own and rank 0 on the benchmark's thread, so that one
// iteration is one AllReduce of every rank, timed from its start to the last rank's end. `work`
// must not throw: a rank that left mid-iteration would leave the others at the barrier.
// (Google Benchmark's Threads(n) counts each thread's pass as an iteration and divides the wall
// time by their sum: it reported a quarter of the AllReduce's time.)
class RankTeam {
 public:
  explicit RankTeam(std::function<void(int)> work) : work_(std::move(work)), start_(kRanks), end_(kRanks) {
    for (int r = 1; r < kRanks; ++r) {
      threads_.emplace_back([this, r] {
        for (;;) {
          start_.arrive_and_wait();
          if (stop_.load(std::memory_order_relaxed)) return;
          work_(r);
          end_.arrive_and_wait();
        }
      });
    }
  }
  RankTeam(const RankTeam&) = delete;
  RankTeam& operator=(const RankTeam&) = delete;
  ~RankTeam() {
    stop_.store(true, std::memory_order_relaxed);  // the barrier orders it before the threads look
    start_.arrive_and_wait();
  }

  void allReduce() {
    start_.arrive_and_wait();
    work_(0);
    end_.arrive_and_wait();
  }

 private:
  std::function<void(int)> work_;
  std::barrier<> start_, end_;
  std::atomic<bool> stop_{false};
  std::vector<std::jthread> threads_;  // declared last: joined before the barriers go
};

// Checks the sums and sets the rates: bytes/s counts one rank's buffer per AllReduce (algbw, as
// occl-bench's), `busbw` is occl-bench's AllReduce bus bandwidth, 2 (n-1)/n of it.
void reportAllReduce(benchmark::State& state, const PeerReadRun& run) {
  // Every element is 1 + 2 + 3 + 4 on every rank, or the figure is not of an AllReduce.
  for (const auto& o : run.out) {
    if (std::any_of(o.begin(), o.end(), [](float v) { return v != 10.0f; })) state.SkipWithError("wrong sum");
  }
  const auto bytes = static_cast<double>(state.range(0)) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["busbw"] = benchmark::Counter(bytes * 2.0 * (kRanks - 1) / kRanks, benchmark::Counter::kIsRate);
}

void reduceOwnSlice(PeerReadRun& run, int rank) {
  float* d = run.out[rank].data();
  for (size_t t = run.begin(rank); t < run.end(rank); t += kTileElems) {
    const size_t len = std::min(kTileElems, run.end(rank) - t);
    // One tile at a time: the partial sum stays in cache while the next input is added.
    occl::reduceCopy<float, occl::ops::Sum>(run.in[0].data() + t, run.in[1].data() + t, d + t, nullptr, len, 0);
    for (int p = 2; p < kRanks; ++p)
      occl::reduceCopy<float, occl::ops::Sum>(d + t, run.in[p].data() + t, d + t, nullptr, len, 0);
  }
}

void BM_PeerReadAllReduce(benchmark::State& state) {
  PeerReadRun run(static_cast<size_t>(state.range(0)) / sizeof(float));
  RankTeam team([&run](int rank) {
    reduceOwnSlice(run, rank);
    run.sync.arrive_and_wait();
    for (int p = 0; p < kRanks; ++p) {
      if (p != rank && run.end(p) > run.begin(p))
        std::memcpy(run.out[rank].data() + run.begin(p), run.out[p].data() + run.begin(p),
                    (run.end(p) - run.begin(p)) * sizeof(float));
    }
  });
  for (auto _ : state) team.allReduce();
  reportAllReduce(state, run);
}
BENCHMARK(BM_PeerReadAllReduce)->Arg(16 << 20)->Arg(64 << 20)->UseRealTime();

void pushOwnSlice(PeerReadRun& run, int rank, bool stream) {
  float* d = run.out[rank].data();
  for (size_t t = run.begin(rank); t < run.end(rank); t += kTileElems) {
    const size_t len = std::min(kTileElems, run.end(rank) - t);
    occl::reduceCopy<float, occl::ops::Sum>(run.in[rank].data() + t, run.in[(rank + 1) % kRanks].data() + t, d + t,
                                            nullptr, len, 0);
    for (int k = 2; k < kRanks; ++k)
      occl::reduceCopy<float, occl::ops::Sum>(d + t, run.in[(rank + k) % kRanks].data() + t, d + t, nullptr, len, 0);
    for (int p = 0; p < kRanks; ++p) {
      if (p != rank)
        occl::copyToPeer(reinterpret_cast<char*>(run.out[p].data() + t), reinterpret_cast<const char*>(d + t),
                         len * sizeof(float), stream);
    }
  }
}

void BM_PeerPushAllReduce(benchmark::State& state) {
  PeerReadRun run(static_cast<size_t>(state.range(0)) / sizeof(float));
  const bool stream = state.range(1) != 0;
  RankTeam team([&run, stream](int rank) { pushOwnSlice(run, rank, stream); });
  for (auto _ : state) team.allReduce();
  reportAllReduce(state, run);
}
BENCHMARK(BM_PeerPushAllReduce)
    ->ArgsProduct({{1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20, 32 << 20, 64 << 20}, {0, 1}})
    ->ArgNames({"bytes", "stream"})
    ->UseRealTime();

void BM_ProcessVmReadv(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  constexpr size_t kTile = 128 << 10;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  const pid_t self = getpid();
  for (auto _ : state) {
    for (size_t off = 0; off < bytes; off += kTile) {
      const size_t len = std::min(kTile, bytes - off);
      iovec local{dst.data() + off, len};
      iovec remote{src.data() + off, len};
      if (process_vm_readv(self, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(len)) {
        state.SkipWithError("process_vm_readv failed (not permitted here?)");
        return;
      }
    }
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_ProcessVmReadv)->Arg(64 << 20)->UseRealTime();

}  // namespace
