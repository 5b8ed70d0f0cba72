// Reduction operators, one functor per occlRedOp_t, shared by the host and the device builds.
//
// Semantics (documented choices):
// - Integer Sum/Prod wrap modulo 2^bits; signed types are computed in unsigned arithmetic, so
//   overflow is defined behaviour and identical on every rank and backend.
// - Floating Sum/Prod: IEEE arithmetic in the compute type (float for half/bfloat16, rounded back
//   once per op; see dtypes.hpp).
// - Floating Min/Max follow IEEE 754-2019 minimumNumber/maximumNumber (C fmin/fmax, plus a fixed
//   sign for zeros): a NaN operand is ignored when the other is a number, so one rank's NaN does
//   not wipe out a min/max; two NaNs give a NaN; −0 < +0. Unlike bare fmin/fmax (which may return
//   either zero) this makes every result independent of operand order, so all ranks of a
//   collective agree bit for bit whatever order their reduction tree combined the values in.
//   NCCL's half path (__hmin/__hmax) has the same NaN rule.
// - Avg = Sum, then the final step divides by nranks with postDivide(): truncating integer
//   division for integers; for floating types x / n in the compute type (float for half, bfloat16
//   and float; double for double), correctly rounded, then rounded once to T. (NCCL pre-multiplies
//   floats by 1/n instead; dividing at the end keeps integer and floating averages alike and avoids
//   the inexact reciprocal.)
// - PreMulSum (NCCL's ncclRedOpCreatePreMulSum): each rank's input is multiplied by that rank's
//   scalar before the sum. The product is rounded to T as Prod's is, then summed as Sum: two
//   roundings, NCCL's order. Its scalar travels as the op's argument (reduceCopy's opArg), as the
//   bits of a T; the executor applies it only to operands read from the rank's input.
#pragma once

#include <cstdint>
#include <type_traits>

#include "occl/occl.h"
#include "device/dtypes.hpp"
#include "device/compat.hpp"

namespace occl::ops {

namespace detail {

// Unsigned arithmetic at least as wide as unsigned int: defined wrap-around for every integer T
// (narrower types would promote back to signed int, where a product can overflow).
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <typename C>
OCCL_HD inline bool isNaN(C x) {
  return x != x;  // the project never builds with -ffast-math, which would break this
}

template <typename C>
OCCL_HD inline bool signBit(C x) {
  return (toBits(x) >> (8 * sizeof(C) - 1)) != 0;
}

// True when `a` is the IEEE minimumNumber of (a, b): see the header comment. Written without
// early returns (`&`/`|` on bools) so that GCC if-converts and vectorises the host loop.
template <typename C>
OCCL_HD inline bool firstIsMin(C a, C b) {
  const bool aNaN = isNaN(a), bNaN = isNaN(b), aNeg = signBit(a);
  const bool aWins = (a < b) | ((a == b) & aNeg);  // equal: only ±0 differ; −0 is the smaller
  return bNaN | (!aNaN & aWins);
}

template <typename C>
OCCL_HD inline bool firstIsMax(C a, C b) {
  const bool aNaN = isNaN(a), bNaN = isNaN(b), aNeg = signBit(a);
  const bool aWins = (a > b) | ((a == b) & !aNeg);
  return bNaN | (!aNaN & aWins);
}

}  // namespace detail

// The internal number of PreMulSum: after the public ops, and what a collective registered with a
// PreMulSum handle (occlRedOpCreatePreMulSum) carries in CollDesc::redOp. Dispatch covers it.
inline constexpr int kOpPreMulSum = occlNumOps;
inline constexpr int kNumOpKinds = occlNumOps + 1;

struct Sum {
  static constexpr int kOp = occlSum;
  static constexpr bool kPostDivide = false;
  static constexpr bool kPreMultiply = false;
  template <typename T>
  OCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using W = detail::WrapType<T>;
      return static_cast<T>(static_cast<W>(a) + static_cast<W>(b));
    } else {
      return fromCompute<T>(toCompute(a) + toCompute(b));
    }
  }
};

struct Prod {
  static constexpr int kOp = occlProd;
  static constexpr bool kPostDivide = false;
  static constexpr bool kPreMultiply = false;
  template <typename T>
  OCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      using W = detail::WrapType<T>;
      return static_cast<T>(static_cast<W>(a) * static_cast<W>(b));
    } else {
      return fromCompute<T>(toCompute(a) * toCompute(b));
    }
  }
};

// Min and Max return one of their operands unchanged: no rounding, NaN payloads kept.
struct Min {
  static constexpr int kOp = occlMin;
  static constexpr bool kPostDivide = false;
  static constexpr bool kPreMultiply = false;
  template <typename T>
  OCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      return detail::firstIsMin(toCompute(a), toCompute(b)) ? a : b;
    }
  }
};

struct Max {
  static constexpr int kOp = occlMax;
  static constexpr bool kPostDivide = false;
  static constexpr bool kPreMultiply = false;
  template <typename T>
  OCCL_HD T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      return detail::firstIsMax(toCompute(a), toCompute(b)) ? a : b;
    }
  }
};

// Combines like Sum; the executor passes nranks as postDivisor to the step that stores a final
// value (kPostDivide tells it so).
struct Avg : Sum {
  static constexpr int kOp = occlAvg;
  static constexpr bool kPostDivide = true;
};

// Combines like Sum; the executor passes the scalar's bits as the argument of the steps that
// read this rank's input, and runs the others as Sum.
struct PreMulSum : Sum {
  static constexpr int kOp = kOpPreMulSum;
  static constexpr bool kPreMultiply = true;
};

// x times the scalar whose bits are `scalarBits` (a T's), rounded once to T as Prod rounds.
template <typename T>
OCCL_HD inline T preMultiply(T x, uint64_t scalarBits) {
  return Prod{}(x, fromBits<T>(static_cast<BitsOf<T>>(scalarBits)));
}

// x / n, rounded once to T. n > 1 (1 would be the identity); n <= 2^24 so float holds it exactly.
template <typename T>
OCCL_HD inline T postDivide(T x, int n) {
  if constexpr (std::is_integral_v<T>) {
    // Divide in the narrowest type that holds both x and n: 64-bit division is far slower on GPUs.
    using Narrow = std::conditional_t<std::is_signed_v<T>, int, unsigned>;
    using Wide = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
    using D = std::conditional_t<(sizeof(T) <= sizeof(int)), Narrow, Wide>;
    return static_cast<T>(static_cast<D>(x) / static_cast<D>(n));
  } else {
    using C = ComputeType<T>;
    return fromCompute<T>(toCompute(x) / static_cast<C>(n));
  }
}

// occlRedOp_t -> functor.
template <int O>
struct OpOf;
template <>
struct OpOf<occlSum> {
  using type = Sum;
};
template <>
struct OpOf<occlProd> {
  using type = Prod;
};
template <>
struct OpOf<occlMax> {
  using type = Max;
};
template <>
struct OpOf<occlMin> {
  using type = Min;
};
template <>
struct OpOf<occlAvg> {
  using type = Avg;
};
template <>
struct OpOf<kOpPreMulSum> {
  using type = PreMulSum;
};
template <int O>
using OpOf_t = typename OpOf<O>::type;

OCCL_HD constexpr const char* opName(int op) {
  switch (op) {
    case occlSum: return "sum";
    case occlProd: return "prod";
    case occlMax: return "max";
    case occlMin: return "min";
    case occlAvg: return "avg";
    case kOpPreMulSum: return "premulsum";
    default: return "invalid";
  }
}

}  // namespace occl::ops
