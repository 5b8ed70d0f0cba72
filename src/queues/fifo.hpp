// A connector: a FIFO of `nSlots` slots of `slotBytes` between one sending and one receiving
// daemon block (NCCL's Simple protocol). The sender waits for `tail - head < nSlots`, fills slot
// `tail % nSlots` and publishes `tail + 1`; the receiver waits for `head < tail`, reads slot
// `head % nSlots` and publishes `head + 1`. Both counters live in the connector memory, not in
// the collective's context, so a preempted collective's committed slots stay visible to its peer.
//
// Before it publishes a slot, the sender stores how many bytes of it it filled in the slot's
// length word (a table after the slots), so a transport that copies slots between hosts (the NET
// proxy) ships those bytes, not the whole slot: an 8-byte AllReduce moves 8 bytes a hop, not a
// tile. The receiver needs no length: its step knows how many elements it reads.
//
// A collective whose count varies per submission (CollDesc::variableCount) also stamps each slot
// with the sender's count (+ 1; 0 = unstamped) in the slot's stamp word, a table after the lengths,
// which the receiver compares with its own before it reads the slot (executor.hpp): ranks that
// submitted different counts fail the submission instead of reading each other's chunks wrongly.
//
// A message of at most kFifoLineBytes (host only) also goes into the slot's line, a cache line
// after the length table that holds its bytes and a flag, the step + 1 that wrote them (NCCL's LL
// protocol has data and flag share a store; here they share a line). The receiver looks at the
// line of `head` first: where the flag is head + 1, the bytes are there, and one cache line crossed
// between the cores instead of three (tail, then the slot, whose address depends on it). A flag
// from an earlier round through the slots is at most head, and a line nobody wrote (a NET
// receiver's, whose proxy fills the slots only) is 0, so the receiver then goes by tail and the
// slot as before. The sender still publishes tail after the line: sleepers, the NET proxy and
// pending() count by it.
//
// On the host a side that finds nothing to do may sleep until the word it waits for moves
// (queues/fifo_wait.hpp): the side that publishes tail or head then wakes it. Each of the two
// words has a wake word beside it saying who sleeps on it: daemon threads parked on the word's
// epoch (a futex; counted from bit 1 up), or the NET proxy (kFifoWakeBell: it sleeps on the
// eventfd in `bellFd`, which lives in the proxy's process, as NET FIFOs do). A waker bumps the
// epoch before the futex wake, so a wake that comes before the sleeper's futex wait is not lost:
// the wait then finds the epoch moved. (The futex used to be the word itself, and a poison, which
// leaves the word as it is, could wake nobody in that gap.) A publisher reads the wake word after
// a fence (queues/wake_fence.hpp: where membarrier works, a compiler barrier, the sleeper paying
// for both sides), so it costs a system call only when somebody sleeps. Device code never sleeps
// and never wakes: a proxy serving a GPU polls.
//
// The header also carries the registration handshake: each side writes the signature of its
// registration; a side that sees a different one from its peer poisons the connector, and a
// poisoned connector fails every submission from the one it names on (poisonSeq; 0 for a
// registration), on every rank it reaches.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device/compat.hpp"
#if !OCCL_ON_DEVICE
#include "queues/wake_fence.hpp"
#endif

namespace occl {

struct alignas(64) FifoHeader {
  alignas(64) uint64_t tail;  // written by the sender only
  uint32_t tailWake;          // who sleeps until tail moves (host only; see above)
  uint32_t tailEpoch;         // their futex: bumped by each wake
  alignas(64) uint64_t head;  // written by the receiver only
  uint32_t headWake;          // who sleeps until head moves
  uint32_t headEpoch;
  alignas(64) uint64_t senderSig;    // 0 until the sender has registered
  uint64_t receiverSig;              // 0 until the receiver has registered
  uint64_t geometry;                 // nSlots << 40 | slotBytes, set once by whoever maps first
  uint32_t poison;                   // 0, or the occlResult_t every user of this connector fails with
  uint32_t attached;                 // sides that have mapped the memory
  int32_t bellFd;                    // NET: the proxy's eventfd, read only under kFifoWakeBell
  uint32_t peerUsers;                // peer access: receivers using the sender's buffers now
  // The ends' ranks + 1 (0 = not named), where their communicator has a yield board (host only:
  // queues/yield_board.hpp): whose word a wait on this FIFO reads. Both ends write both.
  uint32_t senderRank;
  uint32_t receiverRank;
  // The first submission the poison fails (written before it): a peer that failed submission k
  // after finishing the ones before it fails k and every later one here, not an earlier one that
  // a slower rank is still finishing (BlockExecutor's look after its last step). 0: every one.
  uint64_t poisonSeq;
  uint64_t pad;
};
static_assert(sizeof(FifoHeader) == 192, "FifoHeader layout is shared by host and device");

// Wake word bits: the NET proxy sleeps on bellFd; each parked daemon thread adds kFifoWakeParked.
inline constexpr uint32_t kFifoWakeBell = 1;
inline constexpr uint32_t kFifoWakeParked = 2;

// Which of a FIFO's two words a sleeper waits on, the word itself, and the wake word and epoch
// beside it.
enum class FifoWord { Tail, Head };
OCCL_HD inline uint64_t* fifoCount(FifoHeader* h, FifoWord w) { return w == FifoWord::Tail ? &h->tail : &h->head; }
OCCL_HD inline uint32_t* fifoWake(FifoHeader* h, FifoWord w) {
  return w == FifoWord::Tail ? &h->tailWake : &h->headWake;
}
OCCL_HD inline uint32_t* fifoEpoch(FifoHeader* h, FifoWord w) {
  return w == FifoWord::Tail ? &h->tailEpoch : &h->headEpoch;
}

#if !OCCL_ON_DEVICE
// Wakes whoever `wake` says sleeps on the word whose epoch is `epoch` (fifo_wait.cpp).
void fifoWakeSleepers(uint32_t* epoch, uint32_t wake, int32_t bellFd);
#endif

// After a store of `which` (or of the poison): wakes its sleepers, if any.
OCCL_HD inline void fifoPublished([[maybe_unused]] FifoHeader* h, [[maybe_unused]] FifoWord which) {
#if !OCCL_ON_DEVICE
  // Pairs with the sleeper's fence between announcing itself and re-reading the word: either it
  // sees the new value, or this load sees it announced (queues/wake_fence.hpp).
  publisherFence();
  if (const uint32_t w = atomics::loadRelaxed(fifoWake(h, which)))
    fifoWakeSleepers(fifoEpoch(h, which), w, atomics::loadRelaxed(&h->bellFd));
#endif
}

#if !OCCL_ON_DEVICE
// The host's poison of a connector it reaches by its header alone (ConnectorMemory::poison, the
// NET proxy): sets `status` unless the connector is poisoned already (the first status stays),
// and wakes the sleepers on either word as FifoHandle::poisonWith does, or a daemon parked on the
// FIFO would see the failure only at the end of its sleep. Returns whether this call set it.
// `fromSeq`: the first submission it fails (FifoHeader::poisonSeq); two poisoners at once may
// leave either's.
inline bool poisonHeader(FifoHeader* h, uint32_t status, uint64_t fromSeq) {
  if (atomics::loadAcquire(&h->poison) != 0) return false;
  atomics::storeRelaxed(&h->poisonSeq, fromSeq);
  uint32_t expected = 0;
  if (!atomics::compareExchange(&h->poison, expected, status)) return false;
  fifoPublished(h, FifoWord::Tail);
  fifoPublished(h, FifoWord::Head);
  return true;
}
#endif

inline constexpr size_t kFifoDataOffset = 256;  // slot data starts here, 256-byte aligned

OCCL_HD inline constexpr uint64_t fifoGeometry(uint32_t nSlots, uint64_t slotBytes) {
  return (static_cast<uint64_t>(nSlots) << 40) | slotBytes;
}
// From the start of the slot data to the length table (8-byte aligned), and to the stamp table
// after it.
OCCL_HD inline constexpr size_t fifoLengthsOffset(uint32_t nSlots, uint64_t slotBytes) {
  return (static_cast<size_t>(nSlots) * slotBytes + 7) / 8 * 8;
}
OCCL_HD inline constexpr size_t fifoStampsOffset(uint32_t nSlots, uint64_t slotBytes) {
  return fifoLengthsOffset(nSlots, slotBytes) + static_cast<size_t>(nSlots) * sizeof(uint64_t);
}
// A slot's line (see the top of the file): a tiny message's bytes and the step that wrote them.
inline constexpr uint64_t kFifoLineBytes = 56;
// Lines must be zero whenever tail and head start at 0: a transport whose memory may hold old
// bytes clears them (the NET proxy's makeConn). The bytes come first, at the line's start, so a
// reduction reads them as aligned as a slot's.
struct FifoLine {  // at a 64-byte boundary in connector memory (fifoLinesOffset)
  char bytes[kFifoLineBytes];
  uint64_t flag;  // step + 1 of the message in `bytes`; 0 = never written
};
static_assert(sizeof(FifoLine) == 64, "a FifoLine fills one cache line");
// From the start of the slot data to the lines (64-byte aligned), which follow the stamp table.
OCCL_HD inline constexpr size_t fifoLinesOffset(uint32_t nSlots, uint64_t slotBytes) {
  return (fifoStampsOffset(nSlots, slotBytes) + static_cast<size_t>(nSlots) * sizeof(uint64_t) + 63) / 64 * 64;
}
OCCL_HD inline constexpr size_t fifoBytes(uint32_t nSlots, uint64_t slotBytes) {
  return kFifoDataOffset + fifoLinesOffset(nSlots, slotBytes) + static_cast<size_t>(nSlots) * sizeof(FifoLine);
}

// Plain handle: a view of connector memory as mapped in this process (or device).
//
// On the host the sender's handle remembers how many slots it last found free (`credits`), so
// that a send reads head, a line the receiver writes, only once that many sends have used them:
// the receiver only ever frees more. So a sender connector has one handle that sends (its block
// plan's, used by one thread at a time): two live copies would each spend the same credits and
// send into slots the receiver has not freed. A handle built with credits 0 reads head at once.
struct FifoHandle {
  FifoHeader* header;  // nullptr = no connector
  char* data;
  uint32_t nSlots;
  mutable uint32_t credits;  // host, sender: slots known free, less those committed since
  uint64_t slotBytes;

  OCCL_HD bool valid() const { return header != nullptr; }

  // Sender side.
  OCCL_HD bool canSend() const {
#if !OCCL_ON_DEVICE
    if (credits != 0) return true;
#endif
    const uint64_t used = atomics::loadRelaxed(&header->tail) - atomics::loadAcquire(&header->head);
#if !OCCL_ON_DEVICE
    credits = used < nSlots ? static_cast<uint32_t>(nSlots - used) : 0u;
#endif
    return used < nSlots;
  }
  OCCL_HD char* sendSlot() const { return slot(atomics::loadRelaxed(&header->tail)); }
  // Publishes the slot sendSlot() returned, of which the first `bytes` (<= slotBytes) are filled
  // (and copied into the slot's line when they fit: host only, where the receiver looks there),
  // stamped with `stamp` where it is not 0 (countStamp; before the line, whose flag the receiver
  // may acquire instead of tail).
  OCCL_HD void commitSend(uint64_t bytes, uint64_t stamp = 0) const {
    const uint64_t t = atomics::loadRelaxed(&header->tail);
    if (stamp != 0) atomics::storeRelaxed(slotStamp(t), stamp);
#if !OCCL_ON_DEVICE
    if (credits != 0) --credits;
    if (bytes <= kFifoLineBytes) {
      FifoLine* l = line(t);
      memcpy(l->bytes, slot(t), bytes);
      atomics::storeRelease(&l->flag, t + 1);
    }
#endif
    atomics::storeRelaxed(slotLength(t), bytes);
    atomics::storeRelease(&header->tail, t + 1);
    fifoPublished(header, FifoWord::Tail);
  }
  // The length word of the slot that holds step `step` (written before that step is published).
  OCCL_HD uint64_t* slotLength(uint64_t step) const {
    return reinterpret_cast<uint64_t*>(data + fifoLengthsOffset(nSlots, slotBytes)) + slotIndex(step);
  }

  // The stamp word of the slot that holds step `step` (see the top of the file).
  OCCL_HD uint64_t* slotStamp(uint64_t step) const {
    return reinterpret_cast<uint64_t*>(data + fifoStampsOffset(nSlots, slotBytes)) + slotIndex(step);
  }

  // The slot, and the slot's line, that hold step `step`.
  OCCL_HD char* slot(uint64_t step) const { return data + slotIndex(step) * slotBytes; }
  OCCL_HD FifoLine* line(uint64_t step) const {
    return reinterpret_cast<FifoLine*>(data + fifoLinesOffset(nSlots, slotBytes)) + slotIndex(step);
  }
  // step % nSlots, as a mask where nSlots is a power of two (the default 4, a peer program's 2).
  // A message's send and receive take it 3-5 times; on sm_90 the 64-bit division makes a lookup
  // 120 instructions against the mask's 24 (on the host it costs about a nanosecond a message).
  OCCL_HD uint64_t slotIndex(uint64_t step) const {
    return (nSlots & (nSlots - 1)) == 0 ? step & (nSlots - 1) : step % nSlots;
  }
  // Whether step `step`'s message is in its line (host only; acquires its bytes).
  OCCL_HD bool inLine([[maybe_unused]] uint64_t step) const {
#if OCCL_ON_DEVICE
    return false;
#else
    return atomics::loadAcquire(&line(step)->flag) == step + 1;
#endif
  }

  // Receiver side.
  OCCL_HD bool canRecv() const {
    const uint64_t h = atomics::loadRelaxed(&header->head);
    return inLine(h) || atomics::loadAcquire(&header->tail) > h;
  }
  // Where the message at head is: its line when the line holds it, else its slot.
  OCCL_HD const char* recvSlot() const {
    const uint64_t h = atomics::loadRelaxed(&header->head);
    return inLine(h) ? line(h)->bytes : slot(h);
  }
  // The stamp of the message at head (once canRecv()): the sender's countStamp, 0 if none.
  OCCL_HD uint64_t recvStamp() const { return atomics::loadRelaxed(slotStamp(atomics::loadRelaxed(&header->head))); }
  OCCL_HD void commitRecv() const {
    atomics::storeRelease(&header->head, atomics::loadRelaxed(&header->head) + 1);
    fifoPublished(header, FifoWord::Head);
  }

  // Slots published and not yet consumed: the notices of a peer program (peer_read.hpp), which
  // leaves its notices in place until the submission ends. Exact only where messages do not
  // travel in lines (notices are a line's size and more): a receiver may take a line and move
  // head before the sender's tail lands, and for that moment tail - head wraps.
  OCCL_HD uint64_t pending() const {
    return atomics::loadAcquire(&header->tail) - atomics::loadRelaxed(&header->head);
  }

  // Peer access: the receiver reads and writes the sender's buffers, whose addresses the sender
  // posted here. A sender whose collective fails poisons the connector and then waits until no
  // receiver uses them (peerUsersGone) before the failure completes and the user may free the
  // buffers; a receiver announces itself before it looks at the poison, so it either sees the
  // poison and touches nothing, or is waited for. Both sides order announcement and check with a
  // full fence.
  OCCL_HD bool beginPeerAccess() const {
    atomics::fetchAdd(&header->peerUsers, 1u);
    atomics::fence<atomics::FenceOrder::SeqCst>();
    if (poisonStatus() == 0) return true;
    endPeerAccess();
    return false;
  }
  OCCL_HD void endPeerAccess() const { atomics::fetchAdd(&header->peerUsers, ~0u); }  // - 1
  OCCL_HD bool peerUsersGone() const {
    atomics::fence<atomics::FenceOrder::SeqCst>();
    return atomics::loadAcquire(&header->peerUsers) == 0;
  }

  // A registration handshake mismatch: the peer registered this connector with another signature.
  OCCL_HD bool peerSignatureDiffers(uint64_t own, bool peerIsReceiver) const {
    uint64_t peer = atomics::loadAcquire(peerIsReceiver ? &header->receiverSig : &header->senderSig);
    return peer != 0 && peer != own;
  }

  OCCL_HD uint32_t poisonStatus() const { return atomics::loadAcquire(&header->poison); }
  // Whether a poison (poisonStatus() != 0, read before this) fails submission `seq`.
  OCCL_HD bool poisonFails(uint64_t seq) const { return atomics::loadRelaxed(&header->poisonSeq) <= seq; }
  // A load and a store, no read-modify-write: the FIFO may be a peer GPU's memory or pinned host
  // memory, where a device RMW needs native atomics across the bus (cudaDevP2PAttrNativeAtomic-
  // Supported, hostNativeAtomicSupported), which PCIe lacks (defect D5). Writers that race may
  // leave either status; each is a failure, and each rank reports its own cause first.
  // Sleepers on either word wake to see it. `fromSeq`: the submission that failed
  // (FifoHeader::poisonSeq).
  OCCL_HD void poisonWith(uint32_t status, uint64_t fromSeq) const {
    if (atomics::loadAcquire(&header->poison) != 0) return;
    atomics::storeRelaxed(&header->poisonSeq, fromSeq);
    atomics::storeRelease(&header->poison, status);
    fifoPublished(header, FifoWord::Tail);
    fifoPublished(header, FifoWord::Head);
  }
};
static_assert(sizeof(FifoHandle) == 32, "FifoHandle layout is shared by host and device");

// A slot's stamp for a sender whose count is `count` (0 means unstamped).
OCCL_HD inline uint64_t countStamp(uint64_t count) { return count + 1; }

}  // namespace occl
