// A daemon block's task queue: the submissions it has taken from the SQ and not finished, in
// the order the order policy gives (FIFO: arrival; priority: higher first, FIFO among equals;
// agreed: the lower submission number first, then the lower collId).
// The queue position sets the spin threshold (stickiness), so every rank that applies the same
// policy to the same submissions tends to wait on the same collective at the same time. Only the
// agreed order puts the same submissions in the same order on every rank whatever order they
// arrived in: the k-th submission of a collective has number k on every rank.
//
// Block state is mutated by the leader lane only, then the block synchronises (on the host a
// block is one thread and both are no-ops). A decision that reads block state the leader
// mutates is the leader's too, broadcast (exec::broadcastFromLeader): a lane that evaluated it
// itself could read the state before or after the leader's next update and take the other branch.
#pragma once

#include <cstdint>

#include "device/compat.hpp"
#include "occl/occl.h"
#include "queues/block_report.hpp"
#include "queues/sq.hpp"

namespace occl {

struct TaskEntry {
  uint32_t collIndex;
  int32_t priority;
  uint64_t seq;
  uint64_t sendbuf;
  uint64_t recvbuf;
  uint64_t popNs;  // when this block took it from the SQ (its own clock)
  uint16_t form;   // kFormOutOfPlace, kFormInPlace or kFormSmall: which ProgramForm runs it
  uint16_t gate;   // GateState (device/gate.hpp)
  uint16_t part;   // the program block this task runs (daemonParts(): part % daemon blocks == block)
  uint16_t barrier;  // 1: waits for every earlier submission of its collective (kSqeBarrier), 0 once they completed
  uint64_t collId; // the user's id, the same on every rank (the agreed order's tie-break)
  uint64_t count;  // the submission's count where the collective's varies (SqeView::count)
};
static_assert(sizeof(TaskEntry) == 64, "TaskEntry layout is shared by host and device");

// The block's own state: daemon memory (device memory on the GPU), initialised by the host
// before the first launch and then touched by the block alone. What the host must see goes to
// the block's BlockReport line in host-visible memory.
struct alignas(64) BlockState {
  uint64_t sqCursor;       // next ticket this block reads from its queue (reported as BlockReport::sqNext)
  uint64_t sqReported;     // the cursor this block last reported
  uint64_t cqTail;         // CQEs this block has written into its ring (reported as cqPublished)
  uint64_t cqLimit;        // the first tail its credit does not cover (CompletionQueue::tryPush)
  uint64_t cqReported;     // cqTail as last reported
  uint32_t heldReported;   // nTasks as last reported
  uint64_t tries;          // task tries so far (priority polling cadence)
  TaskEntry* tasks;        // [capacity], daemon memory
  BlockReport* report;     // this block's line of host-visible reports
  uint32_t capacity;
  uint32_t nTasks;         // reported as BlockReport::held
  uint32_t exitSeen;
  uint32_t lastPassIdle;
  uint32_t passesSincePoll;
  uint32_t sqBlocked;      // the last poll left an entry it could not take yet (no room for its
                           // parts, or in block 0's relay): waits then do not give way to arrivals
  SqeView incoming;        // the SQE the leader just read, for the whole block
  uint64_t relayTicket;    // block 0 of a daemon that fans out: entries relayed so far (daemon.hpp)
  uint64_t relayLimit;     // its cached SubmissionQueue::tryPush limit on the relay
  uint64_t relayReported;  // relayTicket as last reported (BlockReport::relayed)
};
static_assert(sizeof(BlockState) == 192, "BlockState layout is shared by host and device");

template <typename F>
OCCL_HD inline void leaderUpdate(F&& f, exec::SyncSite site = exec::SyncSite::here()) {
  if (exec::isLeader()) f();
  exec::blockSync(site);
}

// Whether `a` goes ahead of a queued `b` under order policy `order` (occlOrderPolicy_t).
OCCL_HD inline bool goesAhead(const TaskEntry& a, const TaskEntry& b, uint32_t order) {
  if (order == occlOrderPriority) return a.priority > b.priority;
  if (order == occlOrderAgreed) return a.seq < b.seq || (a.seq == b.seq && a.collId < b.collId);
  return false;  // FIFO
}

// Stable: a task goes behind every queued task it does not go ahead of, so the parts of one
// submission keep their order.
OCCL_HD inline void insertTask(BlockState& bs, const TaskEntry& t, uint32_t order) {
  leaderUpdate([&] {
    uint32_t pos = bs.nTasks;
    while (pos > 0 && goesAhead(t, bs.tasks[pos - 1], order)) {
      bs.tasks[pos] = bs.tasks[pos - 1];
      --pos;
    }
    bs.tasks[pos] = t;
    bs.nTasks += 1;
  });
}

OCCL_HD inline void removeTask(BlockState& bs, uint32_t position) {
  leaderUpdate([&] {
    for (uint32_t i = position + 1; i < bs.nTasks; ++i) bs.tasks[i - 1] = bs.tasks[i];
    bs.nTasks -= 1;
  });
}

// Tells the host this block's SQ cursor (BlockReport::sqNext), if it moved since the last report.
// Leader only.
OCCL_HD inline void reportCursor(BlockState& bs) {
  if (bs.sqReported == bs.sqCursor) return;
  atomics::storeRelease(&bs.report->sqNext, bs.sqCursor);
  bs.sqReported = bs.sqCursor;
}

// The block's report as it leaves a launch: what the host reads only once the launch is over
// (KernelBackend::pendingWork, noteLaunchEnded): its cursor, the tasks it holds, the CQEs it
// wrote and (block 0 of a daemon that fans out) the entries it relayed. Written here rather than at every copy, insert, removal and completion, which on the GPU
// cost a bus crossing each, and only what changed since the last report. Leader only.
OCCL_HD inline void reportOnLeaving(BlockState& bs) {
  reportCursor(bs);
  if (bs.heldReported != bs.nTasks) {
    atomics::storeRelease(&bs.report->held, bs.nTasks);
    bs.heldReported = bs.nTasks;
  }
  if (bs.cqReported != bs.cqTail) {
    atomics::storeRelease(&bs.report->cqPublished, bs.cqTail);
    bs.cqReported = bs.cqTail;
  }
  if (bs.relayReported != bs.relayTicket) {
    atomics::storeRelease(&bs.report->relayed, bs.relayTicket);
    bs.relayReported = bs.relayTicket;
  }
}

}  // namespace occl
