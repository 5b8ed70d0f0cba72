// occl-micro: what registered collectives cost, and how fast tiny submissions go, through the
// public API on one-rank host communicators (no peers to wait for: the costs are occl's own).
//   BM_Register/N    : N AllReduces registered on a fresh communicator. Counters: us_per_reg
//                      (wall time of one registration) and bytes_per_reg (resident memory the
//                      process grew by, /proc/self/statm, divided by N).
//   BM_SubmitTiny/B  : batches of B submissions of a 0-byte AllReduce (B collIds), then
//                      occlCommWaitAll: items/s is submissions completed per second.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

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

occlComm_t oneRankComm() {
  occlConfig_t config;
  occlConfigInit(&config);
  config.backend = occlBackendHost;
  occlComm_t comm = nullptr;
  if (occlCommInitAll(&comm, 1, nullptr, &config) != occlSuccess) return nullptr;
  return comm;
}

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

}  // namespace
