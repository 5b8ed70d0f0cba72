// Submission queue: one producer (the host, under the communicator's submit lock), every daemon
// block consumes every entry. Each slot carries a `turn` word that says which lap of the ring
// it holds: 2*lap = free for lap `lap`, 2*lap+1 = published. The last of `nConsumers` blocks to
// read an entry (counted in `readers`) frees the slot for the next lap. Sequence numbers are
// 64-bit, so turns never wrap.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

enum SqeFlags : uint32_t {
  kSqeSubmit = 0,
  kSqeExit = 1u << 0,     // the daemon stops after this entry (finalize)
  kSqeInPlace = 1u << 1,  // an in-place call (NCCL's definition): run the collective's in-place form
};

struct alignas(64) Sqe {
  uint64_t turn;     // protocol word, see above
  uint32_t readers;  // blocks that have read this lap's entry
  uint32_t flags;    // SqeFlags
  uint32_t collIndex;  // the communicator's slot of the registered collective
  uint32_t pad0;
  uint64_t seq;      // per-collective submission number, starts at 0
  uint64_t sendbuf;
  uint64_t recvbuf;
  uint64_t pad1[2];
};
static_assert(sizeof(Sqe) == 64, "an SQE is one cache line on both sides of the bus");

// What a consumer copies out of a slot.
struct SqeView {
  uint32_t flags;
  uint32_t collIndex;
  uint64_t seq;
  uint64_t sendbuf;
  uint64_t recvbuf;
};

// Plain handle over memory that the host allocates (pinned host memory on the CUDA backend).
struct SubmissionQueue {
  Sqe* slots;
  uint32_t depth;       // power of two
  uint32_t nConsumers;  // daemon blocks
  uint64_t* published;  // total entries published, for wakeups and the outstanding count

  OCCL_HD Sqe& slot(uint64_t ticket) const { return slots[ticket & (depth - 1)]; }
  OCCL_HD static uint64_t lap(uint64_t ticket, uint32_t depth) { return ticket / depth; }

  // Producer: true if the entry for `ticket` could be written (its slot is free).
  bool tryPush(uint64_t ticket, const SqeView& e) const {
    Sqe& s = slot(ticket);
    if (atomics::loadAcquire(&s.turn) != 2 * lap(ticket, depth)) return false;
    s.flags = e.flags;
    s.collIndex = e.collIndex;
    s.seq = e.seq;
    s.sendbuf = e.sendbuf;
    s.recvbuf = e.recvbuf;
    atomics::storeRelaxed(&s.readers, 0u);
    atomics::storeRelease(&s.turn, 2 * lap(ticket, depth) + 1);
    atomics::storeRelease(published, ticket + 1);
    return true;
  }

  // Consumer `cursor` (each block keeps its own): copies the entry if it is published.
  // Runs on one lane; the caller broadcasts the result to the block.
  OCCL_HD bool tryPop(uint64_t cursor, SqeView& out) const {
    Sqe& s = slot(cursor);
    uint64_t full = 2 * lap(cursor, depth) + 1;
    if (atomics::loadAcquire(&s.turn) != full) return false;
    out.flags = s.flags;
    out.collIndex = s.collIndex;
    out.seq = s.seq;
    out.sendbuf = s.sendbuf;
    out.recvbuf = s.recvbuf;
    if (atomics::fetchAdd(&s.readers, 1u) + 1 == nConsumers) atomics::storeRelease(&s.turn, full + 1);
    return true;
  }

  OCCL_HD uint64_t publishedCount() const { return atomics::loadAcquire(published); }
};
static_assert(sizeof(SubmissionQueue) == 24, "SubmissionQueue layout is shared by host and device");

}  // namespace occl
