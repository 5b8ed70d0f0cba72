// Round to nearest, ties to even, on raw bits: the one rule every narrowing float conversion of
// occl uses (dtypes.hpp for half and bfloat16, fp8.hpp for the 8-bit formats).
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl::detail {

// 1 when the `dropped` low bits of `bits`, removed by truncation to `kept`, call for rounding up
// under round-to-nearest-even; 0 otherwise. 1 <= dropped <= 31.
OCCL_HD constexpr uint32_t roundsUp(uint32_t bits, uint32_t dropped, uint32_t kept) {
  const uint32_t rem = bits & ((1u << dropped) - 1u);
  const uint32_t halfway = 1u << (dropped - 1u);
  return (rem > halfway || (rem == halfway && (kept & 1u))) ? 1u : 0u;
}

}  // namespace occl::detail
