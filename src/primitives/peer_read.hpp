// Peer access: the data movement of the peer AllReduce (ir_loader/ring.hpp, makePeerAllReduce),
// for ranks that share an address space (thread-ranks of one process on the host backend). Rank r
// owns slice r: it folds slice r of every rank's input where the inputs are, one tile at a time,
// and writes each folded tile into every rank's output while it is still in cache. Per rank that
// reads the count once and writes it once, whatever the rank count, against 5 passes through
// slots for the ring on 4 ranks, and it takes two notices per peer per submission instead
// of a hand-off per tile (occl-micro BM_PeerPushAllReduce bounds it on a machine).
//
// Between processes (CollDesc::peerShared: "shm" peers, buffers from occlMemAlloc) a notice also
// carries where its buffers are for other processes (memory/shared_buffers.hpp); the receiver
// maps them and writes its own addresses into the notice once (acceptPeerNotices), so every tile
// reads the notice as between threads. A process that dies leaves its peers' mappings valid.
//
// The connectors carry notices. Every notice holds the poster's buffers for the submission, and
// a program posts exactly kPeerNotices (device/step.hpp) to each peer per submission:
//   1. "here are my buffers"   the receiver may read the poster's input and write the
//                              receiver's slice of the poster's output from now on;
//   2. "I am done with yours"  the poster has written its slice into the receiver's output
//                              and will not touch the receiver's buffers again.
// A receiver leaves the notices in their slots (FifoHandle::pending counts them) and consumes
// both at once at the end (PeerRelease), so the first one, with the addresses, stays readable
// across preemptions without a copy in the saved context. Nobody completes a submission before
// every peer's second notice, so no buffer is handed back to the user while a peer uses it.
//
// A failure completes only after the peers using this rank's buffers have left (the access guard
// in fifo.hpp, drained by failCollective in daemon.hpp), so a failed submission's buffers are
// free too. Connectors need kPeerNotices slots: the second notice is posted before the receiver
// consumes the first.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/coll_desc.hpp"
#include "primitives/primitives.hpp"
#include "primitives/stream_copy.hpp"
#include "memory/shared_buffers.hpp"
#include "queues/fifo.hpp"
#include "util/log.hpp"

namespace occl {

inline constexpr uint32_t kPeerNoticeBuffers = 1;  // the notice that carries the addresses

// The poster's buffers. Between processes each address is the poster's until the receiver
// accepts the notice, which is when the reference's inode becomes 0.
struct PeerNotice {
  char* input;
  char* output;
  memory::SharedRef inputRef;
  memory::SharedRef outputRef;
};
// A peer program's connectors hold notices, so their slots are a cache line, whatever
// config.connectorSlotBytes says (which still sizes the fold's tiles: CollDesc::tileElems).
inline constexpr uint64_t kPeerSlotBytes = 64;
static_assert(sizeof(PeerNotice) <= kPeerSlotBytes, "a notice fits a peer program's slot");

OCCL_HD inline bool isPeerOp(StepOp op) {
  return op == StepOp::PeerPost || op == StepOp::PeerReduce || op == StepOp::PeerRelease || op == StepOp::PeerOffer ||
         op == StepOp::PeerTake;
}

// The peer AllToAll (makePeerAllToAll): its first notice to each peer is not the poster's buffers
// but the one chunk of its input the peer takes (PeerOffer), which the peer copies straight into
// its own output (PeerTake): each byte moves once, by its receiver, where the direct AllToAll
// copies it into a slot and out again. The second notice and the release are the peer
// AllReduce's. Between processes (desc.sharedBuffers) the offer also carries the chunk's
// reference, which the taker resolves for the copy and unpins after it.
struct PeerChunk {
  const char* data;
  uint64_t elems;
  memory::SharedRef ref;
};
static_assert(sizeof(PeerChunk) <= kPeerSlotBytes, "an offer fits a peer program's slot");

// Leader only, once the send slot is free; `stamp` as FifoHandle::commitSend's. False, having
// offered nothing, when the chunk is no longer occlMemAlloc memory between processes (freed since
// occlSubmit checked it): the caller fails the collective.
OCCL_HD inline bool offerPeerChunk(const CollDesc& d, const FifoHandle& send, const char* data, uint64_t elems,
                                   uint64_t stamp) {
  PeerChunk chunk{elems > 0 ? data : nullptr, elems, {0, 0, 0, -1}};
#if !OCCL_ON_DEVICE
  if (d.peerShared && elems > 0) {
    chunk.ref = memory::describe(data, static_cast<size_t>(elems * d.elemBytes));
    if (chunk.ref.inode == 0) {
      logWarning("peer AllToAll of collId " + std::to_string(d.collId) +
                 ": a buffer is no longer memory from occlMemAlloc (freed before the submission completed?)");
      return false;
    }
  }
#else
  (void)d;
#endif
  memcpy(send.sendSlot(), &chunk, sizeof chunk);
  send.commitSend(sizeof chunk, stamp);
  return true;
}

enum class TakeResult : uint8_t { Done, Poisoned, Unmapped };

// Leader only, with the peer's offer there: copies it into `to` (the receiver's chunk, whose
// length the caller has checked against the offer's) under the peer's access guard. Poisoned:
// the peer is failing (its buffer may be going away); Unmapped: between processes, the offered
// chunk could not be mapped (logged). Either way nothing was copied.
OCCL_HD inline TakeResult takePeerChunk(const CollDesc& d, const FifoHandle& recv, char* to, uint64_t bytes) {
  if (!recv.beginPeerAccess()) return TakeResult::Poisoned;
  PeerChunk chunk;
  memcpy(&chunk, recv.recvSlot(), sizeof chunk);
  TakeResult result = TakeResult::Done;
  if (bytes > 0) {
    const char* from = chunk.data;
#if !OCCL_ON_DEVICE
    Result<char*> mapped = d.peerShared ? memory::resolve(chunk.ref, static_cast<size_t>(bytes)) : Result<char*>(static_cast<char*>(nullptr));
    if (!mapped.ok()) {
      logWarning("peer AllToAll of collId " + std::to_string(d.collId) + ": " + mapped.status().message);
      result = TakeResult::Unmapped;
    } else if (d.peerShared) {
      from = mapped.value();
    }
#else
    (void)d;
#endif
    if (result == TakeResult::Done) memcpy(to, from, static_cast<size_t>(bytes));
#if !OCCL_ON_DEVICE
    if (result == TakeResult::Done && d.peerShared) memory::unpin(from);
#endif
  }
  recv.endPeerAccess();
  return result;
}

// Bytes of each of a submission's buffers (an AllReduce's input and output are the same size).
OCCL_HD inline size_t peerBufferBytes(const CollDesc& d, const ChunkGeometry& g) {
  return static_cast<size_t>(g.totalElems * d.elemBytes);
}

// Leader only, once the send slot is free; `stamp` as FifoHandle::commitSend's. False, having
// posted nothing, when a buffer is no longer occlMemAlloc memory (freed since occlSubmit checked
// it): the caller fails the collective. Between processes, a submission of no elements (a variable
// count of 0) posts no buffers: there is nothing to map, nor to release.
OCCL_HD inline bool postPeerNotice(const CollDesc& d, const ChunkGeometry& g, const FifoHandle& send,
                                   const TaskBuffers& bufs, uint64_t stamp) {
  PeerNotice notice{bufs.input, bufs.output, {0, 0, 0, -1}, {0, 0, 0, -1}};
#if !OCCL_ON_DEVICE
  const size_t bytes = d.peerShared ? peerBufferBytes(d, g) : 0;
  if (d.peerShared && bytes == 0) notice.input = notice.output = nullptr;
  if (bytes > 0) {
    notice.inputRef = memory::describe(bufs.input, bytes);
    notice.outputRef = memory::describe(bufs.output, bytes);
    if (notice.inputRef.inode == 0 || notice.outputRef.inode == 0) {
      logWarning("peer AllReduce of collId " + std::to_string(d.collId) +
                 ": a buffer is no longer memory from occlMemAlloc (freed before the submission completed?)");
      return false;
    }
  }
#else
  (void)d;
  (void)g;
#endif
  memcpy(send.sendSlot(), &notice, sizeof notice);
  send.commitSend(sizeof notice, stamp);
  return true;
}

// The first notice of the current submission, once it is there.
OCCL_HD inline PeerNotice peerNotice(const FifoHandle& recv) {
  PeerNotice notice;
  memcpy(&notice, recv.recvSlot(), sizeof notice);
  return notice;
}

// Leader only, with every peer's first notice there: makes each notice's addresses this
// process's (peer_read.hpp's head), pinning the mappings until releasePeerNotice. Returns false,
// having logged why, when a peer's buffer cannot be mapped; the caller fails the collective.
OCCL_HD inline bool acceptPeerNotices(const CollDesc& d, const ChunkGeometry& g, const BlockPlan& plan) {
#if !OCCL_ON_DEVICE
  const size_t bytes = peerBufferBytes(d, g);
  if (!d.peerShared || bytes == 0) return true;
  for (uint32_t i = 0; i < plan.nRecvs; ++i) {
    PeerNotice notice = peerNotice(plan.recvs[i]);
    if (notice.inputRef.inode == 0) continue;  // accepted on an earlier try
    Result<char*> input = memory::resolve(notice.inputRef, bytes);
    Result<char*> output = input.ok() ? memory::resolve(notice.outputRef, bytes) : input;
    if (!output.ok()) {
      if (input.ok()) memory::unpin(input.value());
      logWarning("peer AllReduce of collId " + std::to_string(d.collId) + ": " + output.status().message);
      return false;  // the notices accepted before this one are unpinned as the collective fails
    }
    notice.input = input.value();
    notice.output = output.value();
    notice.inputRef.inode = 0;
    notice.outputRef.inode = 0;
    // The slot is this receiver's until it releases the notice (PeerRelease): the one place a
    // receiver writes into a slot.
    memcpy(const_cast<char*>(plan.recvs[i].recvSlot()), &notice, sizeof notice);
  }
#else
  (void)d;
  (void)g;
  (void)plan;
#endif
  return true;
}

// Leader only, before the receiver lets go of `recv`'s notices (PeerRelease): unpins what
// acceptPeerNotices resolved.
OCCL_HD inline void releasePeerNotice(const CollDesc& d, const FifoHandle& recv) {
#if !OCCL_ON_DEVICE
  // The peer AllToAll's notices hold nothing pinned: its taker unpins as it copies.
  if (!d.peerShared || d.collType == occlCollAllToAll) return;
  const PeerNotice notice = peerNotice(recv);
  // Never accepted, released, or a notice of no buffers (postPeerNotice).
  if (notice.inputRef.inode != 0 || notice.input == nullptr) return;
  memory::unpin(notice.input);
  memory::unpin(notice.output);
#else
  (void)d;
  (void)recv;
#endif
}

// Leader only, as a peerShared collective fails (failCollective): unpins the notices this rank
// accepted and will now never release, since PeerRelease does not run. A slot still pending
// with an accepted notice holds the current submission's (its sender writes no slot before this
// receiver frees it); the unpinned notice is marked released there, so a second failure path
// cannot unpin it again.
OCCL_HD inline void releasePeerNoticesOnFailure(const CollDesc& d, const BlockPlan& plan) {
#if !OCCL_ON_DEVICE
  if (d.collType == occlCollAllToAll) return;  // nothing pinned (releasePeerNotice)
  for (uint32_t i = 0; i < plan.nRecvs; ++i) {
    const FifoHandle& recv = plan.recvs[i];
    if (recv.pending() == 0) continue;
    releasePeerNotice(d, recv);
    PeerNotice released = peerNotice(recv);
    if (released.inputRef.inode != 0) continue;
    released.input = nullptr;
    released.output = nullptr;
    memcpy(const_cast<char*>(recv.recvSlot()), &released, sizeof released);
  }
#else
  (void)d;
  (void)plan;
#endif
}

// Out of place, a fold writes its tiles into the peers' outputs with streaming stores
// (primitives/stream_copy.hpp) where every rank's input and output together, 2 x nRanks x the
// buffer, fill the last-level cache (util/cache_size.hpp): the output lines are then cold and stay
// so until the user reads them, and memcpy would read each one before writing it. Smaller buffers
// stay in the cache, where memcpy is faster. In place, a peer's output slice is the input slice the
// fold has just read, in cache: memcpy always. Registration decides (CollDesc::peerStream).
// occl-micro BM_PeerPushAllReduce, 4 thread-ranks, streaming against memcpy: on the 2-vCPU AMD
// EPYC VM (32 MiB L3; bench/results/host-2026-11-27e.md) 1.63x and 1.34x the time at 1 and 2 MiB
// a buffer, 0.87x at 4 MiB (32 MiB in all), 0.73-0.84x at 8-64 MiB; on the Intel Xeon VM of
// bench/results/host-2026-11-27b.md (L3 not recorded) 1.15x and 1.10x at 4 and 8 MiB, 0.91x
// from 16 MiB. Where sysfs describes no cache, the outputs alone must reach 64 MiB, that Xeon's
// threshold.
inline constexpr uint64_t kPeerStreamFallbackOutputBytes = uint64_t{64} << 20;

// Whether the fold's copies into the peers' outputs stream, out of place, for `nRanks` buffers
// of `bufferBytes` on a machine whose last-level cache holds `cacheBytes` (0: unknown).
inline bool peerCopiesStream(uint32_t nRanks, uint64_t bufferBytes, uint64_t cacheBytes) {
  if (nRanks == 0) return false;
  // nRanks x bufferBytes >= need, without the product (which could overflow).
  const uint64_t need = cacheBytes == 0 ? kPeerStreamFallbackOutputBytes : cacheBytes / 2 + cacheBytes % 2;
  return bufferBytes >= need / nRanks + (need % nRanks != 0 ? 1 : 0);
}

// One folded tile into a peer's output.
OCCL_HD inline void copyToPeer(char* to, const char* from, size_t bytes, bool stream) {
#if !OCCL_ON_DEVICE
  if (stream) {
    streamCopy(to, from, bytes);  // fenced: the notice that follows the fold is seen after it
    return;
  }
#else
  (void)stream;
#endif
  memcpy(to, from, bytes);
}

// Tiles of the fold of `step` (PeerReduce) on this rank: the executor runs them as the step's
// sub-steps, one primitive each, so a long fold gives way between tiles like the ring does.
OCCL_HD inline uint32_t peerFoldTiles(const ChunkGeometry& g, const DeviceStep& step) {
  const uint64_t len = chunkLength(g, step.srcBuf, static_cast<uint64_t>(step.srcOff));
  return len == 0 ? 1u : static_cast<uint32_t>((len + g.tileElems - 1) / g.tileElems);
}

// Tile `tile` of slice `step.srcOff` of every rank's input, folded in the order own, recvs[0],
// recvs[1], ..., into the same slice of this rank's output (`step.dstOff`, the same chunk), then
// copied from there into every peer's output while in cache (large outputs out of place with
// streaming stores: peerCopiesStream). Holds every peer's access guard
// (fifo.hpp); returns false, having touched nothing, when one is poisoned. In place is safe:
// slice r of any buffer is read and written by r's owner alone, and a tile is read before it is
// written.
OCCL_HD inline bool peerReduceTile(const CollDesc& d, const ChunkGeometry& g, const BlockPlan& plan,
                                   const DeviceStep& step, const TaskBuffers& bufs, uint32_t tile) {
  const uint64_t eb = d.elemBytes;
  const uint64_t len = chunkLength(g, step.srcBuf, static_cast<uint64_t>(step.srcOff));
  const uint64_t first = static_cast<uint64_t>(tile) * g.tileElems;
  const uint64_t n = len <= first ? 0 : (len - first < g.tileElems ? len - first : g.tileElems);
  const uint64_t at = (chunkStart(g, step.srcBuf, static_cast<uint64_t>(step.srcOff)) + first) * eb;
  uint32_t held = 0;
  for (; held < plan.nRecvs; ++held)
    if (!plan.recvs[held].beginPeerAccess()) break;
  const bool ok = held == plan.nRecvs;
  if (ok && n > 0) {
    const bool postOp = (step.flags & kStepPostOp) != 0 && d.redOp == occlAvg;
    const char* own = bufs.get(step.srcBuf) + at;
    char* dst = bufs.get(step.dstBuf) + at;
    for (uint32_t i = 0; i < plan.nRecvs; ++i) {
      const uint64_t post = postOp && i + 1 == plan.nRecvs ? d.nRanks : 0u;
      const void* a = i == 0 ? static_cast<const void*>(own) : dst;
      const char* peer = peerNotice(plan.recvs[i]).input + at;
      dispatchTypeOp(d.dtype, d.redOp, ReduceCopyCall{a, peer, dst, nullptr, static_cast<size_t>(n), post});
    }
    const bool stream = d.peerStream != 0;
    for (uint32_t i = 0; i < plan.nRecvs; ++i) {
      const PeerNotice notice = peerNotice(plan.recvs[i]);
      copyToPeer(notice.output + at, dst, static_cast<size_t>(n * eb), stream && notice.output != notice.input);
    }
  }
  for (uint32_t i = 0; i < held; ++i) plan.recvs[i].endPeerAccess();
  return ok;
}

}  // namespace occl
