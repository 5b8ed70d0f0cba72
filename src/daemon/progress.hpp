// The progress words blocks of one submission publish to each other (executor.hpp, daemon.hpp):
// how far a block got, ordered so that one comparison answers whether it got far enough.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

// Dependency words order (submission, tile, steps done) so one comparison answers "has block b
// finished step s of tile t of submission q".
OCCL_HD inline uint64_t progressWord(uint64_t seq, uint32_t tile, uint32_t stepsDone) {
  return (seq << 32) | (static_cast<uint64_t>(tile) << 12) | stepsDone;
}
OCCL_HD inline bool progressReached(uint64_t word, uint64_t target) {
  auto seqDelta = static_cast<int32_t>(static_cast<uint32_t>(word >> 32) - static_cast<uint32_t>(target >> 32));
  if (seqDelta != 0) return seqDelta > 0;
  return (word & 0xffffffffu) >= (target & 0xffffffffu);
}

}  // namespace occl
