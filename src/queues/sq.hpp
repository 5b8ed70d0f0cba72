// Submission queue: one producer (the host, under the communicator's submit lock), every daemon
// block consumes every entry. Only loads and stores cross the bus (defect D5: a GPU's
// read-modify-write on host-mapped memory needs hostNativeAtomicSupported, which PCIe hosts lack):
//
// - The producer writes the entry for ticket t into slot t % depth, then stores `turn = t + 1`
//   (release) and the published count. Sequence numbers are 64-bit, so turns never wrap.
// - Each consumer copies the entry once `turn == cursor + 1`, then stores its cursor + 1
//   (release) into its own BlockReport line; nobody else writes that line.
// - The producer may reuse a slot once every consumer's cursor is past the entry it held: ticket
//   t is writable while t < min(cursors) + depth. It caches that limit and reads the cursors
//   again only when it reaches it.
#pragma once

#include <cstdint>

#include "device/compat.hpp"
#include "queues/block_report.hpp"

namespace occl {

enum SqeFlags : uint32_t {
  kSqeSubmit = 0,
  kSqeExit = 1u << 0,     // the daemon stops after this entry (finalize)
  kSqeInPlace = 1u << 1,  // an in-place call (NCCL's definition): run the collective's in-place form
};

struct alignas(64) Sqe {
  uint64_t turn;       // ticket + 1 once this slot holds that ticket's entry; 0 before the first
  uint32_t flags;      // SqeFlags
  uint32_t collIndex;  // the communicator's slot of the registered collective
  uint64_t seq;        // per-collective submission number, starts at 0
  uint64_t sendbuf;
  uint64_t recvbuf;
  uint64_t pad[3];
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
  BlockReport* reports;  // [nConsumers]: each block's sqNext
  uint64_t* published;    // total entries published, for wakeups and the outstanding count
  uint32_t depth;         // power of two
  uint32_t nConsumers;    // daemon blocks

  OCCL_HD Sqe& slot(uint64_t ticket) const { return slots[ticket & (depth - 1)]; }

  // Producer: every consumer has handled every entry before this ticket.
  uint64_t slowestConsumer() const {
    uint64_t slowest = UINT64_MAX;
    for (uint32_t c = 0; c < nConsumers; ++c) {
      const uint64_t next = atomics::loadAcquire(&reports[c].sqNext);
      slowest = next < slowest ? next : slowest;
    }
    return slowest;
  }
  // Producer: the first ticket that cannot be written yet (its slot still holds an entry some
  // consumer has not handled).
  uint64_t writableLimit() const { return slowestConsumer() + depth; }

  // Producer: true if the entry for `ticket` could be written. `limit` caches writableLimit()
  // between calls (start it at 0).
  bool tryPush(uint64_t ticket, const SqeView& e, uint64_t& limit) const {
    if (ticket >= limit) limit = writableLimit();
    if (ticket >= limit) return false;
    Sqe& s = slot(ticket);
    s.flags = e.flags;
    s.collIndex = e.collIndex;
    s.seq = e.seq;
    s.sendbuf = e.sendbuf;
    s.recvbuf = e.recvbuf;
    atomics::storeRelease(&s.turn, ticket + 1);
    atomics::storeRelease(published, ticket + 1);
    return true;
  }

  // Consumer `cursor` (each block keeps its own): copies the entry if it is published. The
  // caller then reports `cursor + 1` (advance()). Runs on one lane; the caller broadcasts the
  // result to the block.
  OCCL_HD bool tryPop(uint64_t cursor, SqeView& out) const {
    Sqe& s = slot(cursor);
    if (atomics::pollAcquire(&s.turn) != cursor + 1) return false;
    out.flags = atomics::plainLoad(&s.flags);
    out.collIndex = atomics::plainLoad(&s.collIndex);
    out.seq = atomics::plainLoad(&s.seq);
    out.sendbuf = atomics::plainLoad(&s.sendbuf);
    out.recvbuf = atomics::plainLoad(&s.recvbuf);
    return true;
  }

  // Consumer: every entry before `next` is copied; their slots may be reused.
  OCCL_HD void advance(uint32_t consumer, uint64_t next) const { atomics::storeRelease(&reports[consumer].sqNext, next); }

  OCCL_HD uint64_t publishedCount() const { return atomics::loadAcquire(published); }
};
static_assert(sizeof(SubmissionQueue) == 32, "SubmissionQueue layout is shared by host and device");

}  // namespace occl
