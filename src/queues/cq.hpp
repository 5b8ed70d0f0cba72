// Completion queue: one ring of `depth` 64-bit slots per daemon block, 0 = empty. A block's
// leader is its ring's only producer and the host's poller its only consumer, so only loads and
// stores cross the bus (defect D5; OCCL's "optimized CQ" CAS into any free slot needed device
// atomics on host memory). The word carries the collective's slot index, a status code and the
// low bits of the submission number, so the poller detects a lost or duplicated completion
// instead of silently mis-firing callbacks.
//
// The producer's side is one write across the bus per CQE (issue 40): it writes its `tail`-th
// word into slot `tail % depth` on credit. The poller takes each ring's words in order, writes 0
// back and publishes its head (the count of words it has taken) on the ring's own line; the
// producer keeps the limit head + depth in its block state and reads the head again only when its
// tail reaches that limit, once per `depth` CQEs while the poller keeps up. A slot the head is
// past was emptied before the head was published, so the producer never reads a slot.
// How many CQEs a block wrote is in its BlockReport (cqPublished) only as of the last launch it
// left: the host looks for new CQEs in the rings themselves (anyWaiting).
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
  uint64_t* heads;        // [nRings * kHeadStride]: the poller's head of ring r at heads[r * kHeadStride]
  BlockReport* reports;   // [nRings]: each ring's cqPublished as of its block's last launch
  uint32_t depth;         // slots per ring, power of two
  uint32_t nRings;        // daemon blocks

  static constexpr uint32_t kHeadStride = 8;  // one cache line per ring's head

  OCCL_HD uint64_t* slot(uint32_t ring, uint64_t position) const {
    return &slots[static_cast<uint64_t>(ring) * depth + (position & (depth - 1))];
  }
  OCCL_HD uint64_t* head(uint32_t ring) const { return &heads[static_cast<uint64_t>(ring) * kHeadStride]; }

  // Producer `ring` (one block's leader), whose next CQE is its `tail`-th: false while the
  // poller has not emptied that slot (the ring is full: retry later, nothing is lost). `limit`
  // caches the first tail that needs more credit (start it at 0).
  OCCL_HD bool tryPush(uint32_t ring, uint64_t tail, uint64_t word, uint64_t& limit) const {
    if (tail >= limit) limit = atomics::loadAcquire(head(ring)) + depth;
    if (tail >= limit) return false;
    atomics::storeRelease(slot(ring, tail), word);
    return true;
  }

  // Poller: takes the `at`-th word of ring `ring` if it has been written, and publishes the head
  // past it.
  bool tryTake(uint32_t ring, uint64_t at, uint64_t& word) const {
    uint64_t* s = slot(ring, at);
    word = atomics::loadAcquire(s);
    if (word == 0) return false;
    atomics::storeRelease(s, uint64_t{0});
    atomics::storeRelease(head(ring), at + 1);  // after the slot is empty: the producer may refill it
    return true;
  }

  // Poller: whether a CQE waits at the head of some ring.
  bool anyWaiting() const {
    for (uint32_t r = 0; r < nRings; ++r)
      if (atomics::loadAcquire(slot(r, atomics::loadAcquire(head(r)))) != 0) return true;
    return false;
  }

  // Poller: CQEs taken so far, over every ring (whoever took them).
  uint64_t takenCount() const {
    uint64_t total = 0;
    for (uint32_t r = 0; r < nRings; ++r) total += atomics::loadAcquire(head(r));
    return total;
  }

  // CQEs written as of each block's last report (as it left a launch), over every ring.
  uint64_t reportedCount() const {
    uint64_t total = 0;
    for (uint32_t r = 0; r < nRings; ++r) total += atomics::loadAcquire(&reports[r].cqPublished);
    return total;
  }
};
static_assert(sizeof(CompletionQueue) == 32, "CompletionQueue layout is shared by host and device");

}  // namespace occl
