// occl-micro: the reduce-copy loop alone (primitives/reduce_copy.hpp), host path, per element type.
//   BM_ReduceCopySum<T>/bytes : d0[i] = a[i] + b[i] over `bytes` of each buffer (one tile of a
//                               reducing step), buffers in cache at 128 KiB, not at 8 MiB.
//   BM_ReduceCopyPreMulSum<float>/bytes : d0[i] = a[i] + s * b[i], PreMulSum's reducing steps.
//   BM_Copy<T>/bytes          : d0 = a (b == nullptr): the copy steps of allgather/broadcast.
//   BM_Memcpy/bytes           : std::memcpy, the machine's copy bandwidth.
// Bytes/s counts the bytes of one output buffer, as a tile's size.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "device/dtypes.hpp"
#include "primitives/reduce_copy.hpp"
#include "primitives/reduce_ops.hpp"

namespace {

template <typename T>
struct Buffers {
  explicit Buffers(size_t bytes) : n(bytes / sizeof(T)), a(n), b(n), d(n) {
    for (size_t i = 0; i < n; ++i) {
      a[i] = occl::fromCompute<T>(static_cast<occl::ComputeType<T>>(i % 7));
      b[i] = occl::fromCompute<T>(static_cast<occl::ComputeType<T>>(i % 5));
    }
  }
  size_t n;
  std::vector<T> a, b, d;
};

template <typename T>
void BM_ReduceCopySum(benchmark::State& state) {
  Buffers<T> buf(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    occl::reduceCopy<T, occl::ops::Sum>(buf.a.data(), buf.b.data(), buf.d.data(), nullptr, buf.n, 1);
    benchmark::DoNotOptimize(buf.d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.n * sizeof(T)));
}

template <typename T>
void BM_ReduceCopyPreMulSum(benchmark::State& state) {
  Buffers<T> buf(static_cast<size_t>(state.range(0)));
  const T scalar = occl::fromCompute<T>(static_cast<occl::ComputeType<T>>(3));
  const auto bits = static_cast<uint64_t>(occl::toBits(scalar));
  for (auto _ : state) {
    occl::reduceCopy<T, occl::ops::PreMulSum>(buf.a.data(), buf.b.data(), buf.d.data(), nullptr, buf.n, bits);
    benchmark::DoNotOptimize(buf.d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.n * sizeof(T)));
}

template <typename T>
void BM_Copy(benchmark::State& state) {
  Buffers<T> buf(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    occl::reduceCopy<T, occl::ops::Sum>(buf.a.data(), nullptr, buf.d.data(), nullptr, buf.n, 1);
    benchmark::DoNotOptimize(buf.d.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(buf.n * sizeof(T)));
}

// std::memcpy alone: the machine's copy bandwidth, which bounds a host AllReduce's bus bandwidth
// (run_host_comparison.sh measures it at 64 MiB in the same run as the sweep).
void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<size_t>(state.range(0));
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy)->Arg(64 << 20)->UseRealTime();

constexpr int64_t kTile = 128 << 10;  // the default tile within a host
constexpr int64_t kLarge = 8 << 20;   // past the caches

// Every element type of occl (dtypes.hpp's DataTypes), named as occl-bench names them.
template <typename... Ts>
bool registerPerType(occl::TypeList<Ts...>) {
  (benchmark::RegisterBenchmark((std::string("BM_ReduceCopySum<") + occl::dtypeName(occl::kDtypeOf<Ts>) + ">").c_str(),
                                BM_ReduceCopySum<Ts>)
       ->Arg(kTile)
       ->Arg(kLarge),
   ...);
  return true;
}
const bool kRegistered = registerPerType(occl::DataTypes{});
BENCHMARK_TEMPLATE(BM_ReduceCopyPreMulSum, float)->Arg(kTile)->Arg(kLarge);
BENCHMARK_TEMPLATE(BM_ReduceCopyPreMulSum, occl::BFloat16)->Arg(kTile)->Arg(kLarge);
BENCHMARK_TEMPLATE(BM_Copy, float)->Arg(kTile)->Arg(kLarge);

}  // namespace
