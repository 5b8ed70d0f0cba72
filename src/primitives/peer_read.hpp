// Peer reads: the data movement of the peer AllReduce (ir_loader/ring.hpp, makePeerAllReduce),
// for ranks that share an address space (thread-ranks of one process on the host backend). A rank
// reads its peers' buffers where they are instead of receiving copies through connector slots:
// per rank 2.75 passes over the data on 4 ranks against the ring's 5, and three notices per peer
// per submission instead of a handshake per tile (occl-micro BM_PeerReadAllReduce bounds it).
//
// The connectors carry notices. Every notice holds the poster's buffers for the submission, and
// a program posts exactly kPeerNotices to each peer per submission, in this order:
//   1. "here are my buffers"       the receiver may read the poster's input from now on;
//   2. "my slice is final"         ... and the poster's own slice of its output;
//   3. "I am done reading yours"   the receiver's buffers are the receiver's again.
// (kPeerNotices, device/step.hpp.) A receiver leaves the notices in their slots
// (FifoHandle::pending counts them) and consumes all three at once at the end (PeerRelease), so the first one, with the addresses, stays
// readable across preemptions without a copy in the saved context. Nobody completes a
// submission before every peer's third notice, so no buffer is given back while read.
//
// A failure completes only after the readers of this rank's buffers have left (the reader guard
// in fifo.hpp, drained by failCollective in daemon.hpp), so a failed submission's buffers are
// free too. Connectors need kPeerNotices slots: the third notice is posted before the receiver
// consumes the first.
#pragma once

#include <cstdint>
#include <cstring>

#include "device/coll_desc.hpp"
#include "primitives/primitives.hpp"
#include "queues/fifo.hpp"

namespace occl {

inline constexpr uint32_t kPeerNoticeBuffers = 1;  // the notice that carries the addresses
inline constexpr uint32_t kPeerNoticeSliceFinal = 2;

struct PeerNotice {
  char* input;
  char* output;
};
// A peer-read program's connectors hold notices, so their slots are a cache line, whatever
// config.connectorSlotBytes says (which still sizes the fold's tiles: CollDesc::tileElems).
inline constexpr uint64_t kPeerSlotBytes = 64;
static_assert(sizeof(PeerNotice) <= kPeerSlotBytes, "a notice fits a peer-read slot");

OCCL_HD inline bool isPeerOp(StepOp op) {
  return op == StepOp::PeerPost || op == StepOp::PeerReduce || op == StepOp::PeerCopy || op == StepOp::PeerRelease;
}

// Leader only, once the send slot is free.
OCCL_HD inline void postPeerNotice(const FifoHandle& send, const TaskBuffers& bufs) {
  const PeerNotice notice{bufs.input, bufs.output};
  memcpy(send.sendSlot(), &notice, sizeof notice);
  send.commitSend(sizeof notice);
}

// The first notice of the current submission, once it is there.
OCCL_HD inline PeerNotice peerNotice(const FifoHandle& recv) {
  PeerNotice notice;
  memcpy(&notice, recv.recvSlot(), sizeof notice);
  return notice;
}

// Output chunk `dstChunk` = op over this rank's and every peer's input chunk `srcChunk`, folded
// in the order own, recvs[0], recvs[1], ... tile by tile, so the partial result stays in cache
// while the next input is added. Every peer's guard is held (fifo.hpp); returns false, having
// read nothing, when one is poisoned.
OCCL_HD inline bool peerReduce(const CollDesc& d, const ProgramForm& f, const BlockPlan& plan, const DeviceStep& step,
                               const TaskBuffers& bufs) {
  const uint64_t len = chunkLength(d, f, static_cast<uint64_t>(step.srcOff));
  const uint64_t eb = d.elemBytes;
  const char* own = bufs.get(step.srcBuf) + chunkStart(d, f, static_cast<uint64_t>(step.srcOff)) * eb;
  char* dst = bufs.get(step.dstBuf) + chunkStart(d, f, static_cast<uint64_t>(step.dstOff)) * eb;
  const uint64_t srcAt = chunkStart(d, f, static_cast<uint64_t>(step.srcOff)) * eb;
  uint32_t held = 0;
  for (; held < plan.nRecvs; ++held)
    if (!plan.recvs[held].beginPeerRead()) break;
  const bool ok = held == plan.nRecvs;
  if (ok && len > 0) {
    const bool postOp = (step.flags & kStepPostOp) != 0 && d.redOp == occlAvg;
    for (uint64_t t = 0; t < len; t += d.tileElems) {
      const uint64_t n = len - t < d.tileElems ? len - t : d.tileElems;
      for (uint32_t i = 0; i < plan.nRecvs; ++i) {
        const char* peer = peerNotice(plan.recvs[i]).input + srcAt + t * eb;
        const bool last = i + 1 == plan.nRecvs;
        const int post = postOp && last ? static_cast<int>(d.nRanks) : 0;
        const void* a = i == 0 ? static_cast<const void*>(own + t * eb) : dst + t * eb;
        dispatchTypeOp(d.dtype, d.redOp, ReduceCopyCall{a, peer, dst + t * eb, nullptr, static_cast<size_t>(n), post});
      }
    }
  }
  for (uint32_t i = 0; i < held; ++i) plan.recvs[i].endPeerRead();
  return ok;
}

// Output chunk `dstChunk` = the poster's output chunk `srcChunk` (its final slice), under the guard.
OCCL_HD inline bool peerCopy(const CollDesc& d, const ProgramForm& f, const DeviceStep& step, const FifoHandle& recv,
                             const TaskBuffers& bufs) {
  const uint64_t len = chunkLength(d, f, static_cast<uint64_t>(step.srcOff));
  if (!recv.beginPeerRead()) return false;
  const uint64_t eb = d.elemBytes;
  const char* src = (step.srcBuf == BufKind::Input ? peerNotice(recv).input : peerNotice(recv).output) +
                    chunkStart(d, f, static_cast<uint64_t>(step.srcOff)) * eb;
  char* dst = bufs.get(step.dstBuf) + chunkStart(d, f, static_cast<uint64_t>(step.dstOff)) * eb;
  dispatchTypeOp(d.dtype, d.redOp, ReduceCopyCall{src, nullptr, dst, nullptr, static_cast<size_t>(len), 0});
  recv.endPeerRead();
  return true;
}

}  // namespace occl
