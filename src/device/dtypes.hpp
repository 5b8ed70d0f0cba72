// Element types of occl buffers, shared by the host and the device builds.
//
// Half and BFloat16 (and the 8-bit Fp8E4M3 and Fp8E5M2 of fp8.hpp) are plain storage types: the
// same layout on both sides, trivially copyable, usable in connector slots and __shared__ arrays. Arithmetic on them is done in float
// and rounded back once per binary op (as NCCL does). Because float carries at least 2p+2 bits
// of the 11-bit (half) and 8-bit (bfloat16) significands, "compute in float, round once" gives
// the correctly rounded result of +, *, / — the same bits as native half arithmetic would.
//
// Conversions:
// - float -> half/bf16 rounds to nearest, ties to even; handles subnormals, overflow to inf,
//   ±inf, −0. A NaN stays a NaN with the quiet bit set (sign and top payload bits kept).
// - half/bf16 -> float is exact; a NaN comes back quiet.
// The bit-level host implementation below is exact and constexpr. On the device the CUDA
// intrinsics are used instead: they round identically for every non-NaN input; NaN payloads
// may differ between host and device (the device returns the canonical NaN). The 8-bit types
// follow the same rules and are converted bit by bit on both sides (fp8.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "occl/occl.h"
#include "device/compat.hpp"
#include "device/fp8.hpp"
#include "device/rounding.hpp"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace occl {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(Half) == 2 && alignof(Half) == 2, "Half crosses the bus as 2 bytes");
static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2, "BFloat16 crosses the bus as 2 bytes");
static_assert(std::is_trivially_copyable_v<Half> && std::is_trivially_copyable_v<BFloat16>);

// The narrow floating types (16 and 8 bits): stored as bits, computed in float.
template <typename T>
inline constexpr bool kIsReducedFloat = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16> || kIsFp8<T>;

// ---- Bit-level conversions (exact; the host path, and the reference for the device path) ----

OCCL_HD constexpr uint16_t halfBitsFromFloatBits(uint32_t x) {
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u)  // NaN: force the quiet bit so that no payload truncates to inf
    return static_cast<uint16_t>(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  // From 65520 (halfway between the max finite half, 65504, and 2^16) up, RNE gives inf.
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (ax >= 0x38800000u) {  // normal half (>= 2^-14): rebias 127 -> 15, drop 13 mantissa bits
    const uint32_t h = (ax - 0x38000000u) >> 13;  // a carry out of the mantissa bumps the exponent
    return static_cast<uint16_t>(sign | (h + detail::roundsUp(ax, 13, h)));
  }
  // Subnormal half or zero: the result counts units of 2^-24; significand >> (126 - exponent).
  const uint32_t shift = 126u - (ax >> 23);
  if (shift > 24) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to (signed) zero
  const uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t h = sig >> shift;  // may round up into the smallest normal, 0x0400: still right
  return static_cast<uint16_t>(sign | (h + detail::roundsUp(sig, shift, h)));
}

OCCL_HD constexpr uint32_t floatBitsFromHalfBits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u);  // inf; NaN quiet
  if (e != 0) return sign | ((e + 112u) << 23) | (m << 13);
  if (m == 0) return sign;
  // Subnormal m * 2^-24: shift the leading one onto the implicit bit (bit 10), adjust the exponent.
  uint32_t exp = 113;  // biased float exponent of 2^-14, for a leading one already at bit 10
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --exp;
  }
  return sign | (exp << 23) | ((m & 0x3ffu) << 13);
}

OCCL_HD constexpr uint16_t bf16BitsFromFloatBits(uint32_t x) {
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  // bfloat16 is float with 16 mantissa bits dropped: same exponent range, so subnormals and
  // overflow to inf fall out of the carry. Adding 0x7fff + lsb rounds to nearest even.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

OCCL_HD constexpr uint32_t floatBitsFromBf16Bits(uint16_t b) {
  const uint32_t x = static_cast<uint32_t>(b) << 16;
  return (x & 0x7fffffffu) > 0x7f800000u ? (x | 0x400000u) : x;
}

OCCL_HD inline uint32_t floatToBits(float f) {
#if OCCL_ON_DEVICE
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

OCCL_HD inline float bitsToFloat(uint32_t u) {
#if OCCL_ON_DEVICE
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// ---- Raw bits of any element type (packing elements into 16-byte vectors) ----

template <typename T>
using BitsOf = std::conditional_t<
    sizeof(T) == 1, uint8_t,
    std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;

template <typename T>
OCCL_HD inline BitsOf<T> toBits(T x) {
  static_assert(sizeof(T) == sizeof(BitsOf<T>));
  if constexpr (std::is_integral_v<T>) {
    return static_cast<BitsOf<T>>(x);
  } else if constexpr (kIsReducedFloat<T>) {
    return x.bits;
  } else {
#if OCCL_ON_DEVICE  // memcpy on the device can go through local memory; the intrinsics never do
    if constexpr (sizeof(T) == 4) return __float_as_uint(x);
    else return static_cast<uint64_t>(__double_as_longlong(x));
#else
    BitsOf<T> u;
    std::memcpy(&u, &x, sizeof u);
    return u;
#endif
  }
}

template <typename T>
OCCL_HD inline T fromBits(BitsOf<T> u) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(u);
  } else if constexpr (kIsReducedFloat<T>) {
    return T{u};
  } else {
#if OCCL_ON_DEVICE
    if constexpr (sizeof(T) == 4) return __uint_as_float(u);
    else return __longlong_as_double(static_cast<long long>(u));
#else
    T x;
    std::memcpy(&x, &u, sizeof x);
    return x;
#endif
  }
}

// ---- Conversions used by the arithmetic: intrinsics on the device, bit-level on the host ----

OCCL_HD inline float toFloat(Half h) {
#if OCCL_ON_DEVICE
  return __half2float(__ushort_as_half(h.bits));
#else
  return bitsToFloat(floatBitsFromHalfBits(h.bits));
#endif
}

OCCL_HD inline float toFloat(BFloat16 b) {
#if OCCL_ON_DEVICE
  return __bfloat162float(__ushort_as_bfloat16(b.bits));
#else
  return bitsToFloat(floatBitsFromBf16Bits(b.bits));
#endif
}

// The 8-bit types convert bit by bit on both sides (fp8.hpp), so host and device agree exactly.
template <typename T>
  requires kIsFp8<T>
OCCL_HD inline float toFloat(T x) {
  return bitsToFloat(floatBitsFromFp8Bits<T>(x.bits));
}

template <typename T>
  requires kIsFp8<T>
OCCL_HD inline T toFp8(float f) {
  return T{fp8BitsFromFloatBits<T>(floatToBits(f))};
}

OCCL_HD inline Half toHalf(float f) {
#if OCCL_ON_DEVICE
  return Half{__half_as_ushort(__float2half_rn(f))};
#else
  return Half{halfBitsFromFloatBits(floatToBits(f))};
#endif
}

OCCL_HD inline BFloat16 toBFloat16(float f) {
#if OCCL_ON_DEVICE
  return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
  return BFloat16{bf16BitsFromFloatBits(floatToBits(f))};
#endif
}

// ---- The compute type: what a binary op works in, and the way back ----

template <typename T>
using ComputeType = std::conditional_t<kIsReducedFloat<T>, float, T>;

template <typename T>
OCCL_HD inline ComputeType<T> toCompute(T x) {
  if constexpr (kIsReducedFloat<T>) {
    return toFloat(x);
  } else {
    return x;
  }
}

template <typename T>
OCCL_HD inline T fromCompute(ComputeType<T> x) {
  if constexpr (std::is_same_v<T, Half>) {
    return toHalf(x);
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return toBFloat16(x);
  } else if constexpr (kIsFp8<T>) {
    return toFp8<T>(x);
  } else {
    return x;
  }
}

template <typename T>
inline constexpr bool kIsFloating = kIsReducedFloat<T> || std::is_floating_point_v<T>;

// A small integer as T, exactly (test inputs and expected values: every type holds them).
template <typename T>
inline T fromInt(int64_t v) {
  if constexpr (kIsReducedFloat<T>) {
    return fromCompute<T>(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// ---- occlDataType_t <-> C++ type ----

template <typename... Ts>
struct TypeList {
  static constexpr int size = sizeof...(Ts);
};

// Indexed by occlDataType_t (NCCL numbering).
using DataTypes =
    TypeList<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, Half, float, double, BFloat16, Fp8E4M3, Fp8E5M2>;
static_assert(DataTypes::size == occlNumTypes, "one C++ type per occlDataType_t");

namespace detail {
template <int I, typename List>
struct TypeAt;
template <int I, typename Head, typename... Tail>
struct TypeAt<I, TypeList<Head, Tail...>> : TypeAt<I - 1, TypeList<Tail...>> {};
template <typename Head, typename... Tail>
struct TypeAt<0, TypeList<Head, Tail...>> {
  using type = Head;
};

template <typename T, typename List>
struct IndexOf;
template <typename T, typename... Tail>
struct IndexOf<T, TypeList<T, Tail...>> {
  static constexpr int value = 0;
};
template <typename T, typename Head, typename... Tail>
struct IndexOf<T, TypeList<Head, Tail...>> {
  static constexpr int value = 1 + IndexOf<T, TypeList<Tail...>>::value;
};
}  // namespace detail

template <occlDataType_t D>
struct TypeOf {
  static_assert(D >= 0 && D < occlNumTypes, "not an occlDataType_t");
  using type = typename detail::TypeAt<D, DataTypes>::type;
};
template <occlDataType_t D>
using TypeOf_t = typename TypeOf<D>::type;

// The occlDataType_t of T (a compile error for a type that is not an element type).
template <typename T>
inline constexpr occlDataType_t kDtypeOf = static_cast<occlDataType_t>(detail::IndexOf<T, DataTypes>::value);

OCCL_HD constexpr bool dtypeValid(int dtype) { return dtype >= 0 && dtype < occlNumTypes; }

// Bytes of one element; 0 for an invalid dtype.
OCCL_HD constexpr size_t dtypeSize(int dtype) {
  switch (dtype) {
    case occlInt8:
    case occlUint8:
    case occlFloat8e4m3:
    case occlFloat8e5m2: return 1;
    case occlFloat16:
    case occlBfloat16: return 2;
    case occlInt32:
    case occlUint32:
    case occlFloat32: return 4;
    case occlInt64:
    case occlUint64:
    case occlFloat64: return 8;
    default: return 0;
  }
}

// nccl-tests spelling; "invalid" for an invalid dtype.
OCCL_HD constexpr const char* dtypeName(int dtype) {
  switch (dtype) {
    case occlInt8: return "int8";
    case occlUint8: return "uint8";
    case occlInt32: return "int32";
    case occlUint32: return "uint32";
    case occlInt64: return "int64";
    case occlUint64: return "uint64";
    case occlFloat16: return "half";
    case occlFloat32: return "float";
    case occlFloat64: return "double";
    case occlBfloat16: return "bfloat16";
    case occlFloat8e4m3: return "f8e4m3";
    case occlFloat8e5m2: return "f8e5m2";
    default: return "invalid";
  }
}

OCCL_HD constexpr bool dtypeIsFloating(int dtype) {
  return dtype == occlFloat16 || dtype == occlFloat32 || dtype == occlFloat64 || dtype == occlBfloat16 ||
         dtype == occlFloat8e4m3 || dtype == occlFloat8e5m2;
}

}  // namespace occl
