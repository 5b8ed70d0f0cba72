// The host's bulk 16-bit float conversions (primitives/convert_host.hpp) against the scalar ones
// of dtypes.hpp, bit for bit: every half and bfloat16 value to float, and to half/bfloat16 every
// float of a dense sample plus, around every representable value, the rounding ties and their
// neighbours; then the chunked reduce-copy of Sum, Prod and Avg against the element loop.
#include "primitives/convert_host.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "primitives/reduce_copy.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl {
namespace {

template <typename T>
uint32_t floatBitsOf(uint16_t bits) {
  if constexpr (std::is_same_v<T, Half>) {
    return floatBitsFromHalfBits(bits);
  } else {
    return floatBitsFromBf16Bits(bits);
  }
}

template <typename T>
uint16_t bitsOf(uint32_t floatBits) {
  if constexpr (std::is_same_v<T, Half>) {
    return halfBitsFromFloatBits(floatBits);
  } else {
    return bf16BitsFromFloatBits(floatBits);
  }
}

// Floats where rounding is decided: a dense stride over all 2^32 patterns, and for each of the
// 65536 values v of T, v's float and the float halfway to the next value, each +-1 ulp.
template <typename T>
std::vector<uint32_t> hardFloats() {
  std::vector<uint32_t> out;
  for (uint64_t x = 0; x <= 0xffffffffull; x += 4093) out.push_back(static_cast<uint32_t>(x));
  for (uint32_t v = 0; v < 0x10000; ++v) {
    const uint32_t lo = floatBitsOf<T>(static_cast<uint16_t>(v));
    const uint32_t hi = floatBitsOf<T>(static_cast<uint16_t>(v + 1));
    const uint32_t mid = lo + (hi - lo) / 2;  // same sign and finite: the tie between v and v+1
    for (uint32_t f : {lo - 1, lo, lo + 1, mid - 1, mid, mid + 1}) out.push_back(f);
  }
  for (uint32_t f : {0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u, 0xffffffffu, 0x7fbfffffu, 0u, 0x80000000u})
    out.push_back(f);
  return out;
}

template <typename T>
void checkConversions() {
  std::vector<T> all(0x10000);
  for (uint32_t v = 0; v < 0x10000; ++v) all[v].bits = static_cast<uint16_t>(v);
  std::vector<float> f(all.size());
  host::toFloats(all.data(), f.data(), all.size());
  for (uint32_t v = 0; v < 0x10000; ++v)
    ASSERT_EQ(floatToBits(f[v]), floatBitsOf<T>(static_cast<uint16_t>(v))) << std::hex << "value 0x" << v;

  const std::vector<uint32_t> bits = hardFloats<T>();
  std::vector<float> in(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) in[i] = bitsToFloat(bits[i]);
  std::vector<T> out(bits.size());
  host::fromFloats(in.data(), out.data(), in.size());
  for (size_t i = 0; i < bits.size(); ++i)
    ASSERT_EQ(out[i].bits, bitsOf<T>(bits[i])) << std::hex << "float 0x" << bits[i];
}

TEST(ConvertHost, HalfMatchesTheScalarConversionsBitForBit) {
  checkConversions<Half>();
  RecordProperty("path", host::halfConversionPath());
}

TEST(ConvertHost, Bf16MatchesTheScalarConversionsBitForBit) {
  checkConversions<BFloat16>();
  RecordProperty("path", host::bf16ConversionPath());
}

TEST(ConvertHost, ThisCpuTakesTheVectorPathsWhereItHasThem) {
  // A build for x86 where the CPU has F16C/AVX2 must use them (else the speed-up silently goes).
#if defined(__x86_64__)
  EXPECT_STREQ(host::halfConversionPath(), __builtin_cpu_supports("f16c") ? "f16c" : "scalar");
  EXPECT_STREQ(host::bf16ConversionPath(), __builtin_cpu_supports("avx2") ? "avx2" : "scalar");
#else
  EXPECT_STREQ(host::halfConversionPath(), "scalar");
#endif
}

template <typename T>
bool isNaN(T x) {
  return std::is_same_v<T, Half> ? (x.bits & 0x7c00u) == 0x7c00u && (x.bits & 0x3ffu) != 0
                                 : (x.bits & 0x7f80u) == 0x7f80u && (x.bits & 0x7fu) != 0;
}

// Equal bits, or both NaN: which operand's payload an IEEE operation on two NaNs returns is the
// compiler's choice of operand order (reduce_copy_test allows the same).
template <typename T>
bool same(T x, T y) {
  return x.bits == y.bits || (isNaN(x) && isNaN(y));
}

// The chunked path of reduceCopyHost against the element loop (op by op, element by element),
// on random bit patterns (NaNs, infinities and subnormals included), every length up to two
// chunks and a few beyond, in place and out of place, with and without d1 and Avg's division.
template <typename T, typename Op>
void checkChunked() {
  std::mt19937 rng(7);
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{511}, size_t{512}, size_t{513}, size_t{1030},
                   size_t{4099}}) {
    std::vector<T> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i].bits = static_cast<uint16_t>(rng());
      b[i].bits = static_cast<uint16_t>(rng());
    }
    for (int div : {0, 3}) {
      for (bool withB : {true, false}) {
        if (!withB && div == 0) continue;  // a plain copy: memcpy, not this path
        for (bool inPlace : {false, true}) {
          std::vector<T> want(n), d0 = inPlace ? a : std::vector<T>(n), d1(n);
          for (size_t i = 0; i < n; ++i) {
            T r = withB ? Op{}(a[i], b[i]) : a[i];
            if (Op::kPostDivide && div > 1) r = ops::postDivide(r, div);
            want[i] = r;
          }
          const T* src = inPlace ? d0.data() : a.data();
          detail::reduceCopyHost<T, Op>(src, withB ? b.data() : nullptr, d0.data(), d1.data(), n, div);
          for (size_t i = 0; i < n; ++i) {
            ASSERT_TRUE(same(d0[i], want[i])) << (std::is_same_v<T, Half> ? "half " : "bfloat16 ")
                                                << ops::opName(Op::kOp) << " a 0x" << std::hex << a[i].bits << " b 0x"
                                                << b[i].bits << " got 0x" << d0[i].bits << " want 0x" << want[i].bits
                                                << std::dec << " n " << n << " i " << i << " div " << div << " b " << withB
                                                << " inPlace " << inPlace;
            ASSERT_EQ(d1[i].bits, d0[i].bits) << "d1, n " << n << " i " << i;
          }
        }
      }
    }
  }
}

TEST(ConvertHost, ChunkedReduceCopyMatchesTheElementLoop) {
  checkChunked<Half, ops::Sum>();
  checkChunked<Half, ops::Prod>();
  checkChunked<Half, ops::Avg>();
  checkChunked<BFloat16, ops::Sum>();
  checkChunked<BFloat16, ops::Prod>();
  checkChunked<BFloat16, ops::Avg>();
}

}  // namespace
}  // namespace occl
