// occl-gpu-copy: how fast one daemon block can copy and reduce, and how fast many can, on a GPU
// (issue 40: one daemon block copied at 30-35 GB/s where the device copies at ~2 TB/s). It times,
// with CUDA events, over a buffer in device memory:
//   occl     : the daemon's own loop (primitives/reduce_copy.hpp: reduceCopyLanes, 4 packs per
//              lane in flight, written so that a destination may alias a source)
//   unroll-U : U = 4, 8, 16 packs of 16 bytes per lane loaded before any is stored, pointers
//              declared non-aliasing (__restrict__), plain or streaming (ld.global.cs/st.global.cs)
//   memcpy   : cudaMemcpyAsync device to device, the device's own copy, for reference
// each as a copy (one source) and as a sum of two sources (float), with 1..N blocks of 512
// threads. One line per (kernel, operation, blocks): GB/s of bytes written plus bytes read.
//
//   occl-gpu-copy [--bytes N] [--iters N] [--blocks 1,2,4,...]
//
// Compiled in every CUDA build (here without a GPU it reports "no CUDA device" and exits 1); run by
// tools/gpu/run_gpu_suite.sh's bench step.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "primitives/reduce_copy.hpp"
#include "primitives/reduce_ops.hpp"

namespace {

constexpr int kThreads = 512;  // the daemon's block (daemon_kernel.cu)

void check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "occl-gpu-copy: %s: %s\n", what, cudaGetErrorString(e));
  std::exit(1);
}

// The part of [0, n) that block `b` of `nb` takes, in whole 16-byte packs of floats.
__device__ inline void slice(size_t n, size_t& begin, size_t& count) {
  const size_t perBlock = (n / gridDim.x + 3) & ~size_t{3};
  begin = perBlock * blockIdx.x;
  count = begin >= n ? 0 : (n - begin < perBlock ? n - begin : perBlock);
}

__global__ void occlLoop(const float* a, const float* b, float* d, size_t n) {
  size_t begin, count;
  slice(n, begin, count);
  occl::reduceCopyLanes<float, occl::ops::Sum>(a + begin, b != nullptr ? b + begin : nullptr, d + begin, nullptr, count,
                                               0, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x));
}

template <bool kStreaming>
__device__ inline uint4 load(const uint4* p) {
  if constexpr (kStreaming) return __ldcs(p);
  return *p;
}
template <bool kStreaming>
__device__ inline void store(uint4* p, uint4 v) {
  if constexpr (kStreaming) {
    __stcs(p, v);
  } else {
    *p = v;
  }
}
__device__ inline uint4 addFloats(uint4 x, uint4 y) {
  auto f = [](unsigned u, unsigned v) { return __float_as_uint(__uint_as_float(u) + __uint_as_float(v)); };
  return make_uint4(f(x.x, y.x), f(x.y, y.y), f(x.z, y.z), f(x.w, y.w));
}

// U packs per lane in flight; every buffer 16-byte aligned, n a multiple of 4 floats.
template <int U, bool kStreaming, bool kSum>
__global__ void unrolled(const float* __restrict__ af, const float* __restrict__ bf, float* __restrict__ df, size_t n) {
  size_t begin, count;
  slice(n, begin, count);
  const auto* a = reinterpret_cast<const uint4*>(af + begin);
  const auto* b = reinterpret_cast<const uint4*>(kSum ? bf + begin : af + begin);
  auto* d = reinterpret_cast<uint4*>(df + begin);
  const size_t packs = count / 4, stride = blockDim.x;
  size_t i = threadIdx.x;
  for (; i + (U - 1) * stride < packs; i += U * stride) {
    uint4 x[U];
    uint4 y[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      x[u] = load<kStreaming>(a + i + u * stride);
      if constexpr (kSum) y[u] = load<kStreaming>(b + i + u * stride);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) store<kStreaming>(d + i + u * stride, kSum ? addFloats(x[u], y[u]) : x[u]);
  }
  for (; i < packs; i += stride) store<kStreaming>(d + i, kSum ? addFloats(a[i], b[i]) : a[i]);
}

struct Options {
  size_t bytes = size_t{64} << 20;
  int iters = 20;
  std::vector<int> blocks{1, 2, 4, 8, 16, 32, 64, 132};
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) {
      std::fprintf(stderr, "usage: occl-gpu-copy [--bytes N] [--iters N] [--blocks 1,2,4,...]\n");
      std::exit(2);
    }
    ++i;
    if (flag == "--bytes") {
      o.bytes = std::strtoull(value, nullptr, 10);
    } else if (flag == "--iters") {
      o.iters = std::atoi(value);
    } else if (flag == "--blocks") {
      o.blocks.clear();
      for (const char* p = value; *p != '\0';) {
        char* end = nullptr;
        o.blocks.push_back(static_cast<int>(std::strtol(p, &end, 10)));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      std::fprintf(stderr, "occl-gpu-copy: unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (o.bytes < 4096 || o.iters < 1 || o.blocks.empty()) {
    std::fprintf(stderr, "occl-gpu-copy: --bytes >= 4096, --iters >= 1 and at least one block count expected\n");
    std::exit(2);
  }
  o.bytes &= ~size_t{15};
  return o;
}

template <typename Launch>
double gbPerSecond(const Options& o, bool sum, Launch&& launch) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  launch();  // warm-up
  check(cudaEventRecord(start), "cudaEventRecord");
  for (int i = 0; i < o.iters; ++i) launch();
  check(cudaEventRecord(stop), "cudaEventRecord");
  check(cudaEventSynchronize(stop), "cudaEventSynchronize");
  check(cudaGetLastError(), "cudaGetLastError");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check(cudaEventDestroy(start), "cudaEventDestroy");
  check(cudaEventDestroy(stop), "cudaEventDestroy");
  const double moved = static_cast<double>(o.bytes) * (sum ? 3 : 2) * o.iters;
  return moved / (static_cast<double>(ms) * 1e6);
}

using Kernel = void (*)(const float*, const float*, float*, size_t);

template <bool kSum>
void rowsFor(const Options& o, int nb, const float* a, const float* b, float* d, size_t n) {
  const float* second = kSum ? b : nullptr;
  auto row = [&](const char* name, Kernel kernel) {
    std::printf("%s %s %d %.1f\n", name, kSum ? "sum" : "copy", nb,
                gbPerSecond(o, kSum, [&] { kernel<<<nb, kThreads>>>(a, second, d, n); }));
  };
  row("occl", occlLoop);
  row("unroll-4", unrolled<4, false, kSum>);
  row("unroll-8", unrolled<8, false, kSum>);
  row("unroll-16", unrolled<16, false, kSum>);
  row("unroll-8-streaming", unrolled<8, true, kSum>);
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "occl-gpu-copy: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const size_t n = o.bytes / sizeof(float);
  float *a = nullptr, *b = nullptr, *d = nullptr;
  check(cudaMalloc(&a, o.bytes), "cudaMalloc");
  check(cudaMalloc(&b, o.bytes), "cudaMalloc");
  check(cudaMalloc(&d, o.bytes), "cudaMalloc");
  check(cudaMemset(a, 0, o.bytes), "cudaMemset");
  check(cudaMemset(b, 0, o.bytes), "cudaMemset");
  std::printf("# occl-gpu-copy on %s (%d SMs), %zu bytes, %d iterations, %d threads a block\n", prop.name,
              prop.multiProcessorCount, o.bytes, o.iters, kThreads);
  std::printf("# kernel operation blocks GB/s (bytes read + written per second)\n");
  auto deviceCopy = [&] { check(cudaMemcpyAsync(d, a, o.bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); };
  std::printf("memcpy copy - %.1f\n", gbPerSecond(o, false, deviceCopy));
  for (int nb : o.blocks) {
    rowsFor<false>(o, nb, a, b, d, n);
    rowsFor<true>(o, nb, a, b, d, n);
  }
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  check(cudaFree(d), "cudaFree");
  return 0;
}
