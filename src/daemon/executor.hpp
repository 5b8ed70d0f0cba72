// Runs one block's part of one submission from its saved context until it completes, fails, or
// a wait passes the spin threshold (preemption). Shared by the host and the CUDA daemon.
#pragma once

#include <cstdint>

#include "device/chunk_geometry.hpp"
#include "device/coll_desc.hpp"
#include "daemon/progress.hpp"
#include "daemon/timeline.hpp"
#include "daemon/try_budget.hpp"
#include "occl/occl.h"
#include "primitives/peer_read.hpp"
#include "primitives/primitives.hpp"
#include "device/compat.hpp"
#include "queues/fifo_wait.hpp"
#include "queues/yield_board.hpp"

namespace occl {

class BlockExecutor {
  // CollShared and the abort flag's copy are daemon memory (docs/design.md, Memory scopes).
  using Scope = atomics::Scope;

 public:
  // `count`: the submission's count, where the collective's varies (CollDesc::variableCount);
  // the geometry is then computed from it, the same on every try.
  OCCL_HD BlockExecutor(const CollDesc& desc, const ProgramForm& form, int block, BlockContext& ctx,
                        const TaskBuffers& bufs, SpinBudget budget, const uint32_t* abortFlag, uint64_t deadlineNs,
                        uint64_t count = 0)
      : d_(desc), form_(form), plan_(form.blocks[block]), g_(geometryOf(desc, form, count, static_cast<uint32_t>(block))), count_(count),
        block_(block), ctx_(ctx), bufs_(bufs), budget_(budget), abortFlag_(abortFlag), deadlineNs_(deadlineNs) {}

  // When this try's primitives first and last moved data, where SpinBudget::stampData asked.
  OCCL_HD const DataStamps& stamps() const { return stamps_; }

  OCCL_HD TryOutcome run() {
    // An aborted communicator runs nothing more: a submission whose data could still flow would
    // otherwise complete after occlCommAbort instead of failing with occlAborted.
    if (exec::broadcastFromLeader([&] { return abortFlag_ != nullptr && atomics::loadAcquire<Scope::Device>(abortFlag_) != 0; }))
      return stop(WaitResult::Failed);
    // A failure already known before this block moved anything (a peer poisoned a connector long
    // before this rank submitted, an earlier submission failed) fails it with the user's buffers
    // untouched.
    if (ctx_.tile == 0 && ctx_.step == 0 && ctx_.sub == 0 &&
        exec::broadcastFromLeader([&] { return failureOfCollective() != 0; }))
      return stop(WaitResult::Failed);
    if (plan_.nSteps == 0) ctx_.tile = g_.nTiles;  // no part in this form: done at once
    for (; ctx_.tile < g_.nTiles; ++ctx_.tile, ctx_.step = 0) {
      if (ctx_.tile != 0 && ctx_.step == 0 && ctx_.sub == 0 && progressed_ &&
          (budget_.yieldEachTile || (arrivalLookDue(ctx_.tile) && exec::broadcastFromLeader([&] { return urgentArrival(false); }))))
        return stop(WaitResult::Yielded);
      for (; ctx_.step < plan_.nSteps; ++ctx_.step, ctx_.sub = 0) {
        const DeviceStep& step = plan_.steps[ctx_.step];
        if (ctx_.sub == 0 && step.depBlock >= 0) {
          uint64_t target = progressWord(ctx_.seq, ctx_.tile, static_cast<uint32_t>(step.depStep) + 1);
          uint64_t* word = &d_.shared->progress[step.depBlock];
          WaitResult w = waitFor([&] { return progressReached(atomics::loadAcquire<Scope::Device>(word), target); });
          if (w != WaitResult::Ready) return stop(w);
        }
        for (; ctx_.sub < subSteps(step); ++ctx_.sub) {
          WaitResult w = runPrimitive(step);
          if (w != WaitResult::Ready) return stop(w);
        }
        if (step.flags & kStepHasDep) publishProgress(ctx_.step + 1);
      }
    }
    // A failure is one outcome on every rank. A peer that failed this submission (timeout, abort,
    // its own peer's failure) may have sent all this block needed before it did, so a block that
    // never had to wait would complete with data from a rank that reports failure: every block
    // looks once more after its last step. Its own deadline does not count here: everything it
    // needed arrived; nor does an abort of this rank since the try began (the abort fails what is
    // pending; this submission is done). What no check can close is a peer failing after this
    // look (its deadline passing a moment after this rank finished); that rank then fails alone
    // with its own deadline, and this rank's result is complete (it had every byte).
    if (exec::broadcastFromLeader([&] { return failureOfCollective() != 0; })) return stop(WaitResult::Failed);
    publishProgress(0);  // tile == nTiles: every step of this submission is done
    return {TryStatus::Done, progressed_, 0, false};
  }

 private:
  enum class WaitResult : uint8_t { Ready, Stuck, Failed, Yielded };

  OCCL_HD WaitResult runPrimitive(const DeviceStep& step) {
    if (isPeerOp(step.op)) return runPeerStep(step);
    if (step.op == StepOp::Nop) return WaitResult::Ready;
    const bool readsSrc = stepReadsSrc(step.op);
    const BufKind kind = readsSrc ? step.srcBuf : step.dstBuf;
    const uint64_t chunk = static_cast<uint64_t>(readsSrc ? step.srcOff : step.dstOff) + ctx_.sub;
    // A peer program's geometry has one tile a chunk (its data steps copy whole chunks: the peer
    // AllToAll's own chunk), whatever the slot size.
    const uint64_t n = form_.peerReads != 0 ? chunkLength(g_, kind, chunk) : tileLength(g_, kind, chunk, ctx_.tile);
    // Both ends of a connector compute the same length and skip an empty tile together; a variable
    // count still sends tile 0, empty or not, so that every connector carries a stamped message
    // per submission (chunk_geometry.hpp) and a count mismatch is always seen.
    if (n == 0 && !(g_.variable && ctx_.tile == 0)) return WaitResult::Ready;
    const FifoHandle* recv = stepReceives(step.op) ? &plan_.recvs[step.recvConn] : nullptr;
    const FifoHandle* send = stepSends(step.op) ? &plan_.sends[step.sendConn] : nullptr;
    if (recv != nullptr || send != nullptr) {
      WaitResult w = waitFor([&] { return (recv == nullptr || recv->canRecv()) && (send == nullptr || send->canSend()); },
                             recv, send);
      if (w != WaitResult::Ready) return w;
    }
    // A v-collective stamps each message with its chunk's length, which the receiver's own blocks
    // give too (device/vec_table.hpp).
    const uint64_t own = stamp(g_.vec != nullptr ? chunkLength(g_, kind, chunk) : 0);
    if (recv != nullptr && g_.variable && exec::broadcastFromLeader([&] { return countDiffers(*recv, step.recvConn, own); }))
      return WaitResult::Failed;
    applyStep(d_, g_, step, recv, send, bufs_, ctx_.sub, ctx_.tile, n);
    if (exec::isLeader()) {
      if (recv != nullptr) recv->commitRecv();
      if (send != nullptr) send->commitSend(n * d_.elemBytes, own);
    }
    markProgress();
    return WaitResult::Ready;
  }

  // Peer access (primitives/peer_read.hpp). Notices are posted and released whether or not this
  // rank's slice holds data, so both ends of a connector count the same notices; a fold that
  // finds a peer's connector poisoned touches nothing and fails the collective.
  OCCL_HD WaitResult runPeerStep(const DeviceStep& step) {
    switch (step.op) {
      case StepOp::PeerPost: {
        const FifoHandle& send = plan_.sends[step.sendConn];
        WaitResult w = waitFor([&] { return send.canSend(); }, nullptr, &send);
        if (w != WaitResult::Ready) return w;
        if (!exec::broadcastFromLeader([&] { return postPeerNotice(d_, g_, send, bufs_, stamp()); }))
          return failWith(occlInvalidArgument);
        break;
      }
      case StepOp::PeerReduce: {
        // One tile per sub-step; between tiles it gives way as the tile loop of run() does, once
        // this try has moved something.
        if (ctx_.sub != 0 && progressed_ &&
            (budget_.yieldEachTile || (arrivalLookDue(ctx_.sub) && exec::broadcastFromLeader([&] { return urgentArrival(false); }))))
          return WaitResult::Yielded;
        for (uint32_t i = 0; i < plan_.nRecvs; ++i) {
          WaitResult w = waitForNotices(plan_.recvs[i], kPeerNoticeBuffers);
          if (w != WaitResult::Ready) return w;
        }
        if (ctx_.sub == 0 && g_.variable && exec::broadcastFromLeader([&] {
              for (uint32_t i = 0; i < plan_.nRecvs; ++i)
                if (countDiffers(plan_.recvs[i], i, stamp())) return true;
              return false;
            }))
          return WaitResult::Failed;
        if (ctx_.sub == 0 && !exec::broadcastFromLeader([&] { return acceptPeerNotices(d_, g_, plan_); }))
          return failWith(occlSystemError);
        if (!exec::broadcastFromLeader([&] { return peerReduceTile(d_, g_, plan_, step, bufs_, ctx_.sub); }))
          return WaitResult::Failed;
        break;
      }
      case StepOp::PeerOffer: {  // the receiver's chunk of this rank's input
        const FifoHandle& send = plan_.sends[step.sendConn];
        WaitResult w = waitFor([&] { return send.canSend(); }, nullptr, &send);
        if (w != WaitResult::Ready) return w;
        const uint64_t at = static_cast<uint64_t>(step.srcOff);
        const uint64_t elems = chunkLength(g_, step.srcBuf, at);
        const char* from = bufs_.get(step.srcBuf) + chunkStart(g_, step.srcBuf, at) * d_.elemBytes;
        if (!exec::broadcastFromLeader([&] { return offerPeerChunk(d_, send, from, elems, stamp(elems)); }))
          return failWith(occlInvalidArgument);
        break;
      }
      case StepOp::PeerTake: {  // the chunk the peer offered, into this rank's output
        const FifoHandle& recv = plan_.recvs[step.recvConn];
        WaitResult w = waitForNotices(recv, kPeerNoticeBuffers);
        if (w != WaitResult::Ready) return w;
        const uint64_t at = static_cast<uint64_t>(step.dstOff);
        const uint64_t elems = chunkLength(g_, step.dstBuf, at);
        if (g_.variable && exec::broadcastFromLeader([&] { return countDiffers(recv, step.recvConn, stamp(elems)); }))
          return WaitResult::Failed;
        char* to = bufs_.get(step.dstBuf) + chunkStart(g_, step.dstBuf, at) * d_.elemBytes;
        TakeResult taken = TakeResult::Done;  // the leader's, which the broadcasts pass on
        if (!exec::broadcastFromLeader([&] {
              taken = takePeerChunk(d_, recv, to, elems * d_.elemBytes);
              return taken == TakeResult::Done;
            }))
          return exec::broadcastFromLeader([&] { return taken == TakeResult::Poisoned; }) ? WaitResult::Failed
                                                                                           : failWith(occlSystemError);
        break;
      }
      default: {  // PeerRelease
        const FifoHandle& recv = plan_.recvs[step.recvConn];
        WaitResult w = waitForNotices(recv, kPeerNotices);
        if (w != WaitResult::Ready) return w;
        if (exec::isLeader()) {
          releasePeerNotice(d_, recv);
          for (uint32_t k = 0; k < kPeerNotices; ++k) recv.commitRecv();
        }
        break;
      }
    }
    exec::blockSync();
    markProgress();
    return WaitResult::Ready;
  }

  // A failure of this block's own making: recorded where failureCode() finds it.
  OCCL_HD WaitResult failWith(occlResult_t code) {
    if (exec::isLeader()) {
      uint32_t none = 0;
      atomics::compareExchange<Scope::Device>(&d_.shared->failStatus, none, static_cast<uint32_t>(code));
    }
    return WaitResult::Failed;
  }

  // The stamp of this rank's messages (fifo.hpp): its count, where the collective's varies; a
  // v-collective's, the length of the message's chunk, `chunkLen`.
  OCCL_HD uint64_t stamp(uint64_t chunkLen = 0) const {
    return g_.vec != nullptr ? countStamp(chunkLen) : g_.variable ? countStamp(count_) : 0;
  }

  // Leader only, a variable count, once `recv` (receive connector `conn` of the plan) holds a
  // message: whether its sender stamped it otherwise than this rank would (`own`), i.e. submitted
  // another count, or another length for the chunk (a v-collective). Then the collective fails
  // as for a registration mismatch (occlInvalidUsage, which peers see as it is), and the first such
  // block of the rank records where and both counts for the host's message.
  OCCL_HD bool countDiffers(const FifoHandle& recv, uint32_t conn, uint64_t own) const {
    const uint64_t peerStamp = recv.recvStamp();
    if (peerStamp == own) return false;
    uint32_t none = 0;
    atomics::compareExchange<Scope::Device>(&d_.shared->failStatus, none, static_cast<uint32_t>(occlInvalidUsage));
    const auto form = static_cast<uint32_t>(&form_ - d_.forms);
    none = 0;
    if (atomics::compareExchange<Scope::Device>(&d_.shared->failedWhere, none,
                                                failedWhereWord(FailedAt::CountMismatch, form, static_cast<uint32_t>(block_), conn))) {
      atomics::storeRelaxed<Scope::Device>(&d_.shared->mismatchOwnCount, own - 1);
      atomics::storeRelaxed<Scope::Device>(&d_.shared->mismatchPeerCount, peerStamp - 1);
    }
    return true;
  }

  // A step runs `count` chunks as sub-steps; a peer fold runs its tiles (peer_read.hpp).
  OCCL_HD uint32_t subSteps(const DeviceStep& step) const {
    return step.op == StepOp::PeerReduce ? peerFoldTiles(g_, step) : static_cast<uint32_t>(step.count);
  }

  OCCL_HD WaitResult waitForNotices(const FifoHandle& recv, uint32_t notices,
                                    exec::SyncSite site = exec::SyncSite::here()) {
    return waitFor([&] { return recv.pending() >= notices; }, &recv, nullptr, notices, site);
  }

  OCCL_HD void markProgress() {
    progressed_ = true;
    if (budget_.stampData) stamps_.mark(exec::nowNs());
    budget_.threshold = boostedThreshold(budget_.threshold, budget_.boost);
  }

  OCCL_HD void publishProgress(uint32_t stepsDone) {
    if (exec::isLeader()) atomics::storeRelease<Scope::Device>(&d_.shared->progress[block_], progressWord(ctx_.seq, ctx_.tile, stepsDone));
  }

  // Spins until `ready` holds, the threshold passes, or the collective must fail (abort, timeout,
  // a poisoned connector, another block's failure recorded in failStatus). A wait on FIFOs
  // (`recv`, `send`) parks on the one not ready once budget_.parkAfter rounds have yielded.
  // Rounds that spin in place (budget_.spinInPlaceNs, or for a peer on a CPU: peerOnCpu) count
  // towards the threshold like the others: a wait with a threshold of a few dozen rounds may end
  // before it ever yields.
  // `site` names the caller's wait at the simt block's barriers, so lanes in two different waits
  // are told apart.
  template <typename Ready>
  OCCL_HD WaitResult waitFor(Ready&& ready, const FifoHandle* recv = nullptr, const FifoHandle* send = nullptr,
                             uint64_t recvNeed = 1, exec::SyncSite site = exec::SyncSite::here()) {
    WaitClock clock;
    uint32_t yields = 0;
    for (uint32_t spins = 0;; ++spins) {
      if (exec::broadcastFromLeader(ready, site)) return WaitResult::Ready;
      const bool parking = budget_.parkAfter != 0 && yields >= budget_.parkAfter && (recv != nullptr || send != nullptr);
      if ((parking || (spins & 63u) == 63u) && exec::broadcastFromLeader([&] { return failureCode() != 0; }))
        return WaitResult::Failed;
      if ((parking || (spins & 63u) == budget_.arrivalLookRound) && exec::broadcastFromLeader([&] { return urgentArrival(true); }))
        return WaitResult::Yielded;
      // Checked again on giving up: a threshold below 64 (forcePreempt) would otherwise never
      // see an abort, a poisoned connector or the timeout, and the daemon could never drain.
      // A helped pass's deadline (host only) is looked at where failures are: no clock read per round.
      const bool deadline = (parking || (spins & 63u) == 63u) && passDeadlinePassed();
      if (!budget_.unlimited && (spins >= budget_.threshold || outOfTime(spins, clock) || deadline))
        return exec::broadcastFromLeader([&] { return failureCode() != 0; }) ? WaitResult::Failed : WaitResult::Stuck;
      if (parking) {
        park(recv, send, recvNeed, clock.startNs);
      } else if (spinsInPlace(spins, clock) || peerOnCpu(recv, send, spins, clock)) {
        exec::cpuPause();
      } else {
        yieldRound();
        ++yields;
      }
    }
  }

  // Whether this round of a wait spins on the core (SpinBudget::spinInPlaceNs); the first
  // unready round starts the clock.
  OCCL_HD bool spinsInPlace(uint32_t spins, WaitClock& clock) const {
    if (budget_.spinInPlaceNs == 0) return false;
    return exec::broadcastFromLeader([&] {
      const uint64_t now = clock.at(spins);
      if (spins == 0) clock.spinEndNs = now + budget_.spinInPlaceNs;
      clock.spinning = now < clock.spinEndNs;
      return clock.spinning;
    });
  }

  // Host: whether this round spins on the core because the rank the wait is for, the sender of
  // `recv` (else the receiver of `send`), has no thread in a yield (queues/yield_board.hpp): for at
  // most kPeerOnCpuSpinNs from the first such round. Only host blocks have a board (tYieldBoard),
  // and they have one lane: no broadcast.
  OCCL_HD bool peerOnCpu([[maybe_unused]] const FifoHandle* recv, [[maybe_unused]] const FifoHandle* send,
                         [[maybe_unused]] uint32_t spins, [[maybe_unused]] WaitClock& clock) const {
#if OCCL_ON_DEVICE
    return false;
#else
    if (tYieldBoard == nullptr) return false;
    const uint32_t named = recv != nullptr   ? atomics::loadRelaxed(&recv->header->senderRank)
                           : send != nullptr ? atomics::loadRelaxed(&send->header->receiverRank)
                                             : 0u;
    if (!namedRankOnCpu(tYieldBoard, named)) return false;
    const uint64_t now = clock.at(spins);
    if (clock.peerSpinStartNs == 0) clock.peerSpinStartNs = now;
    clock.spinning = now - clock.peerSpinStartNs < kPeerOnCpuSpinNs;
    return clock.spinning;
#endif
  }

  // One sleep of a parked wait (host only), on whichever FIFO is not ready: until it moves,
  // kMaxParkNs, or the end of the wait's time bound.
  OCCL_HD void park([[maybe_unused]] const FifoHandle* recv, [[maybe_unused]] const FifoHandle* send,
                    [[maybe_unused]] uint64_t recvNeed, [[maybe_unused]] uint64_t startNs) const {
#if OCCL_ON_DEVICE
    exec::spinPause();
#else
    uint64_t maxNs = kMaxParkNs;
    if (!budget_.unlimited && budget_.roundNs != 0) {
      const uint64_t spentNs = exec::nowNs() - startNs;
      if (spentNs >= timeBoundNs()) return;
      maxNs = timeBoundNs() - spentNs < maxNs ? timeBoundNs() - spentNs : maxNs;
    }
    if (recv != nullptr && recv->pending() < recvNeed) {
      parkUntilRecv(*recv, maxNs, recvNeed);
    } else if (send != nullptr) {
      parkUntilSend(*send, maxNs);
    }
#endif
  }

  OCCL_HD static bool passDeadlinePassed() {
#if OCCL_ON_DEVICE
    return false;
#else
    return tPassDeadlineNs != 0 && exec::nowNs() >= tPassDeadlineNs;
#endif
  }

  // The time bound of a wait (SpinBudget::roundNs); the clock starts at its first unready round.
  OCCL_HD bool outOfTime(uint32_t spins, WaitClock& clock) const {
    if (budget_.roundNs == 0) return false;
    return exec::broadcastFromLeader([&] {
      const uint64_t now = clock.at(spins);
      if (spins == 0) clock.startNs = now;
      return now - clock.startNs >= timeBoundNs();
    });
  }
  OCCL_HD uint64_t timeBoundNs() const { return static_cast<uint64_t>(budget_.threshold) * budget_.roundNs; }

  OCCL_HD bool arrivalLookDue(uint32_t tile) const {
    return budget_.arrivalEveryTiles <= 1 || tile % budget_.arrivalEveryTiles == 0;
  }
  // Whether the SQ holds entries this block has not copied. `inWait`: looked from a wait that is
  // not ready, not between tiles (counted apart on simt: device/simt_crossings.hpp).
  OCCL_HD bool urgentArrival(bool inWait) const {
    if (budget_.sqPublished == nullptr) return false;
    const uint64_t published =
        inWait ? atomics::loadAcquireInWait(budget_.sqPublished) : atomics::loadAcquire(budget_.sqPublished);
    return published > budget_.sqSeen;
  }

  // Why this submission must fail, 0 = it need not: a failure seen, or this block's deadline.
  OCCL_HD uint32_t failureCode() const {
    if (uint32_t f = failureSeen()) return f;
    return deadlineNs_ != 0 && exec::nowNs() > deadlineNs_ ? static_cast<uint32_t>(occlTimeout) : 0u;
  }

  // A failure recorded somewhere: an abort, or one of the collective's (failureOfCollective).
  OCCL_HD uint32_t failureSeen() const {
    if (abortFlag_ != nullptr) {
      if (uint32_t a = atomics::loadAcquire<Scope::Device>(abortFlag_)) return a;  // occlAborted or occlRemoteError
    }
    return failureOfCollective();
  }

  // A failure of this collective: another block's (failStatus), a poisoned connector or a peer's
  // different registration. Device memory on a GPU, where a connector's peer is in this process:
  // the looks before the first step and after the last (run()) cross no bus (the abort flag read
  // here is the daemon-memory copy the host writes with a copy; run() reads it once at the start
  // of a try).
  OCCL_HD uint32_t failureOfCollective() const {
    if (uint32_t s = atomics::loadAcquire<Scope::Device>(&d_.shared->failStatus)) return s;
    for (uint32_t i = 0; i < plan_.nSends; ++i)
      if (uint32_t c = connectorFailure(plan_.sends[i], /*peerIsReceiver=*/true)) return c;
    for (uint32_t i = 0; i < plan_.nRecvs; ++i)
      if (uint32_t c = connectorFailure(plan_.recvs[i], /*peerIsReceiver=*/false)) return c;
    return 0;
  }

  // A connector poisoned for this submission or an earlier one (a peer's failure of a later one
  // says nothing of this one, which that peer finished), or a peer that registered this collective
  // differently.
  OCCL_HD uint32_t connectorFailure(const FifoHandle& c, bool peerIsReceiver) const {
    if (uint32_t p = c.poisonStatus(); p != 0 && c.poisonFails(ctx_.seq)) return p;
    return c.peerSignatureDiffers(d_.signature, peerIsReceiver) ? static_cast<uint32_t>(occlInvalidUsage) : 0u;
  }

  OCCL_HD TryOutcome stop(WaitResult w) {
    if (w == WaitResult::Failed) {
      // A fold that found a peer's buffers poisoned fails whatever submission the poison names:
      // never a failure without a code, which would complete as a success.
      uint32_t code = failureCode();
      if (code == 0) code = occlRemoteError;
      if (exec::isLeader()) {
        uint32_t none = 0;  // the first failure's place stays
        atomics::compareExchange<Scope::Device>(&d_.shared->failedWhere, none, failurePlace(code == static_cast<uint32_t>(occlTimeout)));
      }
      return {TryStatus::Failed, progressed_, code, false};
    }
    return {TryStatus::Preempted, progressed_, 0, w == WaitResult::Yielded};
  }

  // Where this block saw the failure (FailedAt): a connector a peer poisoned (or registered
  // differently), else, for its own timeout (`waited`), what its current step waited for; 0 for
  // an abort or a failure of its own making, which no peer caused. Failure path only.
  OCCL_HD uint32_t failurePlace(bool waited) const {
    const auto form = static_cast<uint32_t>(&form_ - d_.forms);
    const auto block = static_cast<uint32_t>(block_);
    for (uint32_t i = 0; i < plan_.nRecvs; ++i)
      if (connectorFailure(plan_.recvs[i], /*peerIsReceiver=*/false)) return failedWhereWord(FailedAt::PoisonedReceive, form, block, i);
    for (uint32_t i = 0; i < plan_.nSends; ++i)
      if (connectorFailure(plan_.sends[i], /*peerIsReceiver=*/true)) return failedWhereWord(FailedAt::PoisonedSend, form, block, i);
    if (!waited || ctx_.tile >= g_.nTiles || ctx_.step >= plan_.nSteps) return 0;  // past its last step: waits for nothing
    const DeviceStep& s = plan_.steps[ctx_.step];
    if (ctx_.sub == 0 && s.depBlock >= 0 &&
        !progressReached(atomics::loadAcquire<Scope::Device>(&d_.shared->progress[s.depBlock]),
                         progressWord(ctx_.seq, ctx_.tile, static_cast<uint32_t>(s.depStep) + 1)))
      return failedWhereWord(FailedAt::OtherBlock, form, block, static_cast<uint32_t>(s.depBlock));
    if (s.recvConn != kNoConnector && !plan_.recvs[s.recvConn].canRecv())
      return failedWhereWord(FailedAt::Receive, form, block, s.recvConn);
    if (s.sendConn != kNoConnector && !plan_.sends[s.sendConn].canSend())
      return failedWhereWord(FailedAt::Send, form, block, s.sendConn);
    return 0;
  }

  const CollDesc& d_;
  const ProgramForm& form_;
  const BlockPlan& plan_;
  ChunkGeometry g_;
  uint64_t count_;
  int block_;
  BlockContext& ctx_;
  TaskBuffers bufs_;
  SpinBudget budget_;
  const uint32_t* abortFlag_;
  uint64_t deadlineNs_;
  bool progressed_ = false;
  DataStamps stamps_;
};

}  // namespace occl
