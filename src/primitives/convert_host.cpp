#include "primitives/convert_host.hpp"

#include <array>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace occl::host {
namespace {

// ---- Scalar: the reference (dtypes.hpp), one element at a time ----

template <typename T>
void toFloatsScalar(const T* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = toCompute(in[i]);
}

template <typename T>
void fromFloatsScalar(const float* in, T* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = fromCompute<T>(in[i]);
}

#if defined(__x86_64__)

// ---- half: F16C's conversions are IEEE's, which dtypes.hpp's scalar code spells out ----

__attribute__((target("avx,f16c"))) void halfToFloatsF16c(const Half* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
  toFloatsScalar(in + i, out + i, n - i);
}

__attribute__((target("avx,f16c"))) void floatsToHalfF16c(const float* in, Half* out, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  fromFloatsScalar(in + i, out + i, n - i);
}

// ---- bfloat16: the scalar formulas, branch-free so that GCC vectorises them for AVX2 ----

__attribute__((target("avx2"))) void bf16ToFloatsAvx2(const BFloat16* in, float* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = bitsToFloat(floatBitsFromBf16Bits(in[i].bits));
}

__attribute__((target("avx2"))) void floatsToBf16Avx2(const float* in, BFloat16* out, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i].bits = bf16BitsFromFloatBits(floatToBits(in[i]));
}

bool haveF16c() { return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c"); }
bool haveAvx2() { return __builtin_cpu_supports("avx2"); }

#else

bool haveF16c() { return false; }
bool haveAvx2() { return false; }

#endif

// Chosen once, on first use (static initialisation is thread-safe).
struct Paths {
  void (*halfToFloats)(const Half*, float*, size_t) = toFloatsScalar<Half>;
  void (*floatsToHalf)(const float*, Half*, size_t) = fromFloatsScalar<Half>;
  void (*bf16ToFloats)(const BFloat16*, float*, size_t) = toFloatsScalar<BFloat16>;
  void (*floatsToBf16)(const float*, BFloat16*, size_t) = fromFloatsScalar<BFloat16>;
  const char* half = "scalar";
  const char* bf16 = "scalar";

  Paths() {
#if defined(__x86_64__)
    if (haveF16c()) {
      halfToFloats = halfToFloatsF16c;
      floatsToHalf = floatsToHalfF16c;
      half = "f16c";
    }
    if (haveAvx2()) {
      bf16ToFloats = bf16ToFloatsAvx2;
      floatsToBf16 = floatsToBf16Avx2;
      bf16 = "avx2";
    }
#endif
  }
};

const Paths& paths() {
  static const Paths p;
  return p;
}

// Every fp8 value as a float, built once from the bit-level conversion.
template <typename T>
const std::array<float, 256>& fp8Table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (uint32_t b = 0; b < 256; ++b) t[b] = bitsToFloat(floatBitsFromFp8Bits<T>(static_cast<uint8_t>(b)));
    return t;
  }();
  return table;
}

template <typename T>
void fp8ToFloats(const T* in, float* out, size_t n) {
  const std::array<float, 256>& table = fp8Table<T>();
  for (size_t i = 0; i < n; ++i) out[i] = table[in[i].bits];
}

}  // namespace

void toFloats(const Half* in, float* out, size_t n) { paths().halfToFloats(in, out, n); }
void toFloats(const BFloat16* in, float* out, size_t n) { paths().bf16ToFloats(in, out, n); }
void fromFloats(const float* in, Half* out, size_t n) { paths().floatsToHalf(in, out, n); }
void fromFloats(const float* in, BFloat16* out, size_t n) { paths().floatsToBf16(in, out, n); }
void toFloats(const Fp8E4M3* in, float* out, size_t n) { fp8ToFloats(in, out, n); }
void toFloats(const Fp8E5M2* in, float* out, size_t n) { fp8ToFloats(in, out, n); }
void fromFloats(const float* in, Fp8E4M3* out, size_t n) { fromFloatsScalar(in, out, n); }
void fromFloats(const float* in, Fp8E5M2* out, size_t n) { fromFloatsScalar(in, out, n); }
const char* halfConversionPath() { return paths().half; }
const char* bf16ConversionPath() { return paths().bf16; }

}  // namespace occl::host
