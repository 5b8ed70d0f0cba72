// Bulk conversions between the 16-bit floating types and float, for the host's reduce-copy loop:
// bit-for-bit the scalar conversions of dtypes.hpp (round to nearest even, NaNs quieted with
// their payload kept, subnormals exact), n elements at a time. Where the CPU has F16C (half) or
// AVX2 (bfloat16) they run 8 lanes at once, chosen once at run time; elsewhere they are the
// scalar loops. Host only: the device converts per element (cuda_fp16/cuda_bf16).
#pragma once

#include <cstddef>

#include "device/dtypes.hpp"

namespace occl::host {

void toFloats(const Half* in, float* out, size_t n);
void toFloats(const BFloat16* in, float* out, size_t n);
void fromFloats(const float* in, Half* out, size_t n);
void fromFloats(const float* in, BFloat16* out, size_t n);

// What the dispatch picked, for tests and benchmarks: "f16c", "avx2" or "scalar".
const char* halfConversionPath();
const char* bf16ConversionPath();

}  // namespace occl::host
