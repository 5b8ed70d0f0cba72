// Bulk conversions between the narrow floating types and float, for the host's reduce-copy loop:
// bit-for-bit the scalar conversions of dtypes.hpp and fp8.hpp (round to nearest even, NaNs
// quieted with their payload kept, subnormals exact), n elements at a time. Where the CPU has F16C
// (half) or AVX2 (bfloat16) they run 8 lanes at once, chosen once at run time; elsewhere they are
// the scalar loops. The 8-bit types widen through a 256-entry table and narrow element by element.
// Host only: the device converts per element.
#pragma once

#include <cstddef>

#include "device/dtypes.hpp"

namespace occl::host {

void toFloats(const Half* in, float* out, size_t n);
void toFloats(const BFloat16* in, float* out, size_t n);
void fromFloats(const float* in, Half* out, size_t n);
void fromFloats(const float* in, BFloat16* out, size_t n);
void toFloats(const Fp8E4M3* in, float* out, size_t n);
void toFloats(const Fp8E5M2* in, float* out, size_t n);
void fromFloats(const float* in, Fp8E4M3* out, size_t n);
void fromFloats(const float* in, Fp8E5M2* out, size_t n);

// What the dispatch picked, for tests and benchmarks: "f16c", "avx2" or "scalar".
const char* halfConversionPath();
const char* bf16ConversionPath();

}  // namespace occl::host
