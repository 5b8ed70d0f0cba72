// Compile-only: proves that the shared primitives headers build as device code. The kernels
// instantiate the device reduceCopy for every (dtype, op) pair through dispatchTypeOp with the
// executor's own ReduceCopyCall, plus the conversions and operators on their own. Nothing launches them.
#include <cstddef>
#include <cstdint>

#include "primitives/dispatch.hpp"
#include "device/dtypes.hpp"
#include "primitives/primitives.hpp"
#include "primitives/reduce_copy.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl {

// The functor form the executor dispatches (primitives.hpp's ReduceCopyCall).
__global__ void reduceCopyEveryTypeOp(int dtype, int op, ReduceCopyCall args) { dispatchTypeOp(dtype, op, args); }

// The template-lambda forms (kept cheap: every dispatch instantiates all pairs), and the
// explicit-lanes entry point on half a block.
__global__ void lambdasAndLanes(int dtype, int op, const float* a, float* d0, size_t n, int* out) {
  const size_t bytes = dispatchType(dtype, [&]<typename T>() { return sizeof(T); });
  const int code = dispatchTypeOp(dtype, op, [&]<typename T, typename Op>() {
    return static_cast<int>(sizeof(T)) * 16 + static_cast<int>(Op::kOp);
  });
  if (threadIdx.x < blockDim.x / 2) reduceCopyLanes<float, ops::Avg>(a, a, d0, nullptr, n, 2, threadIdx.x, blockDim.x / 2);
  if (threadIdx.x == 0) *out = code + static_cast<int>(bytes);
}

__global__ void conversionsAndOps(const float* in, Half* h, BFloat16* b, float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  h[i] = toHalf(in[i]);
  b[i] = toBFloat16(in[i]);
  out[i] = toFloat(h[i]) + toFloat(b[i]) + bitsToFloat(floatBitsFromHalfBits(halfBitsFromFloatBits(floatToBits(in[i])))) +
           bitsToFloat(floatBitsFromBf16Bits(bf16BitsFromFloatBits(floatToBits(in[i]))));
  h[i] = ops::Max{}(ops::Min{}(h[i], Half{0x3c00}), ops::postDivide(h[i], 3));
  out[i] += static_cast<float>(dtypeSize(i % occlNumTypes) + (dtypeIsFloating(i) ? 1 : 0)) + (dtypeName(i)[0] == 'i');
}

}  // namespace occl
