// The two 8-bit floating types of the OCP 8-bit floating point specification, as NCCL
// (ncclFloat8e4m3, ncclFloat8e5m2) and torch (float8_e4m3fn, float8_e5m2) lay them out:
//
//   e4m3: 1 sign, 4 exponent (bias 7), 3 mantissa bits. No infinities; S.1111.111 is the only
//         NaN; the largest finite value is 448 (0x7e).
//   e5m2: 1 sign, 5 exponent (bias 15), 2 mantissa bits. IEEE-like: infinities and NaNs in the
//         all-ones exponent; the largest finite value is 57344 (0x7b).
//
// Like Half and BFloat16 (dtypes.hpp) they are stored as bits and computed in float, rounded back
// once per binary op; float's 24-bit significand is more than 2p+2 bits of either, so that is the
// correctly rounded result. The conversions are the specification's non-saturating ones, the same
// rules as half's (and torch's `.to(float8_*)`):
// - float -> fp8 rounds to nearest, ties to even, with exact subnormals and signed zeros. A value
//   past the largest finite one (after rounding) becomes inf in e5m2 and NaN in e4m3, which has
//   no inf; +-inf becomes +-inf in e5m2 and NaN in e4m3. A NaN stays a NaN (quiet, sign kept; in
//   e5m2 the top payload bit is kept as half keeps its payload).
// - fp8 -> float is exact; a NaN comes back quiet.
// NCCL's own kernels saturate instead (largest finite value on overflow); occl keeps half's rule
// so that every narrow type overflows the same way. The same bit-level code runs on the host and
// the device, so both give the same bits for every input, NaNs included.
#pragma once

#include <cstdint>
#include <type_traits>

#include "device/compat.hpp"
#include "device/rounding.hpp"

namespace occl {

struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
};
static_assert(sizeof(Fp8E4M3) == 1 && sizeof(Fp8E5M2) == 1, "an fp8 element crosses the bus as 1 byte");
static_assert(std::is_trivially_copyable_v<Fp8E4M3> && std::is_trivially_copyable_v<Fp8E5M2>);

template <typename T>
inline constexpr bool kIsFp8 = std::is_same_v<T, Fp8E4M3> || std::is_same_v<T, Fp8E5M2>;

// A format's shape, and where float's range leaves its finite values.
template <typename T>
struct Fp8Format;

template <>
struct Fp8Format<Fp8E4M3> {
  static constexpr uint32_t kExpBits = 4, kManBits = 3, kBias = 7;
  static constexpr bool kHasInf = false;
  // 464 is the tie between 448 (0x7e) and the NaN pattern 0x7f: ties to even keep 448, anything
  // above becomes NaN.
  static constexpr uint32_t kOverflowFloatBits = 0x43e80001u;  // nextafter(464.0f, inf)
  static constexpr uint8_t kOverflowBits = 0x7f;               // NaN
};

template <>
struct Fp8Format<Fp8E5M2> {
  static constexpr uint32_t kExpBits = 5, kManBits = 2, kBias = 15;
  static constexpr bool kHasInf = true;
  // 61440 is the tie between 57344 (0x7b) and 2^16 (0x7c, inf): ties to even pick inf.
  static constexpr uint32_t kOverflowFloatBits = 0x47700000u;  // 61440.0f
  static constexpr uint8_t kOverflowBits = 0x7c;               // inf
};

template <typename T>
OCCL_HD constexpr uint8_t fp8BitsFromFloatBits(uint32_t x) {
  using F = Fp8Format<T>;
  constexpr uint32_t kDrop = 23 - F::kManBits;  // float mantissa bits that do not fit
  constexpr uint32_t kExpAllOnes = ((1u << F::kExpBits) - 1u) << F::kManBits;
  const uint32_t sign = (x >> 24) & 0x80u;
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) {  // NaN
    if constexpr (F::kHasInf) {
      const uint32_t quiet = 1u << (F::kManBits - 1u);
      return static_cast<uint8_t>(sign | kExpAllOnes | quiet | ((ax >> kDrop) & ((1u << F::kManBits) - 1u)));
    } else {
      return static_cast<uint8_t>(sign | 0x7fu);
    }
  }
  if (ax >= F::kOverflowFloatBits) return static_cast<uint8_t>(sign | F::kOverflowBits);  // inf too
  constexpr uint32_t kMinNormal = (127u - F::kBias + 1u) << 23;
  if (ax >= kMinNormal) {  // normal: rebias, drop kDrop bits; a carry out of the mantissa is right
    const uint32_t h = (ax - ((127u - F::kBias) << 23)) >> kDrop;
    return static_cast<uint8_t>(sign | (h + detail::roundsUp(ax, kDrop, h)));
  }
  // Subnormal or zero: the result counts units of 2^(1 - bias - manBits); float's exponent field
  // e gives a significand worth sig * 2^(e - 150), so the count is sig >> (151 - bias - man - e).
  const uint32_t shift = (151u - F::kBias - F::kManBits) - (ax >> 23);
  if (shift > 24) return static_cast<uint8_t>(sign);  // below half the smallest subnormal
  const uint32_t sig = (ax & 0x7fffffu) | 0x800000u;
  const uint32_t h = sig >> shift;  // may round up into the smallest normal: still right
  return static_cast<uint8_t>(sign | (h + detail::roundsUp(sig, shift, h)));
}

template <typename T>
OCCL_HD constexpr uint32_t floatBitsFromFp8Bits(uint8_t b) {
  using F = Fp8Format<T>;
  constexpr uint32_t kDrop = 23 - F::kManBits;
  constexpr uint32_t kExpMax = (1u << F::kExpBits) - 1u;
  constexpr uint32_t kManMask = (1u << F::kManBits) - 1u;
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t e = (b >> F::kManBits) & kExpMax;
  uint32_t m = b & kManMask;
  if constexpr (F::kHasInf) {
    if (e == kExpMax) return sign | 0x7f800000u | (m << kDrop) | (m != 0 ? 0x400000u : 0u);  // inf; NaN quiet
  } else {
    if ((b & 0x7fu) == 0x7fu) return sign | 0x7fc00000u;
  }
  if (e != 0) return sign | ((e + 127u - F::kBias) << 23) | (m << kDrop);
  if (m == 0) return sign;
  // Subnormal m * 2^(1 - bias - manBits): move the leading one onto the implicit bit.
  uint32_t exp = 127u - F::kBias + 1u;
  while ((m & (1u << F::kManBits)) == 0) {
    m <<= 1;
    --exp;
  }
  return sign | (exp << 23) | ((m & kManMask) << kDrop);
}

}  // namespace occl
