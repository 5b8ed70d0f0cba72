// Completion queue: one ring of `depth` 64-bit slots per daemon block, 0 = empty. A block's
// leader is its ring's only producer and the host's poller its only consumer, so only loads and
// stores cross the bus (defect D5; OCCL's "optimized CQ" CAS into any free slot needed device
// atomics on host memory). The producer writes the word into slot `tail % depth` once the poller
// has emptied it, then counts it in its BlockReport; the poller takes each ring's words in order
// and writes 0 back. The word carries the collective's slot index, a status code and the low
// bits of the submission number, so the poller detects a lost or duplicated completion instead
// of silently mis-firing callbacks.
#pragma once

#include <cstdint>

#include "device/coll_desc.hpp"
#include "device/compat.hpp"
#include "queues/block_report.hpp"

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
static_assert(uint64_t{CollTable::kMaxPages} * CollTable::kPageSize - 1 <= kMaxCollIndex,
              "a CQE names every index of the collective table");
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
  uint64_t* slots;        // [nRings * depth]: ring r is slots[r * depth, (r + 1) * depth)
  BlockReport* reports;   // [nRings]: each ring's cqPublished
  uint32_t depth;         // slots per ring, power of two
  uint32_t nRings;        // daemon blocks

  OCCL_HD uint64_t* slot(uint32_t ring, uint64_t position) const {
    return &slots[static_cast<uint64_t>(ring) * depth + (position & (depth - 1))];
  }

  // Producer `ring` (one block's leader), whose next CQE is its `tail`-th: false while the
  // poller has not emptied that slot (the ring is full: retry later, nothing is lost).
  OCCL_HD bool tryPush(uint32_t ring, uint64_t tail, uint64_t word) const {
    uint64_t* s = slot(ring, tail);
    if (atomics::loadAcquire(s) != 0) return false;
    atomics::storeRelease(s, word);
    atomics::storeRelease(&reports[ring].cqPublished, tail + 1);
    return true;
  }

  // Poller: takes the `head`-th word of ring `ring` if it has been written.
  bool tryTake(uint32_t ring, uint64_t head, uint64_t& word) const {
    uint64_t* s = slot(ring, head);
    word = atomics::loadAcquire(s);
    if (word == 0) return false;
    atomics::storeRelease(s, uint64_t{0});
    return true;
  }

  // CQEs written so far, over every ring.
  uint64_t publishedCount() const {
    uint64_t total = 0;
    for (uint32_t r = 0; r < nRings; ++r) total += atomics::loadAcquire(&reports[r].cqPublished);
    return total;
  }
};
static_assert(sizeof(CompletionQueue) == 24, "CompletionQueue layout is shared by host and device");

}  // namespace occl
