// The 8-bit floating types against an oracle written from the OCP specification: every pattern
// decoded from its fields with ldexp, every float rounded by searching all 256 patterns for the
// nearest (ties to the even pattern), and the sums and products of every pair of values.
#include "device/fp8.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl {
namespace {

static_assert(fp8BitsFromFloatBits<Fp8E4M3>(0x3f800000u) == 0x38);  // 1.0
static_assert(fp8BitsFromFloatBits<Fp8E5M2>(0x3f800000u) == 0x3c);
static_assert(floatBitsFromFp8Bits<Fp8E4M3>(0x01) == 0x3b000000u);  // 2^-9, the smallest subnormal
static_assert(floatBitsFromFp8Bits<Fp8E5M2>(0x01) == 0x37800000u);  // 2^-16

float f32(uint32_t bits) { return bitsToFloat(bits); }

template <typename T>
uint8_t fp8Of(float f) {
  return toFp8<T>(f).bits;
}

template <typename T>
float fromFp8(uint8_t b) {
  return toFloat(T{b});
}

// ---- The oracle ----

template <typename T>
bool isNaN(uint8_t b) {
  if constexpr (std::is_same_v<T, Fp8E4M3>) return (b & 0x7f) == 0x7f;
  return (b & 0x7c) == 0x7c && (b & 0x03) != 0;
}

template <typename T>
bool isInf(uint8_t b) {
  return std::is_same_v<T, Fp8E5M2> && (b & 0x7f) == 0x7c;
}

// The value of a finite pattern, from the specification's fields.
template <typename T>
double decode(uint8_t b) {
  constexpr int kMan = std::is_same_v<T, Fp8E4M3> ? 3 : 2;
  constexpr int kBias = std::is_same_v<T, Fp8E4M3> ? 7 : 15;
  const int e = (b & 0x7f) >> kMan;
  const int m = b & ((1 << kMan) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - kBias - kMan) : std::ldexp((1 << kMan) + m, e - kBias - kMan);
  return (b & 0x80) ? -mag : mag;
}

template <typename T>
double maxFinite() {
  return std::is_same_v<T, Fp8E4M3> ? 448.0 : 57344.0;
}

// The pattern nearest to x, ties to the even pattern; past the largest finite value the way the
// format overflows (half a step beyond it is the tie, which is e5m2's inf and e4m3's 448).
template <typename T>
uint8_t nearest(double x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return std::is_same_v<T, Fp8E4M3> ? (sign | 0x7f) : (sign | 0x7e);
  const double ax = std::fabs(x);
  const double step = std::is_same_v<T, Fp8E4M3> ? 32.0 : 8192.0;  // the spacing below the maximum
  if constexpr (std::is_same_v<T, Fp8E4M3>) {
    if (ax > maxFinite<T>() + step / 2) return sign | 0x7f;
  } else {
    if (ax >= maxFinite<T>() + step / 2) return sign | 0x7c;
  }
  int best = -1;
  double bestDiff = 0;
  for (int b = 0; b < 0x80; ++b) {
    if (isNaN<T>(static_cast<uint8_t>(b)) || isInf<T>(static_cast<uint8_t>(b))) continue;
    const double d = std::fabs(decode<T>(static_cast<uint8_t>(b)) - ax);
    if (best < 0 || d < bestDiff || (d == bestDiff && (b & 1) == 0)) {
      best = b;
      bestDiff = d;
    }
  }
  return static_cast<uint8_t>(sign | best);
}

template <typename T>
class Fp8 : public ::testing::Test {};
using Fp8Types = ::testing::Types<Fp8E4M3, Fp8E5M2>;
TYPED_TEST_SUITE(Fp8, Fp8Types);

// ---- Tests ----

TYPED_TEST(Fp8, EveryPatternDecodesAndRoundTrips) {
  using T = TypeParam;
  for (uint32_t b = 0; b < 256; ++b) {
    const auto p = static_cast<uint8_t>(b);
    const float f = fromFp8<T>(p);
    if (isNaN<T>(p)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(floatToBits(f) & 0x400000u) << std::hex << b << ": a NaN comes back quiet";
      ASSERT_TRUE(isNaN<T>(fp8Of<T>(f))) << std::hex << b;
      ASSERT_EQ(fp8Of<T>(f) & 0x80, b & 0x80) << std::hex << b << ": sign kept";
    } else if (isInf<T>(p)) {
      ASSERT_EQ(f, (b & 0x80) ? -INFINITY : INFINITY);
      ASSERT_EQ(fp8Of<T>(f), p);
    } else {
      ASSERT_EQ(static_cast<double>(f), decode<T>(p)) << std::hex << b;
      ASSERT_EQ(std::signbit(f), (b & 0x80) != 0) << std::hex << b;
      ASSERT_EQ(fp8Of<T>(f), p) << std::hex << b;
    }
  }
}

// Between every two adjacent finite values: the midpoint goes to the even pattern, the floats on
// either side of it to the nearer value. The last pair is the maximum and the overflow.
TYPED_TEST(Fp8, EveryMidpoint) {
  using T = TypeParam;
  const uint32_t top = std::is_same_v<T, Fp8E4M3> ? 0x7e : 0x7b;
  for (uint32_t b = 0; b <= top; ++b) {
    const double lo = decode<T>(static_cast<uint8_t>(b));
    const double hi = b == top ? lo + (std::is_same_v<T, Fp8E4M3> ? 32.0 : 8192.0) : decode<T>(static_cast<uint8_t>(b + 1));
    const auto mid = static_cast<float>((lo + hi) / 2);  // exact: a few significant bits
    const uint32_t above = b == top ? (std::is_same_v<T, Fp8E4M3> ? 0x7f : 0x7c) : b + 1;
    const uint32_t even = b == top ? (std::is_same_v<T, Fp8E4M3> ? b : above) : ((b & 1u) ? b + 1 : b);
    for (uint32_t sign : {0u, 0x80u}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(fp8Of<T>(s * mid), even | sign) << std::hex << b;
      ASSERT_EQ(fp8Of<T>(s * std::nextafter(mid, 0.0f)), b | sign) << std::hex << b;
      ASSERT_EQ(fp8Of<T>(s * std::nextafter(mid, INFINITY)), above | sign) << std::hex << b;
    }
  }
}

TYPED_TEST(Fp8, SpecialValues) {
  using T = TypeParam;
  const bool e4m3 = std::is_same_v<T, Fp8E4M3>;
  EXPECT_EQ(fp8Of<T>(0.0f), 0x00);
  EXPECT_EQ(fp8Of<T>(-0.0f), 0x80);
  EXPECT_EQ(fp8Of<T>(INFINITY), e4m3 ? 0x7f : 0x7c);
  EXPECT_EQ(fp8Of<T>(-INFINITY), e4m3 ? 0xff : 0xfc);
  EXPECT_EQ(fp8Of<T>(std::numeric_limits<float>::max()), e4m3 ? 0x7f : 0x7c);
  EXPECT_EQ(fp8Of<T>(f32(0x00000001u)), 0x00);  // a float subnormal underflows, sign kept
  EXPECT_EQ(fp8Of<T>(f32(0x80000001u)), 0x80);
  EXPECT_EQ(fp8Of<T>(static_cast<float>(maxFinite<T>())), e4m3 ? 0x7e : 0x7b);
  // A NaN whose payload lives only in the dropped bits stays a NaN.
  EXPECT_TRUE(isNaN<T>(fp8Of<T>(f32(0x7f800001u))));
  EXPECT_TRUE(isNaN<T>(fp8Of<T>(f32(0xffc00000u))));
  EXPECT_EQ(fp8Of<T>(f32(0xffc00000u)) & 0x80, 0x80);
  if (!e4m3) {
    EXPECT_EQ(fp8Of<T>(f32(0x7fa00000u)), 0x7f);  // the top payload bit is kept, the quiet bit set
    EXPECT_EQ(floatToBits(fromFp8<T>(0x7d)), 0x7fe00000u);  // signalling -> quiet, payload kept
  }
}

// A million random floats, spread over every exponent, against the search.
TYPED_TEST(Fp8, RandomFloatsRoundToTheNearest) {
  using T = TypeParam;
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff), exponent(90, 160), sign(0, 1);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = (sign(rng) << 31) | (exponent(rng) << 23) | mantissa(rng);
    const float f = f32(bits);
    ASSERT_EQ(fp8Of<T>(f), nearest<T>(f)) << std::hex << bits << " = " << f;
  }
}

// Every sum, product, quotient by a rank count, min and max of two values: the exact result
// (double holds it) rounded once, as ops::Sum and friends promise.
TYPED_TEST(Fp8, EveryPairCombinesCorrectlyRounded) {
  using T = TypeParam;
  for (uint32_t a = 0; a < 256; ++a) {
    for (uint32_t b = 0; b < 256; ++b) {
      const T x{static_cast<uint8_t>(a)}, y{static_cast<uint8_t>(b)};
      if (isNaN<T>(x.bits) || isNaN<T>(y.bits) || isInf<T>(x.bits) || isInf<T>(y.bits)) continue;
      const double dx = decode<T>(x.bits), dy = decode<T>(y.bits);
      ASSERT_EQ(ops::Sum{}(x, y).bits, nearest<T>(dx + dy)) << std::hex << a << " + " << b;
      ASSERT_EQ(ops::Prod{}(x, y).bits, nearest<T>(dx * dy)) << std::hex << a << " * " << b;
      const bool xMin = dx < dy || (dx == dy && std::signbit(dx));
      ASSERT_EQ(ops::Min{}(x, y).bits, xMin ? a : b) << std::hex << a << " min " << b;
      const bool xMax = dx > dy || (dx == dy && !std::signbit(dx));
      ASSERT_EQ(ops::Max{}(x, y).bits, xMax ? a : b) << std::hex << a << " max " << b;
    }
    const T x{static_cast<uint8_t>(a)};
    if (isNaN<T>(x.bits) || isInf<T>(x.bits)) continue;
    for (int n : {2, 3, 7, 8}) ASSERT_EQ(ops::postDivide(x, n).bits, nearest<T>(decode<T>(x.bits) / n)) << std::hex << a;
  }
}

TEST(Fp8Dtype, Tables) {
  EXPECT_EQ(dtypeSize(occlFloat8e4m3), 1u);
  EXPECT_EQ(dtypeSize(occlFloat8e5m2), 1u);
  EXPECT_STREQ(dtypeName(occlFloat8e4m3), "f8e4m3");
  EXPECT_STREQ(dtypeName(occlFloat8e5m2), "f8e5m2");
  EXPECT_TRUE(dtypeIsFloating(occlFloat8e4m3) && dtypeIsFloating(occlFloat8e5m2));
  EXPECT_EQ(kDtypeOf<Fp8E4M3>, occlFloat8e4m3);
  EXPECT_EQ(kDtypeOf<Fp8E5M2>, occlFloat8e5m2);
  EXPECT_TRUE(kIsFloating<Fp8E4M3> && kIsReducedFloat<Fp8E5M2>);
  EXPECT_EQ(fromInt<Fp8E5M2>(8).bits, 0x48);
  EXPECT_EQ(fromInt<Fp8E4M3>(-16).bits, 0xd8);
}

}  // namespace
}  // namespace occl
