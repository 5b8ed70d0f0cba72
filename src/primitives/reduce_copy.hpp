// reduceCopy: the one data-path loop every primitive uses.
//
//   d0[i] (and d1[i] when d1) = post(a[i] op b[i]) for i in [0, n), or post(a[i]) when b == nullptr,
//   where post(x) = x / opArg (ops::postDivide) when Op is Avg and opArg > 1, else x.
//   opArg is Avg's division by nranks at the step that stores a final value; Sum, Prod, Min and
//   Max ignore it (the executor may pass it for any op). For PreMulSum it is the bits of the
//   rank's scalar s, and the operand read from the rank's input is multiplied first:
//   d0[i] = a[i] + s * b[i], or s * a[i] when b == nullptr (ops::preMultiply).
//
// Buffers may alias exactly (d0 == a or d0 == b for in-place reductions, d1 == d0, ...) but must
// never overlap partially: each element is read and written at the same index only.
//
// Host: a daemon block is one thread. Plain loops that GCC vectorises at -O3; memcpy for copies.
// Device (and the simt backend's emulated blocks): every lane of the calling block must call
// with the same arguments; each lane handles a strided share with 16-byte loads/stores, scalar
// for the unaligned head and the tail. The caller synchronises the block (exec::blockSync) before
// publishing what was written. Loads are plain loads: the caller has already made the source
// visible (acquire on the connector, then a block barrier), as for any other data the block reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "primitives/convert_host.hpp"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"
#include "device/compat.hpp"

// The host loops read and write at one index per iteration, so exact aliasing (in-place) carries
// no dependence between iterations. `ivdep` says exactly that; __restrict would also promise that
// a and d0 never alias, which in-place calls break.
#if defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define OCCL_IVDEP _Pragma("GCC ivdep")
#elif defined(__clang__)
#define OCCL_IVDEP _Pragma("clang loop vectorize(assume_safety)")
#else
#define OCCL_IVDEP
#endif

// A loop over a compile-time count, unrolled whole: its array elements stay in registers.
#if defined(__CUDACC__) || defined(__clang__)
#define OCCL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define OCCL_UNROLL _Pragma("GCC unroll 16")
#else
#define OCCL_UNROLL
#endif

namespace occl {

namespace detail {

// The unit of a device vector load/store: 16 bytes, 16-byte aligned (ld/st.v4.u32).
struct alignas(16) Pack16 {
  uint32_t w[4];
};
static_assert(sizeof(Pack16) == 16 && alignof(Pack16) == 16);

// One element of the result, before it is stored to d0 (and d1).
// kArg: the op's argument applies (Avg's division, PreMulSum's scalar).
template <typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline T combine(T x, T y, uint64_t arg) {
  if constexpr (Op::kPreMultiply) {
    if constexpr (kHasB) {
      return Op{}(x, ops::preMultiply(y, arg));
    } else {
      return ops::preMultiply(x, arg);
    }
  } else {
    T r = x;
    if constexpr (kHasB) r = Op{}(x, y);
    if constexpr (kArg) r = ops::postDivide(r, static_cast<int>(arg));
    return r;
  }
}

// Whether a call's opArg changes anything: Avg's divisor above 1, and PreMulSum always.
template <typename Op>
OCCL_HD inline bool argApplies(uint64_t arg) {
  return Op::kPreMultiply || (Op::kPostDivide && arg > 1);
}

template <bool kHasB, typename T>
OCCL_HD inline T loadOrZero(const T* p, size_t i) {
  if constexpr (kHasB) {
    return p[i];
  } else {
    return T{};
  }
}

// A pure copy onto itself is no work; a copy with d0 == a only has to fill d1. Returns false when
// nothing is left to do.
template <typename T>
OCCL_HD inline bool dropSelfCopy(const T* a, T*& d0, T*& d1) {
  if (d0 != a) return true;
  d0 = (d1 == a) ? nullptr : d1;
  d1 = nullptr;
  return d0 != nullptr;
}

// ---- Host ----

template <typename T, typename Op, bool kHasB, bool kHasD1, bool kArg>
inline void hostLoop(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t arg) {
  OCCL_IVDEP
  for (size_t i = 0; i < n; ++i) {
    const T r = combine<T, Op, kHasB, kArg>(a[i], loadOrZero<kHasB>(b, i), arg);
    d0[i] = r;
    if constexpr (kHasD1) d1[i] = r;
  }
}

// The narrow floating types under an op that computes in float (Sum, Prod, Avg, PreMulSum; Min
// and Max return an operand's own bits, so they keep the element loop): a chunk at a time,
// converted in bulk (convert_host.hpp), combined as floats, rounded back, and for Avg's final step
// divided and rounded again, exactly the element loop's two roundings. PreMulSum rounds the
// scaled input operand to T before the sum, as the element loop does. A chunk is read whole
// before it is written, so d0 may alias a or b.
template <typename T, typename Op>
inline constexpr bool kChunkedInFloat =
    kIsReducedFloat<T> && (std::is_same_v<Op, ops::Sum> || std::is_same_v<Op, ops::Prod> ||
                           std::is_same_v<Op, ops::Avg> || std::is_same_v<Op, ops::PreMulSum>);

// `arg`: Avg's divisor (0 or 1: none), PreMulSum's scalar bits.
template <typename T, typename Op>
inline void reducedFloatHost(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t arg) {
  constexpr size_t kChunk = 512;
  alignas(64) float fa[kChunk];
  alignas(64) float fb[kChunk];
  const int div = Op::kPostDivide ? static_cast<int>(arg) : 0;
  for (size_t i = 0; i < n; i += kChunk) {
    const size_t m = n - i < kChunk ? n - i : kChunk;
    host::toFloats(a + i, fa, m);
    if constexpr (Op::kPreMultiply) {
      alignas(64) T rounded[kChunk];
      const float scale = toFloat(fromBits<T>(static_cast<BitsOf<T>>(arg)));
      float* in = b != nullptr ? fb : fa;  // the operand read from the rank's input
      if (b != nullptr) host::toFloats(b + i, fb, m);
      OCCL_IVDEP
      for (size_t j = 0; j < m; ++j) in[j] = in[j] * scale;
      host::fromFloats(in, rounded, m);
      if (b == nullptr) {
        std::memcpy(d0 + i, rounded, m * sizeof(T));
      } else {
        host::toFloats(rounded, fb, m);
        OCCL_IVDEP
        for (size_t j = 0; j < m; ++j) fa[j] = fa[j] + fb[j];
        host::fromFloats(fa, d0 + i, m);
      }
    } else if (b != nullptr) {
      host::toFloats(b + i, fb, m);
      OCCL_IVDEP
      for (size_t j = 0; j < m; ++j) fa[j] = Op{}(fa[j], fb[j]);
      host::fromFloats(fa, d0 + i, m);
    } else if (d0 != a) {
      std::memcpy(d0 + i, a + i, m * sizeof(T));
    }
    if (div > 1) {
      host::toFloats(d0 + i, fa, m);
      const float divisor = static_cast<float>(div);
      OCCL_IVDEP
      for (size_t j = 0; j < m; ++j) fa[j] = fa[j] / divisor;
      host::fromFloats(fa, d0 + i, m);
    }
    if (d1 != nullptr && d1 != d0) std::memcpy(d1 + i, d0 + i, m * sizeof(T));
  }
}

template <typename T, typename Op>
inline void reduceCopyHost(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t opArg) {
  const bool useArg = argApplies<Op>(opArg);
  if (n == 0) return;
  if (b == nullptr && !useArg) {
    if (!dropSelfCopy(a, d0, d1)) return;
    std::memcpy(d0, a, n * sizeof(T));
    if (d1 != nullptr) std::memcpy(d1, a, n * sizeof(T));
    return;
  }
  if constexpr (kChunkedInFloat<T, Op>) {
    reducedFloatHost<T, Op>(a, b, d0, d1, n, useArg ? opArg : 0);
    return;
  }
  // Runtime flags become template arguments once per call: the loops carry no per-element branch.
  auto run = [&]<bool kHasB, bool kArg>() {
    if (d1 != nullptr) {
      hostLoop<T, Op, kHasB, true, kArg>(a, b, d0, d1, n, opArg);
    } else {
      hostLoop<T, Op, kHasB, false, kArg>(a, b, d0, d1, n, opArg);
    }
  };
  if constexpr (Op::kPostDivide || Op::kPreMultiply) {
    if (useArg) {
      if (b != nullptr) {
        run.template operator()<true, true>();
      } else {
        run.template operator()<false, true>();
      }
      return;
    }
  }
  run.template operator()<true, false>();
}

// ---- Lanes (the device path; the host tests run it with simulated lanes) ----

// Element e of a pack, and the way back. Shifts on the 32-bit words rather than memcpy to an
// array: nvcc lowers the latter to byte copies through local memory.
template <typename T>
OCCL_HD inline T packGet(const Pack16& p, int e) {
  using U = BitsOf<T>;
  if constexpr (sizeof(T) == 8) {
    return fromBits<T>(static_cast<U>(p.w[2 * e]) | (static_cast<U>(p.w[2 * e + 1]) << 32));
  } else {
    constexpr int kPerWord = 4 / sizeof(T);
    return fromBits<T>(static_cast<U>(p.w[e / kPerWord] >> (8 * sizeof(T) * (e % kPerWord))));
  }
}

// ORs element e into a pack that starts zeroed.
template <typename T>
OCCL_HD inline void packPut(Pack16& p, int e, T x) {
  const BitsOf<T> u = toBits(x);
  if constexpr (sizeof(T) == 8) {
    p.w[2 * e] = static_cast<uint32_t>(u);
    p.w[2 * e + 1] = static_cast<uint32_t>(u >> 32);
  } else {
    constexpr int kPerWord = 4 / sizeof(T);
    p.w[e / kPerWord] |= static_cast<uint32_t>(u) << (8 * sizeof(T) * (e % kPerWord));
  }
}

template <typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline Pack16 combinePack(const Pack16& x, const Pack16& y, uint64_t arg) {
  if constexpr (!kHasB && !kArg) {
    return x;
  } else {
    Pack16 r{};
    for (int e = 0; e < static_cast<int>(16 / sizeof(T)); ++e) {
      const T xe = packGet<T>(x, e);
      packPut(r, e, combine<T, Op, kHasB, kArg>(xe, kHasB ? packGet<T>(y, e) : xe, arg));
    }
    return r;
  }
}

// The elements outside whole packs — the head [0, head) and the tail [tail, n) — one at a time,
// lane-strided, in one loop (one copy of the loop body per instantiation, not two).
template <typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline void scalarEnds(const T* a, const T* b, T* d0, T* d1, size_t head, size_t tail, size_t n, uint64_t arg,
                               int lane, int nLanes) {
  const size_t count = head + (n - tail);
  for (size_t k = static_cast<size_t>(lane); k < count; k += static_cast<size_t>(nLanes)) {
    const size_t i = k < head ? k : tail + (k - head);
    const T r = combine<T, Op, kHasB, kArg>(a[i], loadOrZero<kHasB>(b, i), arg);
    d0[i] = r;
    if (d1 != nullptr) d1[i] = r;  // uniform across the block: no divergence
  }
}

// The packs a lane loads before it stores any, which is what a block keeps in flight (a block's
// bandwidth is about bytes in flight / latency). A copy: 8 (32 registers; 512 lanes: 64 KiB), in
// one loop for every element type; at 16 the tile loop spills on sm_100 (ptxas --resource-usage),
// and occl-gpu-copy's unroll-16 row says what 16 would be worth. A reduction: 4 of each operand,
// in one loop per (type, op) pair, ~70 of them: at 8, or with the copy's halving tail, they
// spill and the kernel's code grows by half on sm_90.
inline constexpr int kCopyPacksInFlight = 8;
inline constexpr int kReducePacksInFlight = 4;

// Rounds of kUnroll packs per lane from pack `i` on, while this lane has kUnroll left; returns
// where it stopped. Every load of a round is issued before any store. A lane reads and writes the
// same indices, its reads of a round before its writes, so a destination that aliases a source
// exactly (in place) is safe; nothing here promises the compiler that the buffers are distinct
// (__restrict__ would let it use the non-coherent load path, wrong for memory the persistent
// kernel sees rewritten).
template <int kUnroll, typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline size_t packRounds(const Pack16* a, const Pack16* b, Pack16* d0, Pack16* d1, size_t nPacks, size_t i,
                                 size_t stride, uint64_t arg) {
  for (; i + (kUnroll - 1) * stride < nPacks; i += kUnroll * stride) {
    Pack16 x[kUnroll];
    Pack16 y[kUnroll];
    OCCL_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = a[i + u * stride];
      if constexpr (kHasB) y[u] = b[i + u * stride];
    }
    OCCL_UNROLL
    for (int u = 0; u < kUnroll; ++u) {
      const Pack16 r = combinePack<T, Op, kHasB, kArg>(x[u], y[u], arg);
      d0[i + u * stride] = r;
      if (d1 != nullptr) d1[i + u * stride] = r;
    }
  }
  return i;
}

// Whole packs of a copy, lane-strided: rounds of kUnroll packs per lane, then what is left (fewer
// than kUnroll) in at most one round each of kUnroll/2, ..., 1, so a tile's end costs a few round
// trips rather than one per pack.
template <int kUnroll>
OCCL_HD inline void copyPacks(const Pack16* a, Pack16* d0, Pack16* d1, size_t nPacks, size_t i, size_t stride) {
  static_assert(kUnroll > 0 && (kUnroll & (kUnroll - 1)) == 0, "rounds halve down to one pack");
  i = packRounds<kUnroll, uint32_t, ops::Sum, false, false>(a, nullptr, d0, d1, nPacks, i, stride, 0);
  if constexpr (kUnroll > 1) copyPacks<kUnroll / 2>(a, d0, d1, nPacks, i, stride);
}

// Whole packs of a reduction, lane-strided: rounds of kReducePacksInFlight, then one pack a round.
template <typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline void reducePacks(const Pack16* a, const Pack16* b, Pack16* d0, Pack16* d1, size_t nPacks, size_t i,
                                size_t stride, uint64_t arg) {
  i = packRounds<kReducePacksInFlight, T, Op, kHasB, kArg>(a, b, d0, d1, nPacks, i, stride, arg);
  packRounds<1, T, Op, kHasB, kArg>(a, b, d0, d1, nPacks, i, stride, arg);
}

OCCL_HD inline uintptr_t offsetIn16(const void* p) { return reinterpret_cast<uintptr_t>(p) & 15u; }

// Packs need every buffer at the same offset within 16 bytes (a scalar head then aligns them
// all). Buffers at different offsets take the scalar path throughout.
template <typename T>
OCCL_HD inline bool packable(const T* a, const T* b, const T* d0, const T* d1) {
  const uintptr_t off = offsetIn16(a);
  if (off % sizeof(T) != 0 || offsetIn16(d0) != off) return false;
  if (b != nullptr && offsetIn16(b) != off) return false;
  if (d1 != nullptr && offsetIn16(d1) != off) return false;
  return true;
}

// How [0, n) splits: scalar head [0, head), whole 16-byte packs, scalar tail [tail, n).
struct PackPlan {
  size_t head;
  size_t nPacks;
  size_t tail;
};

template <typename T>
OCCL_HD inline PackPlan planPacks(const T* a, const T* b, const T* d0, const T* d1, size_t n) {
  size_t head = n;  // not packable: everything is "head"
  if (packable(a, b, d0, d1)) {
    head = ((16 - offsetIn16(a)) & 15u) / sizeof(T);
    if (head > n) head = n;
  }
  const size_t nPacks = (n - head) / (16 / sizeof(T));
  return {head, nPacks, head + nPacks * (16 / sizeof(T))};
}

template <typename T, typename Op, bool kHasB, bool kArg>
OCCL_HD inline void lanesLoop(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t arg, int lane, int nLanes) {
  // The 8-bit floats combine element by element, lane-strided: their bit-level conversions (fp8.hpp),
  // 16 to a pack and kReducePacksInFlight packs a round, made the tile loop spill on every
  // architecture (tests/policy/kernel_resources_test.cpp). Their copies still move packs.
  if constexpr (kIsFp8<T> && (kHasB || kArg)) {
    scalarEnds<T, Op, kHasB, kArg>(a, b, d0, d1, n, n, n, arg, lane, nLanes);
    return;
  }
  const PackPlan plan = planPacks(a, b, d0, d1, n);
  const size_t h = plan.head;
  if (plan.nPacks != 0) {
    auto in = [](const T* p) { return reinterpret_cast<const Pack16*>(p); };
    auto out = [](T* p) { return reinterpret_cast<Pack16*>(p); };
    Pack16* e1 = d1 != nullptr ? out(d1 + h) : nullptr;
    const size_t first = static_cast<size_t>(lane), stride = static_cast<size_t>(nLanes);
    if constexpr (!kHasB && !kArg) {
      // A copy moves bytes whatever T is: one instantiation for every type.
      copyPacks<kCopyPacksInFlight>(in(a + h), out(d0 + h), e1, plan.nPacks, first, stride);
    } else {
      reducePacks<T, Op, kHasB, kArg>(in(a + h), kHasB ? in(b + h) : nullptr, out(d0 + h), e1, plan.nPacks, first,
                                      stride, arg);
    }
  }
  scalarEnds<T, Op, kHasB, kArg>(a, b, d0, d1, h, plan.tail, n, arg, lane, nLanes);
}

}  // namespace detail

// The block-parallel form with explicit lanes: lane in [0, nLanes) of the threads sharing the
// work. The device reduceCopy uses the whole block; an executor may split a block differently.
//
// Instantiations are kept few, since the daemon kernel inlines all of them: a copy does not
// depend on Op (one loop per T), d1 is a block-uniform runtime test, and only Avg compiles the
// division.
template <typename T, typename Op>
OCCL_HD inline void reduceCopyLanes(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t opArg, int lane,
                                    int nLanes) {
  const bool useArg = detail::argApplies<Op>(opArg);
  if (n == 0) return;
  if (b == nullptr && !useArg) {
    if (detail::dropSelfCopy(a, d0, d1)) detail::lanesLoop<T, ops::Sum, false, false>(a, b, d0, d1, n, 0, lane, nLanes);
    return;
  }
  if constexpr (Op::kPostDivide || Op::kPreMultiply) {
    if (useArg) {
      if (b != nullptr) {
        detail::lanesLoop<T, Op, true, true>(a, b, d0, d1, n, opArg, lane, nLanes);
      } else {
        detail::lanesLoop<T, Op, false, true>(a, b, d0, d1, n, opArg, lane, nLanes);
      }
      return;
    }
  }
  detail::lanesLoop<T, Op, true, false>(a, b, d0, d1, n, opArg, lane, nLanes);
}

template <typename T, typename Op>
OCCL_HD inline void reduceCopy(const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t opArg /*0 = none*/) {
#if OCCL_ON_DEVICE
  reduceCopyLanes<T, Op>(a, b, d0, d1, n, opArg, exec::lane(), exec::laneCount());
#else
  // A simt block's lanes take the device path; a block of one (host backend) the host loops.
  if (exec::laneCount() > 1) {
    reduceCopyLanes<T, Op>(a, b, d0, d1, n, opArg, exec::lane(), exec::laneCount());
  } else {
    detail::reduceCopyHost<T, Op>(a, b, d0, d1, n, opArg);
  }
#endif
}

}  // namespace occl
