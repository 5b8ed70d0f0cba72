// Completion queue: an array of 64-bit slots, 0 = empty. A daemon block publishes a completion
// with one compare-and-swap of a packed word into an empty slot (OCCL's "optimized CQ"); the
// single poller scans the slots, takes each non-zero word and writes 0 back. The word carries
// the collective's slot index, a status code and the low bits of the submission number, so the
// poller detects a lost or duplicated completion instead of silently mis-firing callbacks.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

struct Cqe {
  uint32_t collIndex;  // < 2^24
  uint32_t status;     // occlResult_t, < 2^8
  uint32_t seqLow;     // submission number modulo 2^31
};

namespace cqe {
inline constexpr uint32_t kSeqBits = 31;
inline constexpr uint32_t kStatusBits = 8;
inline constexpr uint32_t kIndexBits = 24;
inline constexpr uint64_t kValid = 1ull << 63;
inline constexpr uint32_t kMaxCollIndex = (1u << kIndexBits) - 1;
inline constexpr uint64_t kSeqMask = (1ull << kSeqBits) - 1;

OCCL_HD inline uint64_t pack(uint32_t collIndex, uint32_t status, uint64_t seq) {
  return kValid | (static_cast<uint64_t>(collIndex) << (kSeqBits + kStatusBits)) |
         (static_cast<uint64_t>(status & 0xffu) << kSeqBits) | (seq & kSeqMask);
}
OCCL_HD inline Cqe unpack(uint64_t word) {
  Cqe c;
  c.seqLow = static_cast<uint32_t>(word & kSeqMask);
  c.status = static_cast<uint32_t>((word >> kSeqBits) & 0xffu);
  c.collIndex = static_cast<uint32_t>((word >> (kSeqBits + kStatusBits)) & kMaxCollIndex);
  return c;
}
}  // namespace cqe

struct CompletionQueue {
  uint64_t* slots;
  uint32_t depth;  // power of two

  // Producer: tries slots from `hint` on until a CAS lands; returns the slot used + 1 as the
  // next hint, or false after one full lap (CQ full: the caller retries later, nothing is lost).
  OCCL_HD bool tryPush(uint64_t word, uint32_t& hint) const {
    for (uint32_t i = 0; i < depth; ++i) {
      uint32_t idx = (hint + i) & (depth - 1);
      uint64_t expected = 0;
      if (atomics::compareExchange(&slots[idx], expected, word)) {
        hint = idx + 1;
        return true;
      }
    }
    return false;
  }

  // Poller: takes the word in slot `idx` if there is one.
  bool tryTake(uint32_t idx, uint64_t& word) const {
    uint64_t* s = &slots[idx & (depth - 1)];
    word = atomics::loadAcquire(s);
    if (word == 0) return false;
    atomics::storeRelease(s, uint64_t{0});
    return true;
  }
};
static_assert(sizeof(CompletionQueue) == 16, "CompletionQueue layout is shared by host and device");

}  // namespace occl
