// Submission queue: one producer (the host, under the communicator's submit lock), every daemon
// block consumes every entry. Only loads and stores cross the bus (defect D5: a GPU's
// read-modify-write on host-mapped memory needs hostNativeAtomicSupported, which PCIe hosts lack),
// and a consumer's side costs one read across the bus per entry (issue 40):
//
// - The producer writes the entry for ticket t into slot t % depth as eight 64-bit words, each
//   holding 32 bits of the entry under the ticket's tag (the low 32 bits of t + 1), then the
//   published count. Tickets are 64-bit, so they never wrap; a slot's old tag differs from the
//   new one as long as depth < 2^32.
// - A consumer reads its cursor's whole slot at once (atomics::pollLine: one 64-byte read) and
//   takes it when all eight tags are its cursor's. A 64-bit word is read whole, a line is not: a
//   read that met the producer half-way shows an old tag in some word and is simply not taken
//   yet. The poll that finds the entry is thus its only read.
// - A consumer reports its cursor (into its own BlockReport line) only when asked, not for every
//   entry: after an entry flagged kSqeReport, when its task queue is full, and when it leaves a
//   launch (daemon.hpp). The producer may reuse a slot once every consumer's reported cursor is
//   past the entry it held: ticket t is writable while t < min(reports) + depth. It caches that
//   limit, reads the reports again only when it reaches it or half of it, and flags the entry
//   before the limit and the one half-way to it. So the entry just before a limit the producer
//   is stuck at was flagged: every consumer that copies it reports past the slot wanted.
#pragma once

#include <cstdint>

#include "device/compat.hpp"
#include "queues/block_report.hpp"

namespace occl {

enum SqeFlags : uint16_t {
  kSqeSubmit = 0,
  kSqeExit = 1u << 0,     // the daemon stops after this entry (finalize)
  kSqeInPlace = 1u << 1,  // an in-place call (NCCL's definition): run the collective's in-place form
  kSqeReport = 1u << 2,   // the producer asks each consumer to report its cursor once it has copied this entry
  kSqeGated = 1u << 3,    // the submission starts once its gate is open (device/gate.hpp)
  kSqeSmall = 1u << 4,    // a variable count's small submission: run the small form (CollDesc::smallCount)
  kSqeBarrier = 1u << 5,  // starts once every earlier submission of its collective completed (CollShared::doneThrough)
};

// What an entry says; the producer writes it, a consumer copies it. The fields are wider than what
// an entry carries (eight 32-bit pieces, sqe::words): flags and parts 8 bits each, the collective's
// index 20 bits, the submission number 48 bits, the count 44 bits, the buffers 64 bits each.
struct SqeView {
  uint16_t flags;      // SqeFlags
  uint16_t nParts;     // the parts its form runs (ProgramForm::nParts): a block given none skips the entry
  uint32_t collIndex;  // the communicator's slot of the registered collective
  uint64_t seq;        // per-collective submission number, starts at 0
  uint64_t sendbuf;
  uint64_t recvbuf;
  uint64_t count;      // the submission's count (CollDesc::variableCount), else 0
};

namespace sqe {
inline constexpr int kWords = 8;
inline constexpr uint32_t kFlagBits = 8;
inline constexpr uint32_t kPartBits = 8;
inline constexpr uint32_t kIndexBits = 20;
inline constexpr uint32_t kSeqBits = 48;
inline constexpr uint32_t kCountBits = 44;  // 16 beside flags and parts, 12 beside the index, 16 beside seq
inline constexpr uint64_t kMaxCount = (uint64_t{1} << kCountBits) - 1;
// A collective's submission numbers go over the bus in 48 bits: 2^48 submissions of one collective
// (nine years at one a microsecond) before its saved context (BlockContext::seq) would no longer match.
static_assert(kFlagBits + kPartBits + 16 == 32 && kIndexBits + 12 == 32 && kSeqBits - 32 + 16 == 32 &&
                  16 + 12 + 16 == kCountBits,
              "the pieces below are full and the count's three parts add up");

OCCL_HD inline uint64_t tagOf(uint64_t ticket) { return (ticket + 1) & 0xffffffffu; }

// Ticket `ticket`'s entry as its slot holds it: eight words of (tag << 32 | a 32-bit piece of the
// view). Each word is made whole here, in a register (pieces written apart and read back as
// words stall on store forwarding: 8 ns of a submission on the host).
OCCL_HD inline void words(const SqeView& e, uint64_t ticket, uint64_t (&out)[kWords]) {
  const uint64_t tag = tagOf(ticket) << 32;
  const uint64_t n = e.count & kMaxCount;
  out[0] = tag | (e.flags & 0xffu) | (static_cast<uint32_t>(e.nParts & 0xffu) << 8) | static_cast<uint32_t>(n & 0xffffu) << 16;
  out[1] = tag | (e.collIndex & ((1u << kIndexBits) - 1)) | static_cast<uint32_t>((n >> 16) & 0xfffu) << kIndexBits;
  out[2] = tag | static_cast<uint32_t>(e.seq);
  out[3] = tag | static_cast<uint32_t>((e.seq >> 32) & 0xffffu) | static_cast<uint32_t>(n >> 28) << 16;
  out[4] = tag | static_cast<uint32_t>(e.sendbuf);
  out[5] = tag | static_cast<uint32_t>(e.sendbuf >> 32);
  out[6] = tag | static_cast<uint32_t>(e.recvbuf);
  out[7] = tag | static_cast<uint32_t>(e.recvbuf >> 32);
}

// Ticket `ticket`'s entry if every word of `words` carries its tag; false for a slot that holds
// an older entry or is being written.
OCCL_HD inline bool join(const uint64_t (&words)[kWords], uint64_t ticket, SqeView& out) {
  const uint64_t tag = tagOf(ticket);
  for (int i = 0; i < kWords; ++i)
    if ((words[i] >> 32) != tag) return false;
  auto piece = [&](int i) { return static_cast<uint64_t>(static_cast<uint32_t>(words[i])); };
  out.flags = static_cast<uint16_t>(piece(0) & 0xffu);
  out.nParts = static_cast<uint16_t>((piece(0) >> 8) & 0xffu);
  out.collIndex = static_cast<uint32_t>(piece(1) & ((1u << kIndexBits) - 1));
  out.seq = piece(2) | ((piece(3) & 0xffffu) << 32);
  out.count = (piece(0) >> 16) | ((piece(1) >> kIndexBits) << 16) | ((piece(3) >> 16) << 28);
  out.sendbuf = piece(4) | (piece(5) << 32);
  out.recvbuf = piece(6) | (piece(7) << 32);
  return true;
}
}  // namespace sqe

// One slot: eight words of (tag << 32 | 32 bits of the SqeView), 0 before its first entry.
struct alignas(64) Sqe {
  uint64_t words[8];
};
static_assert(sizeof(Sqe) == 64, "an SQE is one cache line on both sides of the bus");


// Plain handle over memory that the host allocates: pinned host memory on the CUDA backend for
// the SQ itself; daemon memory for a daemon's relay (daemon.hpp), whose producer is block 0.
struct SubmissionQueue {
  Sqe* slots;
  BlockReport* reports;  // [nConsumers]: each block's sqNext, as last reported
  uint64_t* published;    // total entries published, for wakeups and the outstanding count
  uint32_t depth;         // power of two
  uint32_t nConsumers;    // daemon blocks

  OCCL_HD Sqe& slot(uint64_t ticket) const { return slots[ticket & (depth - 1)]; }

  // Producer (the host; on a daemon that fans out, block 0 too, into its relay): every consumer
  // has reported every entry before this ticket copied.
  OCCL_HD uint64_t slowestConsumer() const {
    uint64_t slowest = UINT64_MAX;
    for (uint32_t c = 0; c < nConsumers; ++c) {
      const uint64_t next = atomics::loadAcquire(&reports[c].sqNext);
      slowest = next < slowest ? next : slowest;
    }
    return slowest;
  }
  // Producer: the first ticket that cannot be written yet (its slot still holds an entry some
  // consumer has not reported copied).
  OCCL_HD uint64_t writableLimit() const { return slowestConsumer() + depth; }

  // Producer: true if the entry for `ticket` could be written. `limit` caches writableLimit()
  // between calls (start it at 0). Sets kSqeReport where the protocol above asks for a report.
  OCCL_HD bool tryPush(uint64_t ticket, const SqeView& e, uint64_t& limit) const { return tryPushAll(ticket, &e, 1, limit); }

  // Producer: entries `e[0..n)` for tickets ticket..ticket+n-1, all or none (n <= depth).
  OCCL_HD bool tryPushAll(uint64_t ticket, const SqeView* e, uint32_t n, uint64_t& limit) const {
    if (!hasRoom(ticket, n, limit)) return false;
    writeAll(ticket, e, n, limit);
    return true;
  }

  // The same in two steps, for a producer that prepares its entries once it knows they fit:
  // hasRoom, then writeAll. The last entry is written first and the first last: a consumer, which
  // takes entries in ticket order, finds none of them until every one is in place, so it never
  // polls a line the producer is about to write (a line taken back and forth between two cores,
  // when the daemon runs on another). One limit serves them all, so the report flags fall as for
  // single pushes.
  //
  // Whether tickets ticket..ticket+n-1 may be written now (n <= depth); refreshes `limit` at the
  // limit or half-way to it.
  OCCL_HD bool hasRoom(uint64_t ticket, uint32_t n, uint64_t& limit) const {
    const uint64_t last = ticket + n - 1;
    if (last + depth / 2 >= limit) limit = writableLimit();
    return last < limit;
  }
  // Ticket `ticket`'s entry, below `limit` (hasRoom's), flagged kSqeReport where the protocol asks.
  OCCL_HD void write(uint64_t ticket, SqeView e, uint64_t limit) const {
    if (limit - ticket == 1 || limit - ticket == depth / 2) e.flags |= kSqeReport;
    uint64_t words[sqe::kWords];
    sqe::words(e, ticket, words);
    atomics::storeReleaseWords(slot(ticket).words, words);
  }
  // Entries `e[0..n)` for tickets ticket..ticket+n-1, below `limit` (hasRoom's), then published.
  OCCL_HD void writeAll(uint64_t ticket, const SqeView* e, uint32_t n, uint64_t limit) const {
    for (uint32_t i = n; i-- > 0;) write(ticket + i, e[i], limit);
    atomics::storeRelease(published, ticket + n);
  }

  // Consumer `cursor` (each block keeps its own): copies the entry if it is published. The
  // caller reports `cursor + 1` where the protocol asks (advance(); the daemon's reportCursor).
  // Runs on one lane; the caller broadcasts the result to the block.
  OCCL_HD bool tryPop(uint64_t cursor, SqeView& out) const {
    uint64_t words[sqe::kWords];
    atomics::pollLine(slot(cursor).words, words);
    return sqe::join(words, cursor, out);
  }

  // Consumer: every entry before `next` is copied; their slots may be reused.
  OCCL_HD void advance(uint32_t consumer, uint64_t next) const { atomics::storeRelease(&reports[consumer].sqNext, next); }

  OCCL_HD uint64_t publishedCount() const { return atomics::loadAcquire(published); }
};
static_assert(sizeof(SubmissionQueue) == 32, "SubmissionQueue layout is shared by host and device");

}  // namespace occl
