// occl-micro: what a host AllReduce costs when ranks use each other's buffers in place instead of
// passing every byte through connector slots: the bound of occl's peer program
// (primitives/peer_read.hpp) on this machine, without its daemon, notices or preemption. See
// bench/results/host-2026-11-26c.md. 4 ranks as threads, float sum.
//   BM_PeerReadAllReduce/bytes  : pull. Rank r sums slice r of the 4 inputs into its output,
//                                 tile by tile (reduceCopy, as a step does), then copies the 3
//                                 other slices from their owners' outputs.
//   BM_PeerPushAllReduce/bytes  : push, what the peer program does. Rank r folds slice r of the 4
//                                 inputs tile by tile and writes each tile into all 4 outputs.
// Both wait at a barrier where the program waits for notices: after the last phase (every output
// written before the next run overwrites one), and in pull also between the phases.
// Bytes/s counts one rank's buffer (algorithm bandwidth, as occl-bench's algbw); the `busbw`
// counter is occl-bench's AllReduce bus bandwidth, 2 (n-1)/n of it.
//   BM_ProcessVmReadv/bytes     : what ranks as processes would pay to read a peer's buffer
//                                 without shared memory (cross-memory attach, process_vm_readv),
//                                 in tiles of 128 KiB. It reads this process's own memory: the
//                                 kernel's path (pin the source pages, copy) is the same.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <barrier>
#include <cstddef>
#include <cstring>
#include <memory>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

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
  std::barrier<> sync;
};

std::unique_ptr<PeerReadRun> gRun;  // made by thread 0 before the loop, whose start is a barrier

void reduceOwnSlice(PeerReadRun& run, int rank, size_t begin, size_t end) {
  float* d = run.out[rank].data();
  for (size_t t = begin; t < end; t += kTileElems) {
    const size_t len = std::min(kTileElems, end - t);
    // One tile at a time: the partial sum stays in cache while the next input is added.
    occl::reduceCopy<float, occl::ops::Sum>(run.in[0].data() + t, run.in[1].data() + t, d + t, nullptr, len, 0);
    for (int p = 2; p < kRanks; ++p)
      occl::reduceCopy<float, occl::ops::Sum>(d + t, run.in[p].data() + t, d + t, nullptr, len, 0);
  }
}

// Checks the sums and sets the rates. Set on every thread: Google Benchmark sums a counter over
// the threads and divides a rate by their summed time, so one thread's bytes alone would read as a
// quarter of the rate.
void reportAllReduce(benchmark::State& state, int rank) {
  // Every element is 1 + 2 + 3 + 4 on every rank, or the figure is not of an AllReduce.
  if (rank == 0) {
    for (const auto& o : gRun->out) {
      if (std::any_of(o.begin(), o.end(), [](float v) { return v != 10.0f; })) state.SkipWithError("wrong sum");
    }
  }
  const auto bytes = static_cast<double>(state.range(0)) * static_cast<double>(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["busbw"] = benchmark::Counter(bytes * 2.0 * (kRanks - 1) / kRanks, benchmark::Counter::kIsRate);
}

void BM_PeerReadAllReduce(benchmark::State& state) {
  const size_t elems = static_cast<size_t>(state.range(0)) / sizeof(float);
  if (state.thread_index() == 0) gRun = std::make_unique<PeerReadRun>(elems);
  const int rank = state.thread_index();
  const size_t slice = (elems + kRanks - 1) / kRanks;
  for (auto _ : state) {
    PeerReadRun& run = *gRun;
    reduceOwnSlice(run, rank, std::min(elems, rank * slice), std::min(elems, (rank + 1) * slice));
    run.sync.arrive_and_wait();
    for (int p = 0; p < kRanks; ++p) {
      const size_t begin = std::min(elems, p * slice), end = std::min(elems, (p + 1) * slice);
      if (p != rank && end > begin)
        std::memcpy(run.out[rank].data() + begin, run.out[p].data() + begin, (end - begin) * sizeof(float));
    }
    run.sync.arrive_and_wait();
  }
  reportAllReduce(state, rank);
}
BENCHMARK(BM_PeerReadAllReduce)->Arg(16 << 20)->Arg(64 << 20)->Threads(kRanks)->UseRealTime();

void pushOwnSlice(PeerReadRun& run, int rank, size_t begin, size_t end) {
  float* d = run.out[rank].data();
  for (size_t t = begin; t < end; t += kTileElems) {
    const size_t len = std::min(kTileElems, end - t);
    occl::reduceCopy<float, occl::ops::Sum>(run.in[rank].data() + t, run.in[(rank + 1) % kRanks].data() + t, d + t,
                                            nullptr, len, 0);
    for (int k = 2; k < kRanks; ++k)
      occl::reduceCopy<float, occl::ops::Sum>(d + t, run.in[(rank + k) % kRanks].data() + t, d + t, nullptr, len, 0);
    for (int p = 0; p < kRanks; ++p)
      if (p != rank) std::memcpy(run.out[p].data() + t, d + t, len * sizeof(float));
  }
}

void BM_PeerPushAllReduce(benchmark::State& state) {
  const size_t elems = static_cast<size_t>(state.range(0)) / sizeof(float);
  if (state.thread_index() == 0) gRun = std::make_unique<PeerReadRun>(elems);
  const int rank = state.thread_index();
  const size_t slice = (elems + kRanks - 1) / kRanks;
  for (auto _ : state) {
    pushOwnSlice(*gRun, rank, std::min(elems, rank * slice), std::min(elems, (rank + 1) * slice));
    gRun->sync.arrive_and_wait();
  }
  reportAllReduce(state, rank);
}
BENCHMARK(BM_PeerPushAllReduce)->Arg(16 << 20)->Arg(64 << 20)->Threads(kRanks)->UseRealTime();

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
