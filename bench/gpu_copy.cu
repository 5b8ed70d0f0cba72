// occl-gpu-copy: how fast one daemon block can copy and reduce, and how fast many can, on a GPU
// (issue 40: one daemon block copied at 30-35 GB/s where the device copies at ~2 TB/s). It times,
// with CUDA events, over a buffer in device memory:
//   occl     : the daemon's own loop (primitives/reduce_copy.hpp: reduceCopyLanes; a copy keeps 8
//              packs per lane in flight, a reduction 4 of each operand; a destination may alias a
//              source exactly)
//   unroll-U : U = 4, 8, 16 packs of 16 bytes per lane loaded before any is stored, pointers
//              declared non-aliasing (__restrict__), plain or streaming (ld.global.cs/st.global.cs)
//   bulk     : Hopper's bulk copies (sm_90 and later; cp.async.bulk global -> shared with an mbarrier,
//              shared -> global as a bulk group), one lane driving kBulkStages stages of
//              kBulkStageBytes: whether the daemon's pure copies should take them (issue 40)
//   memcpy   : cudaMemcpyAsync device to device, the device's own copy, for reference
// each as a copy (one source) and, but bulk, as a sum of two sources (float), with 1..N blocks of
// 512 threads. One line per (kernel, operation, blocks): GB/s of bytes written plus bytes read.
// Every copy's output is compared with its source afterwards; a difference ends the run (exit 1).
//
//   occl-gpu-copy [--bytes N] [--iters N] [--blocks 1,2,4,...]
//
// Compiled in every CUDA build (here without a GPU it reports "no CUDA device" and exits 1); run by
// tools/gpu/run_gpu_suite.sh's bench step.
#include <cuda/ptx>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// The part of [0, n) that this block takes, in whole 16-byte packs of floats: the blocks' parts,
// each n / gridDim.x rounded up to a pack, cover all of it.
__device__ inline void slice(size_t n, size_t& begin, size_t& count) {
  const size_t perBlock = ((n + gridDim.x - 1) / gridDim.x + 3) & ~size_t{3};
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

// A copy by bulk transfers: lane 0 loads stage after stage into shared memory (completion counted
// in bytes on the stage's mbarrier) and stores each from there as a bulk group; a stage is loaded
// again once the store reading it has read it. Sizes and addresses are multiples of 16 bytes.
__global__ void bulkCopy(const float* a, const float*, float* d, size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace ptx = cuda::ptx;
  constexpr int kBulkStages = 4;
  constexpr uint32_t kBulkStageBytes = 8192;  // 4 x 8 KiB: within the 48 KiB of static shared memory
  __shared__ alignas(128) unsigned char stage[kBulkStages][kBulkStageBytes];
  __shared__ uint64_t loaded[kBulkStages];
  size_t begin, count;
  slice(n, begin, count);
  if (threadIdx.x != 0 || count == 0) return;
  const auto* src = reinterpret_cast<const unsigned char*>(a + begin);
  auto* dst = reinterpret_cast<unsigned char*>(d + begin);
  const size_t bytes = count * sizeof(float);
  const size_t chunks = (bytes + kBulkStageBytes - 1) / kBulkStageBytes;
  auto sizeOf = [&](size_t k) {
    const size_t left = bytes - k * kBulkStageBytes;
    return static_cast<uint32_t>(left < kBulkStageBytes ? left : kBulkStageBytes);
  };
  for (int s = 0; s < kBulkStages; ++s) ptx::mbarrier_init(&loaded[s], 1);
  ptx::fence_mbarrier_init(ptx::sem_release, ptx::scope_cluster);  // the async proxy sees the barriers
  auto load = [&](size_t k) {
    const int s = static_cast<int>(k % kBulkStages);
    ptx::mbarrier_arrive_expect_tx(ptx::sem_release, ptx::scope_cta, ptx::space_shared, &loaded[s], sizeOf(k));
    ptx::cp_async_bulk(ptx::space_cluster, ptx::space_global, stage[s], src + k * kBulkStageBytes, sizeOf(k),
                       &loaded[s]);
  };
  for (size_t k = 0; k < chunks && k < kBulkStages; ++k) load(k);
  for (size_t k = 0; k < chunks; ++k) {
    const int s = static_cast<int>(k % kBulkStages);
    const uint32_t parity = static_cast<uint32_t>((k / kBulkStages) & 1);
    while (!ptx::mbarrier_try_wait_parity(&loaded[s], parity)) {
    }
    ptx::cp_async_bulk(ptx::space_global, ptx::space_shared, dst + k * kBulkStageBytes, stage[s], sizeOf(k));
    ptx::cp_async_bulk_commit_group();
    if (k + kBulkStages < chunks) {
      ptx::cp_async_bulk_wait_group_read(ptx::n32_t<0>{});  // the store above has read stage s
      load(k + kBulkStages);
    }
  }
  ptx::cp_async_bulk_wait_group(ptx::n32_t<0>{});  // every store complete before the kernel ends
#endif
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

// The source's bytes: a pattern no copy that drops, repeats or shifts a pack reproduces.
std::vector<uint32_t> pattern(size_t bytes) {
  std::vector<uint32_t> v(bytes / sizeof(uint32_t));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i * 2654435761u) ^ 0x5bd1e995u;
  return v;
}

// Ends the run when a copy's output differs from its source.
void verifyCopy(const char* name, int nb, const float* d, const std::vector<uint32_t>& want) {
  std::vector<uint32_t> got(want.size());
  check(cudaMemcpy(got.data(), d, got.size() * sizeof(uint32_t), cudaMemcpyDeviceToHost), "cudaMemcpy");
  if (std::memcmp(got.data(), want.data(), got.size() * sizeof(uint32_t)) == 0) return;
  size_t i = 0;
  while (got[i] == want[i]) ++i;
  std::fprintf(stderr, "occl-gpu-copy: %s copy on %d blocks is wrong at byte %zu\n", name, nb, i * sizeof(uint32_t));
  std::exit(1);
}

template <bool kSum>
void rowsFor(const Options& o, int nb, const float* a, const float* b, float* d, size_t n,
             const std::vector<uint32_t>& source, bool bulk) {
  const float* second = kSum ? b : nullptr;
  auto row = [&](const char* name, Kernel kernel) {
    check(cudaMemset(d, 0, n * sizeof(float)), "cudaMemset");
    std::printf("%s %s %d %.1f\n", name, kSum ? "sum" : "copy", nb,
                gbPerSecond(o, kSum, [&] { kernel<<<nb, kThreads>>>(a, second, d, n); }));
    if (!kSum) verifyCopy(name, nb, d, source);
  };
  row("occl", occlLoop);
  if (!kSum && bulk) row("bulk", bulkCopy);
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
  const std::vector<uint32_t> source = pattern(o.bytes);
  check(cudaMemcpy(a, source.data(), o.bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
  check(cudaMemset(b, 0, o.bytes), "cudaMemset");
  const bool bulk = prop.major >= 9;
  std::printf("# occl-gpu-copy on %s (%d SMs), %zu bytes, %d iterations, %d threads a block\n", prop.name,
              prop.multiProcessorCount, o.bytes, o.iters, kThreads);
  std::printf("# kernel operation blocks GB/s (bytes read + written per second)\n");
  auto deviceCopy = [&] { check(cudaMemcpyAsync(d, a, o.bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync"); };
  std::printf("memcpy copy - %.1f\n", gbPerSecond(o, false, deviceCopy));
  verifyCopy("memcpy", 0, d, source);
  for (int nb : o.blocks) {
    rowsFor<false>(o, nb, a, b, d, n, source, bulk);
    rowsFor<true>(o, nb, a, b, d, n, source, bulk);
  }
  check(cudaFree(a), "cudaFree");
  check(cudaFree(b), "cudaFree");
  check(cudaFree(d), "cudaFree");
  return 0;
}
