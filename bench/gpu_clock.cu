// occl-gpu-clock: the clock the daemon stamps its timeline with (exec::nowNs: %globaltimer), read
// against the SM's cycle counter (clock64) and the host's CUDA events, on one GPU. The timeline of
// 2026-11-30 (bench/results/gpu-2026-11-30.md) had medians that did not add up: take to done 26.6 µs
// where a whole submission took 24.6. Whether the stamps can be trusted below a microsecond
// depends on how often %globaltimer moves (every 32 ns on some parts, every 1 µs on others, and
// under a hypervisor it may be coarser), which this measures:
//   steps    : one thread reads %globaltimer `--reads` times back to back; the distinct steps
//              between successive values (smallest, median, largest) are the timer's resolution
//   spin-N   : one thread spins N clock64 cycles; the same span by %globaltimer, by clock64 over
//              the SM clock the device reports, and by CUDA events around the launch
//
//   occl-gpu-clock [--reads N] [--device D]
//
// Compiled in every CUDA build (here without a GPU it reports "no CUDA device" and exits 1); run by
// tools/gpu/run_gpu_suite.sh's quick step before the timelines.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "device/compat.hpp"

namespace {

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "occl-gpu-clock: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// Successive %globaltimer readings of one thread, as the daemon takes them (exec::nowNs).
__global__ void readTimer(uint64_t* out, int reads) {
  for (int i = 0; i < reads; ++i) out[i] = occl::exec::nowNs();
}

// Spins `cycles` SM cycles; writes the span by each clock: [globaltimer ns, clock64 cycles].
__global__ void spin(uint64_t cycles, uint64_t* out) {
  const uint64_t t0 = occl::exec::nowNs();
  const long long c0 = clock64();
  long long c = c0;
  while (static_cast<uint64_t>(c - c0) < cycles) c = clock64();
  out[0] = occl::exec::nowNs() - t0;
  out[1] = static_cast<uint64_t>(c - c0);
}

// Smallest, median and largest non-zero step between successive readings, and how many readings
// repeated the one before.
void reportSteps(const std::vector<uint64_t>& t) {
  std::vector<uint64_t> steps;
  size_t repeats = 0;
  for (size_t i = 1; i < t.size(); ++i) {
    if (t[i] == t[i - 1]) {
      ++repeats;
      continue;
    }
    steps.push_back(t[i] - t[i - 1]);
  }
  if (steps.empty()) {
    std::printf("steps: %%globaltimer did not move in %zu reads\n", t.size());
    return;
  }
  std::sort(steps.begin(), steps.end());
  std::printf("steps: %zu reads over %.3f us, %zu repeated the previous value; step min %llu ns, median %llu ns, "
              "max %llu ns\n",
              t.size(), static_cast<double>(t.back() - t.front()) / 1e3, repeats,
              static_cast<unsigned long long>(steps.front()), static_cast<unsigned long long>(steps[steps.size() / 2]),
              static_cast<unsigned long long>(steps.back()));
}

}  // namespace

int main(int argc, char** argv) {
  int reads = 4096, device = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reads") == 0 && i + 1 < argc) {
      reads = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: occl-gpu-clock [--reads N] [--device D]\n");
      return 2;
    }
  }
  if (reads < 2) {
    std::fprintf(stderr, "occl-gpu-clock: --reads %d: expected at least 2\n", reads);
    return 2;
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "occl-gpu-clock: no CUDA device\n");
    return 1;
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  int clockKHz = 0;
  check(cudaDeviceGetAttribute(&clockKHz, cudaDevAttrClockRate, device), "cudaDeviceGetAttribute(ClockRate)");
  std::printf("device %d: SM clock %d MHz as the device reports it (the clock may run slower or boost)\n", device,
              clockKHz / 1000);

  uint64_t* d = nullptr;
  check(cudaMalloc(&d, sizeof(uint64_t) * static_cast<size_t>(reads)), "cudaMalloc");
  readTimer<<<1, 1>>>(d, reads);  // once to load the code, then timed
  readTimer<<<1, 1>>>(d, reads);
  check(cudaDeviceSynchronize(), "readTimer");
  std::vector<uint64_t> t(static_cast<size_t>(reads));
  check(cudaMemcpy(t.data(), d, sizeof(uint64_t) * t.size(), cudaMemcpyDeviceToHost), "cudaMemcpy");
  reportSteps(t);

  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (uint64_t cycles : {uint64_t{2000}, uint64_t{20000}, uint64_t{200000}, uint64_t{2000000}}) {
    check(cudaEventRecord(start), "cudaEventRecord");
    spin<<<1, 1>>>(cycles, d);
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "spin");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    uint64_t span[2] = {0, 0};
    check(cudaMemcpy(span, d, sizeof span, cudaMemcpyDeviceToHost), "cudaMemcpy");
    std::printf("spin-%llu: %%globaltimer %.3f us, clock64 %llu cycles = %.3f us at %d MHz, events around the "
                "launch %.3f us\n",
                static_cast<unsigned long long>(cycles), static_cast<double>(span[0]) / 1e3,
                static_cast<unsigned long long>(span[1]), static_cast<double>(span[1]) / (clockKHz / 1e3),
                clockKHz / 1000, ms * 1e3);
  }
  check(cudaFree(d), "cudaFree");
  return 0;
}
