// occl-micro: what registered collectives cost, and how fast tiny submissions go, through the
// public API on one-rank host communicators (no peers to wait for: the costs are occl's own).
//   BM_Register/N    : N AllReduces registered on a fresh communicator. Counters: us_per_reg
//                      (wall time of one registration) and bytes_per_reg (resident memory the
//                      process grew by, /proc/self/statm, divided by N).
//   BM_SubmitTiny/B  : batches of B submissions of a 0-byte AllReduce (B collIds), then
//                      occlCommWaitAll: items/s is submissions completed per second.
//   BM_SubmitBurst/G/W : bursts of 32 AllReduces of 8 B (32 collIds) as occlSubmitGroup calls of
//                      G entries (G = 1: 32 occlSubmit calls). W = 1: then occlCommWaitAll, whose
//                      thread runs the daemon itself; W = 0: then the caller yields until the
//                      callbacks have fired, so the daemon's own thread runs the burst, woken by
//                      the submissions' doorbell. Counters: submit_ns (the submit calls' wall time
//                      per collective) and items/s (collectives completed per second, the whole
//                      burst).
//   BM_SubmitBurstCuda/G/W : the same on a one-rank CUDA communicator (device 0, buffers in its
//                      memory; CUDA builds only): the SQ is then mapped host memory that the
//                      daemon kernel polls, so submit_ns is the host's side and items/s the whole
//                      round trip through the GPU.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#if OCCL_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include "occl/occl.h"

namespace {

size_t residentBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

occlComm_t oneRankComm(occlBackend_t backend = occlBackendHost) {
  occlConfig_t config;
  occlConfigInit(&config);
  config.backend = backend;
  occlComm_t comm = nullptr;
  const int device = 0;
  if (occlCommInitAll(&comm, 1, backend == occlBackendCuda ? &device : nullptr, &config) != occlSuccess) return nullptr;
  return comm;
}

// A burst's send and receive floats, `floats` of each: host memory, or device 0's on the CUDA
// backend (left uninitialised there: the timings do not read the results).
class BurstBuffers {
 public:
  BurstBuffers(occlBackend_t backend, size_t floats) : floats_(floats), device_(backend == occlBackendCuda) {
    if (!device_) {
      host_.assign(2 * floats, 1.0f);
      base_ = host_.data();
      return;
    }
#if OCCL_HAVE_CUDA
    void* p = nullptr;
    if (cudaMalloc(&p, 2 * floats * sizeof(float)) == cudaSuccess) base_ = static_cast<float*>(p);
#endif
  }
  BurstBuffers(const BurstBuffers&) = delete;
  BurstBuffers& operator=(const BurstBuffers&) = delete;
  ~BurstBuffers() {
#if OCCL_HAVE_CUDA
    if (device_ && base_ != nullptr) cudaFree(base_);
#endif
  }
  bool ok() const { return base_ != nullptr; }
  float* send(size_t at) { return base_ + at; }
  float* recv(size_t at) { return base_ + floats_ + at; }

 private:
  size_t floats_;
  bool device_;
  std::vector<float> host_;
  float* base_ = nullptr;
};

occlCollDesc_t tinyAllReduce(size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = count;
  return d;
}

void BM_Register(benchmark::State& state) {
  const auto n = static_cast<uint64_t>(state.range(0));
  double seconds = 0, bytes = 0;
  for (auto _ : state) {
    occlComm_t comm = oneRankComm();
    if (comm == nullptr) {
      state.SkipWithError("occlCommInitAll failed");
      return;
    }
    const occlCollDesc_t d = tinyAllReduce(256);
    const size_t before = residentBytes();
    const auto start = std::chrono::steady_clock::now();
    for (uint64_t id = 0; id < n; ++id) {
      if (occlCollRegister(comm, id, &d) != occlSuccess) {
        state.SkipWithError(occlGetLastError(comm));
        break;
      }
    }
    seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bytes += static_cast<double>(residentBytes() - before);
    occlCommDestroy(comm);
  }
  const double regs = static_cast<double>(n) * static_cast<double>(state.iterations());
  state.counters["us_per_reg"] = seconds * 1e6 / regs;
  state.counters["bytes_per_reg"] = bytes / regs;
}
BENCHMARK(BM_Register)->Arg(20000)->Arg(100000)->Iterations(1)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_SubmitTiny(benchmark::State& state) {
  const auto batch = static_cast<uint64_t>(state.range(0));
  occlComm_t comm = oneRankComm();
  if (comm == nullptr) {
    state.SkipWithError("occlCommInitAll failed");
    return;
  }
  const occlCollDesc_t d = tinyAllReduce(0);
  for (uint64_t id = 0; id < batch; ++id) (void)occlCollRegister(comm, id, &d);
  for (auto _ : state) {
    for (uint64_t id = 0; id < batch; ++id) {
      if (occlSubmit(comm, id, nullptr, nullptr, nullptr, nullptr) != occlSuccess) {
        state.SkipWithError(occlGetLastError(comm));
        break;
      }
    }
    if (occlCommWaitAll(comm, 60000) != occlSuccess) state.SkipWithError(occlGetLastError(comm));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(batch));
  occlCommDestroy(comm);
}
BENCHMARK(BM_SubmitTiny)->Arg(1)->Arg(64)->UseRealTime();

void submitBurst(benchmark::State& state, occlBackend_t backend) {
  constexpr int kBurst = 32;
  const auto group = static_cast<int>(state.range(0));
  const bool waitAll = state.range(1) != 0;
  BurstBuffers buffers(backend, 2 * kBurst);
  if (!buffers.ok()) {
    state.SkipWithError("no device memory (cudaMalloc failed)");
    return;
  }
  occlComm_t comm = oneRankComm(backend);
  if (comm == nullptr) {
    state.SkipWithError("occlCommInitAll failed");
    return;
  }
  const occlCollDesc_t d = tinyAllReduce(2);  // 8 bytes of float
  std::vector<occlSubmission_t> subs(kBurst);
  std::atomic<int64_t> fired{0};
  const occlCallback_t count = [](uint64_t, occlResult_t, void* arg) {
    static_cast<std::atomic<int64_t>*>(arg)->fetch_add(1, std::memory_order_release);
  };
  for (int id = 0; id < kBurst; ++id) {
    (void)occlCollRegister(comm, static_cast<uint64_t>(id), &d);
    subs[id] = {static_cast<uint64_t>(id), buffers.send(2 * id), buffers.recv(2 * id), count, &fired,
               OCCL_COUNT_REGISTERED};
  }
  int64_t expected = 0;
  double submitSeconds = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    for (int first = 0; first < kBurst; first += group) {
      const occlResult_t r = group == 1 ? occlSubmit(comm, subs[first].collId, subs[first].sendbuf,
                                                     subs[first].recvbuf, count, &fired)
                                        : occlSubmitGroup(comm, &subs[first], group, nullptr);
      if (r != occlSuccess) {
        state.SkipWithError(occlGetLastError(comm));
        break;
      }
    }
    submitSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    expected += kBurst;
    if (waitAll) {
      if (occlCommWaitAll(comm, 60000) != occlSuccess) state.SkipWithError(occlGetLastError(comm));
    } else {
      while (fired.load(std::memory_order_acquire) < expected) std::this_thread::yield();
    }
  }
  const auto colls = state.iterations() * static_cast<int64_t>(kBurst);
  state.SetItemsProcessed(colls);
  state.counters["submit_ns"] = submitSeconds * 1e9 / static_cast<double>(colls);
  occlCommDestroy(comm);
}

void BM_SubmitBurst(benchmark::State& state) { submitBurst(state, occlBackendHost); }
BENCHMARK(BM_SubmitBurst)->ArgsProduct({{1, 8, 32}, {1, 0}})->UseRealTime();

#if OCCL_HAVE_CUDA
void BM_SubmitBurstCuda(benchmark::State& state) { submitBurst(state, occlBackendCuda); }
BENCHMARK(BM_SubmitBurstCuda)->ArgsProduct({{1, 8, 32}, {1, 0}})->UseRealTime();
#endif

}  // namespace
