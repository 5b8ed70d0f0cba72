// reduceCopy: the one data-path loop every primitive uses.
//
//   d0[i] (and d1[i] when d1) = post(a[i] op b[i]) for i in [0, n), or post(a[i]) when b == nullptr,
//   where post(x) = x / postDivisor when postDivisor > 1 (Avg's final step), else x.
//
// Buffers may alias exactly (d0 == a or d0 == b for in-place reductions, d1 == d0, ...) but must
// never overlap partially: each element is read and written at the same index only.
//
// Host: a daemon block is one thread. Plain loops that GCC vectorises at -O3; memcpy for copies.
// Device: every lane of the calling block must call with the same arguments; each lane handles a
// strided share with 16-byte loads/stores, scalar for the unaligned head and the tail. The caller
// synchronises the block (exec::blockSync) before publishing what was written. Loads are plain
// loads: the caller has already made the source visible (acquire on the connector, then a block
// barrier), as for any other data the block reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "primitives/dtypes.hpp"
#include "primitives/reduce_ops.hpp"
#include "queues/detail/compat.hpp"

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

namespace occl {

namespace detail {

// The unit of a device vector load/store: 16 bytes, 16-byte aligned (ld/st.v4.u32).
struct alignas(16) Pack16 {
  uint32_t w[4];
};
static_assert(sizeof(Pack16) == 16 && alignof(Pack16) == 16);

// One element of the result, before it is stored to d0 (and d1).
template <typename T, typename Op, bool kHasB, bool kDiv>
OCCL_HD inline T combine(T x, T y, int div) {
  T r = x;
  if constexpr (kHasB) r = Op{}(x, y);
  if constexpr (kDiv) r = ops::postDivide(r, div);
  return r;
}

template <bool kHasB, typename T>
OCCL_HD inline T loadOrZero(const T* p, size_t i) {
  if constexpr (kHasB) {
    return p[i];
  } else {
    return T{};
  }
}

// Turns the three runtime flags into template arguments once per call, so the inner loops carry
// no per-element branch: f.template operator()<kHasB, kHasD1, kDiv>().
template <bool kHasB, bool kHasD1, typename F>
OCCL_HD inline void withDiv(bool div, F& f) {
  if (div) {
    f.template operator()<kHasB, kHasD1, true>();
  } else {
    f.template operator()<kHasB, kHasD1, false>();
  }
}
template <bool kHasB, typename F>
OCCL_HD inline void withD1(bool hasD1, bool div, F& f) {
  if (hasD1) {
    withDiv<kHasB, true>(div, f);
  } else {
    withDiv<kHasB, false>(div, f);
  }
}
template <typename F>
OCCL_HD inline void withFlags(bool hasB, bool hasD1, bool div, F& f) {
  if (hasB) {
    withD1<true>(hasD1, div, f);
  } else {
    withD1<false>(hasD1, div, f);
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

template <typename T, typename Op, bool kHasB, bool kHasD1, bool kDiv>
inline void hostLoop(const T* a, const T* b, T* d0, T* d1, size_t n, int div) {
  OCCL_IVDEP
  for (size_t i = 0; i < n; ++i) {
    const T r = combine<T, Op, kHasB, kDiv>(a[i], loadOrZero<kHasB>(b, i), div);
    d0[i] = r;
    if constexpr (kHasD1) d1[i] = r;
  }
}

template <typename T, typename Op>
inline void reduceCopyHost(const T* a, const T* b, T* d0, T* d1, size_t n, int postDivisor) {
  const bool div = postDivisor > 1;
  if (n == 0) return;
  if (b == nullptr && !div) {
    if (!dropSelfCopy(a, d0, d1)) return;
    std::memcpy(d0, a, n * sizeof(T));
    if (d1 != nullptr) std::memcpy(d1, a, n * sizeof(T));
    return;
  }
  auto loop = [&]<bool kHasB, bool kHasD1, bool kDiv>() {
    hostLoop<T, Op, kHasB, kHasD1, kDiv>(a, b, d0, d1, n, postDivisor);
  };
  withFlags(b != nullptr, d1 != nullptr, div, loop);
}

// ---- Lanes (the device path; the host tests run it with simulated lanes) ----

template <typename T, typename Op, bool kHasB, bool kDiv>
OCCL_HD inline Pack16 combinePack(const Pack16& x, const Pack16& y, int div) {
  if constexpr (!kHasB && !kDiv) {
    return x;
  } else {
    constexpr int kElems = 16 / sizeof(T);
    T ex[kElems];
    T ey[kElems];
    memcpy(ex, &x, sizeof ex);
    if constexpr (kHasB) memcpy(ey, &y, sizeof ey);
    for (int e = 0; e < kElems; ++e) ex[e] = combine<T, Op, kHasB, kDiv>(ex[e], kHasB ? ey[e] : ex[e], div);
    Pack16 r;
    memcpy(&r, ex, sizeof r);
    return r;
  }
}

// Elements [begin, end) one at a time, lane-strided.
template <typename T, typename Op, bool kHasB, bool kHasD1, bool kDiv>
OCCL_HD inline void scalarRange(const T* a, const T* b, T* d0, T* d1, size_t begin, size_t end, int div,
                                int lane, int nLanes) {
  for (size_t i = begin + lane; i < end; i += nLanes) {
    const T r = combine<T, Op, kHasB, kDiv>(a[i], loadOrZero<kHasB>(b, i), div);
    d0[i] = r;
    if constexpr (kHasD1) d1[i] = r;
  }
}

// Whole packs, lane-strided. Each lane issues kUnroll independent loads before it stores, so
// several 16-byte requests per lane are in flight at once.
template <typename T, typename Op, bool kHasB, bool kHasD1, bool kDiv>
OCCL_HD inline void packRange(const Pack16* a, const Pack16* b, Pack16* d0, Pack16* d1, size_t nPacks, int div,
                              int lane, int nLanes) {
  constexpr int kUnroll = 4;
  const size_t stride = static_cast<size_t>(nLanes);
  size_t i = static_cast<size_t>(lane);
  for (; i + (kUnroll - 1) * stride < nPacks; i += kUnroll * stride) {
    Pack16 x[kUnroll];
    Pack16 y[kUnroll];
    for (int u = 0; u < kUnroll; ++u) {
      x[u] = a[i + u * stride];
      if constexpr (kHasB) y[u] = b[i + u * stride];
    }
    for (int u = 0; u < kUnroll; ++u) {
      const Pack16 r = combinePack<T, Op, kHasB, kDiv>(x[u], y[u], div);
      d0[i + u * stride] = r;
      if constexpr (kHasD1) d1[i + u * stride] = r;
    }
  }
  for (; i < nPacks; i += stride) {
    const Pack16 r = combinePack<T, Op, kHasB, kDiv>(a[i], kHasB ? b[i] : a[i], div);
    d0[i] = r;
    if constexpr (kHasD1) d1[i] = r;
  }
}

OCCL_HD inline uintptr_t offsetIn16(const void* p) { return reinterpret_cast<uintptr_t>(p) & 15u; }

// Packs need every buffer at the same offset within 16 bytes (a scalar head then aligns them
// all). Buffers at different offsets take the scalar path throughout.
template <typename T, bool kHasB, bool kHasD1>
OCCL_HD inline bool packable(const T* a, const T* b, const T* d0, const T* d1) {
  const uintptr_t off = offsetIn16(a);
  if (off % sizeof(T) != 0 || offsetIn16(d0) != off) return false;
  if (kHasB && offsetIn16(b) != off) return false;
  if (kHasD1 && offsetIn16(d1) != off) return false;
  return true;
}

template <typename T, typename Op, bool kHasB, bool kHasD1, bool kDiv>
OCCL_HD inline void lanesLoop(const T* a, const T* b, T* d0, T* d1, size_t n, int div, int lane, int nLanes) {
  constexpr size_t kPerPack = 16 / sizeof(T);
  if (!packable<T, kHasB, kHasD1>(a, b, d0, d1)) {
    scalarRange<T, Op, kHasB, kHasD1, kDiv>(a, b, d0, d1, 0, n, div, lane, nLanes);
    return;
  }
  size_t head = ((16 - offsetIn16(a)) & 15u) / sizeof(T);
  if (head > n) head = n;
  const size_t nPacks = (n - head) / kPerPack;
  const size_t tail = head + nPacks * kPerPack;
  scalarRange<T, Op, kHasB, kHasD1, kDiv>(a, b, d0, d1, 0, head, div, lane, nLanes);
  auto pack = [](const T* p) { return reinterpret_cast<const Pack16*>(p); };
  auto packOut = [](T* p) { return reinterpret_cast<Pack16*>(p); };
  packRange<T, Op, kHasB, kHasD1, kDiv>(pack(a + head), kHasB ? pack(b + head) : nullptr, packOut(d0 + head),
                                        kHasD1 ? packOut(d1 + head) : nullptr, nPacks, div, lane, nLanes);
  scalarRange<T, Op, kHasB, kHasD1, kDiv>(a, b, d0, d1, tail, n, div, lane, nLanes);
}

}  // namespace detail

// The block-parallel form with explicit lanes: lane in [0, nLanes) of the threads sharing the
// work. The device reduceCopy uses the whole block; an executor may split a block differently.
template <typename T, typename Op>
OCCL_HD inline void reduceCopyLanes(const T* a, const T* b, T* d0, T* d1, size_t n, int postDivisor, int lane,
                                    int nLanes) {
  const bool div = postDivisor > 1;
  if (n == 0) return;
  if (b == nullptr && !div && !detail::dropSelfCopy(a, d0, d1)) return;
  auto loop = [&]<bool kHasB, bool kHasD1, bool kDiv>() {
    detail::lanesLoop<T, Op, kHasB, kHasD1, kDiv>(a, b, d0, d1, n, postDivisor, lane, nLanes);
  };
  detail::withFlags(b != nullptr, d1 != nullptr, div, loop);
}

template <typename T, typename Op>
OCCL_HD inline void reduceCopy(const T* a, const T* b, T* d0, T* d1, size_t n, int postDivisor /*0 = none*/) {
#if OCCL_ON_DEVICE
  reduceCopyLanes<T, Op>(a, b, d0, d1, n, postDivisor, exec::lane(), exec::laneCount());
#else
  detail::reduceCopyHost<T, Op>(a, b, d0, d1, n, postDivisor);
#endif
}

}  // namespace occl
