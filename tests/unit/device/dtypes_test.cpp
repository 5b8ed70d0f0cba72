// Element types: bit-exact half/bfloat16 conversions and the dtype tables.
#include "device/dtypes.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace occl {
namespace {

uint16_t halfOf(float f) { return toHalf(f).bits; }
uint16_t bf16Of(float f) { return toBFloat16(f).bits; }
float fromHalf(uint16_t h) { return toFloat(Half{h}); }
float fromBf16(uint16_t b) { return toFloat(BFloat16{b}); }
float f32(uint32_t bits) { return bitsToFloat(bits); }

bool halfIsNaN(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool bf16IsNaN(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

// The bit-level functions are constexpr: a few facts hold at compile time.
static_assert(halfBitsFromFloatBits(0x3f800000u) == 0x3c00u);  // 1.0
static_assert(floatBitsFromHalfBits(0x0001u) == 0x33800000u);  // 2^-24
static_assert(bf16BitsFromFloatBits(0x3f808000u) == 0x3f80u);  // tie to even, down

TEST(Half, EdgeValues) {
  EXPECT_EQ(halfOf(0.0f), 0x0000);
  EXPECT_EQ(halfOf(-0.0f), 0x8000);
  EXPECT_EQ(halfOf(1.0f), 0x3c00);
  EXPECT_EQ(halfOf(-2.0f), 0xc000);
  EXPECT_EQ(halfOf(std::ldexp(1.0f, -24)), 0x0001);           // smallest subnormal
  EXPECT_EQ(halfOf(std::ldexp(1023.0f, -24)), 0x03ff);        // largest subnormal
  EXPECT_EQ(halfOf(std::ldexp(1.0f, -14)), 0x0400);           // smallest normal
  EXPECT_EQ(halfOf(65504.0f), 0x7bff);                        // max finite
  EXPECT_EQ(halfOf(65519.99f), 0x7bff);                       // just below the overflow tie
  EXPECT_EQ(halfOf(65520.0f), 0x7c00);                        // tie with 2^16: even is inf
  EXPECT_EQ(halfOf(1e6f), 0x7c00);                            // overflow
  EXPECT_EQ(halfOf(-1e6f), 0xfc00);
  EXPECT_EQ(halfOf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(halfOf(INFINITY), 0x7c00);
  EXPECT_EQ(halfOf(-INFINITY), 0xfc00);
  EXPECT_EQ(halfOf(f32(0x00000001u)), 0x0000);                // float subnormal underflows
  EXPECT_EQ(halfOf(f32(0x80000001u)), 0x8000);
  EXPECT_EQ(halfOf(std::ldexp(1.0f, -25)), 0x0000);           // tie 0 / 2^-24: even is 0
  EXPECT_EQ(halfOf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(halfOf(std::ldexp(3.0f, -25)), 0x0002);           // tie 1 / 2: even is 2
  EXPECT_EQ(halfOf(std::ldexp(2047.0f, -25)), 0x0400);        // tie 0x3ff / 0x400: into normals
}

TEST(Half, RoundToNearestEvenTies) {
  EXPECT_EQ(halfOf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);    // tie, even below
  EXPECT_EQ(halfOf(1.0f + std::ldexp(3.0f, -11)), 0x3c02);    // tie, even above
  EXPECT_EQ(halfOf(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // past the tie
  EXPECT_EQ(halfOf(1.0f + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -23)), 0x3c00);  // before it
  EXPECT_EQ(halfOf(2.0f - std::ldexp(1.0f, -11)), 0x4000);    // tie 0x3fff / 0x4000: carry into the exponent
}

TEST(Half, NaN) {
  const uint16_t qnan = halfOf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(halfIsNaN(qnan));
  EXPECT_TRUE(qnan & 0x0200);
  // A NaN whose payload lives only in the low 13 bits must not truncate to inf.
  const uint16_t low = halfOf(f32(0x7f800001u));
  EXPECT_TRUE(halfIsNaN(low));
  EXPECT_TRUE(low & 0x0200);
  EXPECT_EQ(halfOf(f32(0xff800001u)) & 0x8000, 0x8000);  // sign kept
  // Signalling half NaN -> quiet float NaN.
  EXPECT_EQ(floatToBits(fromHalf(0x7c01)), 0x7fc02000u);
}

TEST(Half, ToFloatValues) {
  EXPECT_EQ(floatToBits(fromHalf(0x0000)), 0x00000000u);
  EXPECT_EQ(floatToBits(fromHalf(0x8000)), 0x80000000u);
  EXPECT_EQ(fromHalf(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fromHalf(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fromHalf(0x0400), std::ldexp(1.0f, -14));
  EXPECT_EQ(fromHalf(0x7bff), 65504.0f);
  EXPECT_EQ(fromHalf(0x7c00), INFINITY);
  EXPECT_EQ(fromHalf(0xfc00), -INFINITY);
  EXPECT_EQ(fromHalf(0x3555), 0.333251953125f);
}

// Every half round-trips through float; NaNs stay NaNs (quiet, sign kept).
TEST(Half, AllPatternsRoundTrip) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const uint16_t back = halfOf(fromHalf(static_cast<uint16_t>(h)));
    if (halfIsNaN(static_cast<uint16_t>(h))) {
      ASSERT_TRUE(halfIsNaN(back)) << std::hex << h;
      ASSERT_EQ(back & 0x8200u, (h & 0x8000u) | 0x0200u) << std::hex << h;
    } else {
      ASSERT_EQ(back, h) << std::hex << h;
    }
  }
}

// For every pair of adjacent finite halves: the midpoint goes to the even one, the floats next to
// it go to the nearer one. Checks RNE everywhere, subnormals and the overflow boundary included.
TEST(Half, AllMidpoints) {
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const double lo = fromHalf(static_cast<uint16_t>(h));
    const double hi = h == 0x7bffu ? 65536.0 : fromHalf(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: needs 12 significant bits
    const uint32_t even = (h & 1u) ? h + 1 : h;
    for (uint32_t sign : {0u, 0x8000u}) {
      const float s = sign ? -1.0f : 1.0f;
      ASSERT_EQ(halfOf(s * mid), even | sign) << std::hex << h;
      ASSERT_EQ(halfOf(s * std::nextafter(mid, 0.0f)), h | sign) << std::hex << h;
      ASSERT_EQ(halfOf(s * std::nextafter(mid, INFINITY)), (h + 1) | sign) << std::hex << h;
    }
  }
}

TEST(BFloat16, EdgeValues) {
  EXPECT_EQ(bf16Of(0.0f), 0x0000);
  EXPECT_EQ(bf16Of(-0.0f), 0x8000);
  EXPECT_EQ(bf16Of(1.0f), 0x3f80);
  EXPECT_EQ(bf16Of(f32(0x00010000u)), 0x0001);  // smallest subnormal
  EXPECT_EQ(bf16Of(f32(0x007f0000u)), 0x007f);  // largest subnormal
  EXPECT_EQ(bf16Of(f32(0x00800000u)), 0x0080);  // smallest normal
  EXPECT_EQ(bf16Of(f32(0x00000001u)), 0x0000);  // tiny float subnormal rounds to 0
  EXPECT_EQ(bf16Of(f32(0x00008000u)), 0x0000);  // tie, even is 0
  EXPECT_EQ(bf16Of(f32(0x00018000u)), 0x0002);  // tie, even is 2
  EXPECT_EQ(bf16Of(f32(0x7f7f0000u)), 0x7f7f);  // max finite
  EXPECT_EQ(bf16Of(f32(0x7f7f7fffu)), 0x7f7f);
  EXPECT_EQ(bf16Of(f32(0x7f7f8000u)), 0x7f80);  // tie with 2^128: even is inf
  EXPECT_EQ(bf16Of(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16Of(-std::numeric_limits<float>::max()), 0xff80);
  EXPECT_EQ(bf16Of(INFINITY), 0x7f80);
  EXPECT_EQ(bf16Of(-INFINITY), 0xff80);
  EXPECT_EQ(bf16Of(f32(0x3f808000u)), 0x3f80);  // tie, even below
  EXPECT_EQ(bf16Of(f32(0x3f818000u)), 0x3f82);  // tie, even above
  EXPECT_EQ(bf16Of(f32(0x3f808001u)), 0x3f81);
  EXPECT_EQ(bf16Of(f32(0x3fffc000u)), 0x4000);  // carry into the exponent
  const uint16_t nan = bf16Of(f32(0x7f800001u));  // payload only in the dropped bits
  EXPECT_TRUE(bf16IsNaN(nan));
  EXPECT_TRUE(nan & 0x40);
  EXPECT_EQ(floatToBits(fromBf16(0x7f81)), 0x7fc10000u);  // signalling -> quiet
  EXPECT_EQ(floatToBits(fromBf16(0x0001)), 0x00010000u);
}

TEST(BFloat16, AllPatternsRoundTrip) {
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const uint16_t back = bf16Of(fromBf16(static_cast<uint16_t>(b)));
    if (bf16IsNaN(static_cast<uint16_t>(b))) {
      ASSERT_TRUE(bf16IsNaN(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8040u, (b & 0x8000u) | 0x40u) << std::hex << b;
    } else {
      ASSERT_EQ(back, b) << std::hex << b;
    }
  }
}

// Within a binade, the floats between bfloat16 b and b+1 are those with b's top 16 bits.
TEST(BFloat16, AllMidpoints) {
  for (uint32_t b = 0; b < 0x7f80u; ++b) {
    const uint32_t mid = (b << 16) | 0x8000u;
    const uint32_t even = (b & 1u) ? b + 1 : b;
    for (uint32_t sign : {0u, 0x8000u}) {
      const uint32_t s = sign << 16;
      ASSERT_EQ(bf16Of(f32(s | mid)), even | sign) << std::hex << b;
      ASSERT_EQ(bf16Of(f32(s | (mid - 1))), b | sign) << std::hex << b;
      ASSERT_EQ(bf16Of(f32(s | (mid + 1))), (b + 1) | sign) << std::hex << b;
    }
  }
}

template <occlDataType_t D>
void checkTable(size_t size, const char* name, bool floating) {
  using T = TypeOf_t<D>;
  EXPECT_EQ(dtypeSize(D), sizeof(T));
  EXPECT_EQ(dtypeSize(D), size);
  EXPECT_STREQ(dtypeName(D), name);
  EXPECT_EQ(dtypeIsFloating(D), floating);
  EXPECT_EQ(kIsFloating<T>, floating);
  EXPECT_EQ(kDtypeOf<T>, D);
  EXPECT_TRUE(dtypeValid(D));
}

TEST(Dtype, Tables) {
  checkTable<occlInt8>(1, "int8", false);
  checkTable<occlUint8>(1, "uint8", false);
  checkTable<occlInt32>(4, "int32", false);
  checkTable<occlUint32>(4, "uint32", false);
  checkTable<occlInt64>(8, "int64", false);
  checkTable<occlUint64>(8, "uint64", false);
  checkTable<occlFloat16>(2, "half", true);
  checkTable<occlFloat32>(4, "float", true);
  checkTable<occlFloat64>(8, "double", true);
  checkTable<occlBfloat16>(2, "bfloat16", true);
  for (int bad : {-1, static_cast<int>(occlNumTypes), 1000}) {
    EXPECT_FALSE(dtypeValid(bad));
    EXPECT_EQ(dtypeSize(bad), 0u);
    EXPECT_STREQ(dtypeName(bad), "invalid");
    EXPECT_FALSE(dtypeIsFloating(bad));
  }
}

}  // namespace
}  // namespace occl
