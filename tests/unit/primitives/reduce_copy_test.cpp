// reduceCopy for every (dtype, op) against an independent scalar reference, bit-exact, on the host
// path and on the device (lane-strided, 16-byte pack) path run with simulated lanes.
#include "primitives/reduce_copy.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "primitives/dispatch.hpp"

namespace occl {
namespace {

// ---- Reference: written from the documented semantics, in double / 64-bit arithmetic ----

template <typename T>
double asDouble(T x) {
  if constexpr (kIsReducedFloat<T>) {
    return toFloat(x);
  } else {
    return static_cast<double>(x);
  }
}

// Rounds a double to T. Going through float first is exact enough: float has 2p+2 bits of the
// half/bfloat16/fp8 significand, double of float's, so no double-rounding error can appear.
template <typename T>
T fromDouble(double d) {
  if constexpr (kIsReducedFloat<T>) {
    return fromCompute<T>(static_cast<float>(d));
  } else {
    return static_cast<T>(d);
  }
}

template <typename T>
bool pickFirst(T a, T b, bool wantMin) {
  const double x = asDouble(a), y = asDouble(b);
  if (std::isnan(y)) return true;
  if (std::isnan(x)) return false;
  if (x != y) return wantMin ? x < y : x > y;
  return std::signbit(x) == wantMin;
}

template <typename T>
T refOp(int op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    const uint64_t x = static_cast<uint64_t>(a), y = static_cast<uint64_t>(b);  // modular
    switch (op) {
      case occlProd: return static_cast<T>(x * y);
      case occlMin: return std::min(a, b);
      case occlMax: return std::max(a, b);
      default: return static_cast<T>(x + y);  // Sum, Avg
    }
  } else {
    switch (op) {
      case occlProd: return fromDouble<T>(asDouble(a) * asDouble(b));
      case occlMin: return pickFirst(a, b, true) ? a : b;
      case occlMax: return pickFirst(a, b, false) ? a : b;
      default: return fromDouble<T>(asDouble(a) + asDouble(b));
    }
  }
}

template <typename T>
T refDivide(T x, int n) {
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(x / static_cast<T>(n));  // C division truncates toward zero
  } else {
    return fromDouble<T>(asDouble(x) / n);
  }
}

template <typename T>
bool sameValue(T x, T y) {
  if constexpr (kIsFloating<T>) {
    if (std::isnan(asDouble(x)) && std::isnan(asDouble(y))) return true;  // payloads may differ
  }
  return std::memcmp(&x, &y, sizeof(T)) == 0;
}

// ---- Inputs: random values with the specials that matter for each type ----

template <typename T>
T randomValue(std::mt19937_64& rng) {
  const uint64_t bits = rng();
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(bits);
  } else {
    using L = std::numeric_limits<double>;
    const double specials[] = {L::quiet_NaN(), -L::quiet_NaN(), L::infinity(), -L::infinity(), 0.0, -0.0, 1.0, 3.0};
    const int kind = static_cast<int>(bits % 16);
    if (kind == 0) return fromDouble<T>(specials[(bits >> 8) % 8]);
    if (kind == 1) {  // any bit pattern: subnormals, huge values, NaN payloads
      T x;
      std::memcpy(&x, &bits, sizeof x);
      return x;
    }
    if (kind < 5) return fromDouble<T>(static_cast<double>(static_cast<int>((bits >> 8) % 7) - 3));
    return fromDouble<T>(std::uniform_real_distribution<double>(-1000.0, 1000.0)(rng));
  }
}

// ---- One call shape ----

struct Mode {
  const char* name;
  bool hasB;
  bool hasD1;
  int inPlace;  // 0: d0 is its own buffer; 1: d0 == a; 2: d0 == b
  int divisor;
};

constexpr Mode kModes[] = {
    {"copy", false, false, 0, 0},      {"copy+d1", false, true, 0, 0},   {"copy-self+d1", false, true, 1, 0},
    {"reduce", true, false, 0, 0},     {"reduce+d1", true, true, 0, 0},  {"inplace-a", true, false, 1, 0},
    {"inplace-b+d1", true, true, 2, 0}, {"reduce/3", true, true, 0, 3},  {"copy/5", false, false, 0, 5},
    {"inplace-a/1", true, false, 1, 1},
};

constexpr size_t kSizes[] = {0, 1, 7, 1023, 65537};
constexpr size_t kSlack = 3;  // buffers start at element offset 0 or 1; the rest must stay untouched

enum class Path { Host, Lanes1, Lanes7, Lanes32 };

template <typename T, typename Op>
void runPath(Path path, const T* a, const T* b, T* d0, T* d1, size_t n, uint64_t div) {
  const int lanes = path == Path::Lanes1 ? 1 : path == Path::Lanes7 ? 7 : 32;
  if (path == Path::Host) {
    reduceCopy<T, Op>(a, b, d0, d1, n, div);
    return;
  }
  for (int lane = 0; lane < lanes; ++lane) reduceCopyLanes<T, Op>(a, b, d0, d1, n, div, lane, lanes);
}

template <typename T>
struct Case {
  std::vector<T> a, b, expected;
  T sentinel;
};

template <typename T>
Case<T> makeCase(size_t n, std::mt19937_64& rng) {
  Case<T> c;
  c.a.resize(n + kSlack);
  c.b.resize(n + kSlack);
  for (auto& x : c.a) x = randomValue<T>(rng);
  for (auto& x : c.b) x = randomValue<T>(rng);
  c.sentinel = randomValue<T>(rng);
  return c;
}

// PreMulSum's scalar in these tests, and the opArg a call passes: the scalar's bits for
// PreMulSum, the mode's divisor otherwise.
template <typename T>
T preMulScalar() {
  return fromDouble<T>(3.0);
}

template <typename T>
uint64_t opArgFor(int op, const Mode& m) {
  if (op == ops::kOpPreMulSum) return static_cast<uint64_t>(toBits(preMulScalar<T>()));
  return static_cast<uint64_t>(m.divisor);
}

template <typename T>
std::vector<T> expectedAt(int op, const Mode& m, const Case<T>& c, size_t off, size_t n) {
  std::vector<T> e(n);
  if (op == ops::kOpPreMulSum) {  // the operand from the input (b, else a) times the scalar, then the sum
    const T s = preMulScalar<T>();
    for (size_t i = 0; i < n; ++i)
      e[i] = m.hasB ? refOp(occlSum, c.a[off + i], refOp(occlProd, c.b[off + i], s)) : refOp(occlProd, c.a[off + i], s);
    return e;
  }
  for (size_t i = 0; i < n; ++i) {
    T r = m.hasB ? refOp(op, c.a[off + i], c.b[off + i]) : c.a[off + i];
    e[i] = (op == occlAvg && m.divisor > 1) ? refDivide(r, m.divisor) : r;  // only Avg divides
  }
  return e;
}

// Reused between calls: fresh allocations of these sizes would dominate the suite's run time.
template <typename T>
struct Scratch {
  std::vector<T> a, b, d0, d1, sentinels;
};

// Index of the first element of `got` that differs from what the call should have left there,
// or SIZE_MAX. Outside [off, off + n) nothing may change.
template <typename T>
size_t firstMismatch(const std::vector<T>& got, const std::vector<T>& want, const std::vector<T>& before, size_t off,
                     size_t n) {
  for (size_t i = 0; i < got.size(); ++i) {
    const bool inside = i >= off && i < off + n;
    if (!sameValue(got[i], inside ? want[i - off] : before[i])) return i;
  }
  return SIZE_MAX;
}

template <typename T, typename Op>
void checkOne(const Mode& m, Path path, size_t off, const Case<T>& c, const std::vector<T>& want, size_t n,
              Scratch<T>& s) {
  s.a = c.a;
  s.b = c.b;
  s.d0.assign(n + kSlack, c.sentinel);
  s.d1.assign(n + kSlack, c.sentinel);
  std::vector<T>& out = m.inPlace == 1 ? s.a : m.inPlace == 2 ? s.b : s.d0;
  runPath<T, Op>(path, s.a.data() + off, m.hasB ? s.b.data() + off : nullptr, out.data() + off,
                 m.hasD1 ? s.d1.data() + off : nullptr, n, opArgFor<T>(Op::kOp, m));

  const std::string where = std::string(m.name) + " path=" + std::to_string(static_cast<int>(path)) +
                            " off=" + std::to_string(off) + " n=" + std::to_string(n) + " at ";
  s.sentinels.assign(n + kSlack, c.sentinel);
  const std::vector<T>& outBefore = m.inPlace == 1 ? c.a : m.inPlace == 2 ? c.b : s.sentinels;
  EXPECT_EQ(firstMismatch(out, want, outBefore, off, n), SIZE_MAX) << where << "d0";
  if (m.hasD1) {
    EXPECT_EQ(firstMismatch(s.d1, want, s.sentinels, off, n), SIZE_MAX) << where << "d1";
  }
  // Inputs that are not the output must be untouched everywhere.
  if (m.inPlace != 1) {
    EXPECT_EQ(firstMismatch(s.a, c.a, c.a, 0, 0), SIZE_MAX) << where << "a";
  }
  if (m.inPlace != 2) {
    EXPECT_EQ(firstMismatch(s.b, c.b, c.b, 0, 0), SIZE_MAX) << where << "b";
  }
}

template <typename T, typename Op>
void checkTypeOp(int op) {
  std::mt19937_64 rng(1234 + 17 * op + kDtypeOf<T>);
  Scratch<T> scratch;
  for (const Mode& m : kModes) {
    for (size_t n : kSizes) {
      const Case<T> c = makeCase<T>(n, rng);
      for (size_t off : {size_t{0}, size_t{1}}) {
        const bool big = n > 1023;  // the big size only once, unaligned, on two paths: keeps the suite fast
        if (big && off == 0) continue;
        const std::vector<T> want = expectedAt(op, m, c, off, n);
        for (Path p : {Path::Host, Path::Lanes1, Path::Lanes7, Path::Lanes32}) {
          if (big && (p == Path::Lanes1 || p == Path::Lanes7)) continue;
          checkOne<T, Op>(m, p, off, c, want, n, scratch);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

class ReduceCopy : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(ReduceCopy, MatchesReference) {
  const int dtype = std::get<0>(GetParam()), op = std::get<1>(GetParam());  // no structured binding: captured below
  dispatchTypeOp(dtype, op, [&]<typename T, typename Op>() {
    ASSERT_EQ(sizeof(T), dtypeSize(dtype));
    ASSERT_EQ(kDtypeOf<T>, dtype);
    ASSERT_EQ(Op::kOp, op);
    checkTypeOp<T, Op>(op);
  });
}

INSTANTIATE_TEST_SUITE_P(AllTypesOps, ReduceCopy,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(occlNumTypes)),
                                            ::testing::Range(0, ops::kNumOpKinds)),
                         [](const auto& info) {
                           return std::string(dtypeName(std::get<0>(info.param))) + "_" +
                                  ops::opName(std::get<1>(info.param));
                         });

// Buffers at different offsets within 16 bytes cannot share packs: the lanes path goes scalar.
// Each of b, d0 and d1 in turn sits one element off the others.
TEST(ReduceCopyLanes, MixedAlignment) {
  constexpr size_t n = 301;
  for (int odd = 0; odd < 3; ++odd) {
    const size_t offB = odd == 0, offD0 = odd == 1, offD1 = odd == 2;
    std::vector<float> a(n + 1), b(n + 1), d0(n + 1, -1.0f), d1(n + 1, -1.0f);
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = static_cast<float>(i);
      b[i] = 0.5f * static_cast<float>(i);
    }
    for (int lane = 0; lane < 32; ++lane) {
      reduceCopyLanes<float, ops::Sum>(a.data(), b.data() + offB, d0.data() + offD0, d1.data() + offD1, n, 0, lane,
                                       32);
    }
    for (size_t i = 0; i < n; ++i) {
      ASSERT_EQ(d0[i + offD0], a[i] + b[i + offB]) << odd << " " << i;
      ASSERT_EQ(d1[i + offD1], a[i] + b[i + offB]) << odd << " " << i;
    }
  }
}

// The split into scalar ends and packs: packs only when every buffer sits at one offset within
// 16 bytes (a GPU faults on a misaligned vector access, so the host run alone cannot show this).
TEST(ReduceCopyLanes, PackPlan) {
  alignas(16) float buf[4][64];
  const float* a = buf[0];
  const float* b = buf[1];
  const float* d0 = buf[2];
  const float* d1 = buf[3];
  auto plan = [](const float* x, const float* y, const float* z, const float* w, size_t n) {
    const detail::PackPlan p = detail::planPacks(x, y, z, w, n);
    return std::tuple{p.head, p.nPacks, p.tail};
  };
  EXPECT_EQ(plan(a, b, d0, d1, 50), std::tuple(0u, 12u, 48u));
  EXPECT_EQ(plan(a + 1, b + 1, d0 + 1, d1 + 1, 50), std::tuple(3u, 11u, 47u));
  EXPECT_EQ(plan(a + 1, nullptr, d0 + 5, nullptr, 50), std::tuple(3u, 11u, 47u));
  EXPECT_EQ(plan(a + 3, b + 3, d0 + 3, nullptr, 2), std::tuple(1u, 0u, 1u));  // shorter than the head
  EXPECT_EQ(plan(a, b + 1, d0, d1, 50), std::tuple(50u, 0u, 50u));
  EXPECT_EQ(plan(a, b, d0 + 1, d1, 50), std::tuple(50u, 0u, 50u));
  EXPECT_EQ(plan(a, b, d0, d1 + 2, 50), std::tuple(50u, 0u, 50u));
  EXPECT_EQ(plan(a, nullptr, d0, d1 + 2, 50), std::tuple(50u, 0u, 50u));
}

// A copy moves bits, NaN payloads included.
TEST(ReduceCopy, CopyKeepsBits) {
  std::vector<uint16_t> bits(1000);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = static_cast<uint16_t>(0x7c01 + i);  // NaNs, sNaNs
  std::vector<Half> a(bits.size()), d0(bits.size()), d1(bits.size());
  std::memcpy(a.data(), bits.data(), bits.size() * 2);
  reduceCopy<Half, ops::Max>(a.data(), nullptr, d0.data(), nullptr, a.size(), 0);
  for (int lane = 0; lane < 8; ++lane) reduceCopyLanes<Half, ops::Max>(a.data(), nullptr, d1.data(), nullptr, a.size(), 0, lane, 8);
  EXPECT_EQ(std::memcmp(d0.data(), bits.data(), bits.size() * 2), 0);
  EXPECT_EQ(std::memcmp(d1.data(), bits.data(), bits.size() * 2), 0);
}

// ---- Semantics spelled out on single values ----

TEST(ReduceOps, IntegerWrapAndDivide) {
  EXPECT_EQ(ops::Sum{}(int32_t{INT32_MAX}, int32_t{1}), INT32_MIN);
  EXPECT_EQ(ops::Prod{}(int8_t{64}, int8_t{4}), int8_t{0});
  EXPECT_EQ(ops::Prod{}(uint8_t{255}, uint8_t{255}), uint8_t{1});
  EXPECT_EQ(ops::Prod{}(int64_t{INT64_MIN}, int64_t{-1}), INT64_MIN);
  EXPECT_EQ(ops::postDivide(int32_t{-7}, 2), -3);
  EXPECT_EQ(ops::postDivide(uint64_t{UINT64_MAX}, 2), UINT64_MAX / 2);
  EXPECT_EQ(ops::postDivide(int8_t{-128}, 3), int8_t{-42});
}

TEST(ReduceOps, FloatMinMaxIgnoreNaNAndOrderZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(ops::Min{}(nan, 2.0f), 2.0f);
  EXPECT_EQ(ops::Min{}(2.0f, nan), 2.0f);
  EXPECT_EQ(ops::Max{}(nan, -2.0f), -2.0f);
  EXPECT_TRUE(std::isnan(ops::Max{}(nan, nan)));
  EXPECT_TRUE(std::signbit(ops::Min{}(0.0f, -0.0f)));
  EXPECT_TRUE(std::signbit(ops::Min{}(-0.0f, 0.0f)));
  EXPECT_FALSE(std::signbit(ops::Max{}(0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(ops::Max{}(-0.0f, 0.0f)));
  EXPECT_EQ(ops::Min{}(Half{0x7e00}, Half{0x3c00}).bits, 0x3c00);  // half NaN ignored
  EXPECT_EQ(ops::Max{}(BFloat16{0x8000}, BFloat16{0x0000}).bits, 0x0000);
}

TEST(ReduceOps, ReducedFloatRoundsOncePerOp) {
  // 2048 + 1 in half: the float sum 2049 is a tie between 2048 and 2050; even is 2048.
  EXPECT_EQ(ops::Sum{}(Half{0x6800}, Half{0x3c00}).bits, 0x6800);
  // 2048 + 3 = 2051: tie between 2050 (0x6801) and 2052 (0x6802); even is 2052.
  EXPECT_EQ(ops::Sum{}(Half{0x6800}, Half{0x4200}).bits, 0x6802);
  EXPECT_EQ(ops::Sum{}(Half{0x7bff}, Half{0x7bff}).bits, 0x7c00);  // overflow to inf
  EXPECT_EQ(ops::postDivide(Half{0x4200}, 2).bits, 0x3e00);        // 3 / 2 = 1.5
  EXPECT_EQ(ops::postDivide(1.0f, 3), 1.0f / 3.0f);
  EXPECT_EQ(ops::postDivide(1.0, 3), 1.0 / 3.0);
}

TEST(Dispatch, InvalidCallsNothing) {
  int calls = 0;
  auto count = [&]<typename T, typename Op>() {
    ++calls;
    return static_cast<int>(sizeof(T));
  };
  EXPECT_EQ(dispatchTypeOp(occlNumTypes, occlSum, count), 0);
  EXPECT_EQ(dispatchTypeOp(occlFloat32, ops::kNumOpKinds, count), 0);
  EXPECT_EQ(dispatchTypeOp(-1, -1, count), 0);
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(dispatchTypeOp(occlFloat64, occlMax, count), 8);
  EXPECT_EQ(dispatchTypeOp(occlFloat8e5m2, ops::kOpPreMulSum, count), 1);
  EXPECT_EQ(dispatchType(occlBfloat16, []<typename T>() { return sizeof(T); }), 2u);
  EXPECT_EQ(dispatchType(42, []<typename T>() { return sizeof(T); }), 0u);
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace occl
