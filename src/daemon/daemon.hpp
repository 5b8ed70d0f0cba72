// The daemon: each block drains the SQ into its task queue, tries the tasks in queue order with
// the spin thresholds of the stickiness policy, saves the context of a preempted task (lazily),
// and publishes a CQE when the last block of a collective finishes a submission. One pass at a
// time: the host thread (src/backend/host_backend.cpp) or the CUDA kernel (daemon_kernel.cu) loops
// over passes and decides when to park or quit.
#pragma once

#include <cstdint>

#include "daemon/executor.hpp"
#include "daemon/task_queue.hpp"
#include "daemon/timeline.hpp"
#include "device/coll_desc.hpp"
#include "device/compat.hpp"
#include "device/gate.hpp"
#include "device/vec_table.hpp"
#include "occl/occl.h"
#include "queues/cq.hpp"
#include "queues/sq.hpp"

namespace occl {

struct SchedPolicy {
  uint32_t order;  // occlOrderPolicy_t
  uint32_t spin;   // occlSpinPolicy_t
  uint32_t thresholdMax;
  uint32_t thresholdMin;
  uint32_t thresholdStep;
  uint32_t thresholdBoost;
  uint32_t priorityPollInterval;
  uint32_t forcePreempt;
  uint32_t disablePreemption;
  uint32_t spinRoundNs;  // time bound of one spin round (SpinBudget::roundNs); 0 = rounds only
  uint32_t parkAfterSpins;  // SpinBudget::parkAfter: host backend only, 0 = never park
  uint32_t spinInPlaceNs;   // SpinBudget::spinInPlaceNs: host backend only, 0 = yield from the first round
  uint32_t arrivalEveryTiles;  // SpinBudget::arrivalEveryTiles; 0 counts as 1
  uint32_t arrivalLookRound;   // SpinBudget::arrivalLookRound
};
static_assert(sizeof(SchedPolicy) == 56, "SchedPolicy layout is shared by host and device");

// Everything a daemon block needs; plain data the host builds once per communicator.
//
// Fan-out (kernel backends with several blocks, issue 40): an SQ entry read across the bus costs
// a crossing per block that reads it, so only block 0 reads the SQ. It relays the entries that
// another block runs a part of (nParts > 1, daemonParts()) and the exit entry into `relay`, a
// queue of the same protocol (queues/sq.hpp) in daemon memory whose consumers are blocks 1..n-1;
// a small collective (one part, block 0's) is read once. Block 0 takes an entry from the SQ only
// once its relay has room for it, so an entry is never half taken. The relay's readers report
// their cursors into their own BlockReport lines (host-visible: block 0 reads them only at its
// relay limit or half-way to it, as the host does the SQ's), and block 0 reports how many it
// relayed as it leaves a launch, so the host sees unread relay entries too
// (KernelBackend::pendingWork). Without fan-out every block reads the SQ and `relay` is unused.
struct DaemonEnv {
  SubmissionQueue sq;
  SubmissionQueue relay;  // fanOut: block 0 -> blocks 1..nBlocks-1, daemon memory
  CompletionQueue cq;
  CollTable colls;
  BlockState* blocks;  // [nBlocks]
  uint32_t nBlocks;
  uint32_t fanOut;     // 1: only block 0 reads the SQ (above)
  SchedPolicy policy;
  uint32_t* abortFlag;      // daemon memory: the daemon's copy of hostAbortFlag, which it reads
  uint32_t* hostAbortFlag;  // shared memory: why the communicator was aborted (occlCommAbort, a
                            // peer's failure), 0 = it was not; host only (Backend::raiseAbort)
  TimelineRing* timeline;   // daemon memory: block b's ring at timeline + b * timelineRingLines(timelineDepth)
  uint32_t timelineDepth;   // records per block (config.timelineDepth); 0 = no timeline
  uint32_t pad2;
};
static_assert(sizeof(DaemonEnv) == 208, "DaemonEnv is a kernel argument: one layout on both sides");

// Block `block`'s timeline ring (daemon/timeline.hpp), where it is kept.
OCCL_HD inline TimelineRing* timelineOf(const DaemonEnv& env, int block) {
  return env.timeline + static_cast<uint64_t>(block) * timelineRingLines(env.timelineDepth);
}

// The queue block `block` takes its entries from.
OCCL_HD inline const SubmissionQueue& sourceOf(const DaemonEnv& env, int block) {
  return env.fanOut != 0 && block != 0 ? env.relay : env.sq;
}

// Whether block `block` must relay entry `e` before it takes it: block 0 of a daemon that fans
// out, for an entry another block runs a part of, or the exit.
OCCL_HD inline bool mustRelay(const DaemonEnv& env, int block, const SqeView& e) {
  return env.fanOut != 0 && block == 0 && ((e.flags & kSqeExit) != 0 || e.nParts > 1);
}

// Block 0's leader: passes `e` on to the other blocks, if the relay has room. The SQ's request
// for a report was block 0's; the relay asks its own readers (SubmissionQueue::tryPush).
OCCL_HD inline bool relayEntry(const DaemonEnv& env, BlockState& bs, SqeView e) {
  e.flags = static_cast<uint16_t>(e.flags & ~kSqeReport);
  if (!env.relay.tryPush(bs.relayTicket, e, bs.relayLimit)) return false;
  bs.relayTicket += 1;
  return true;
}

#if !OCCL_ON_DEVICE
// Host backend: whom a pass wakes when it finds its completion ring full (finishTask). Only the
// poller frees slots, and the backend rings it after a pass, which cannot end until a slot is
// free: a poller parked for long (an idle communicator's 20 ms) would leave the pass spinning
// that long. Set around the host backend's passes; the GPU never sets it (its poller polls), nor
// does the simt backend.
struct CqFullBell {
  void (*ring)(void*) = nullptr;
  void* arg = nullptr;
};
inline thread_local CqFullBell tCqFullBell;
#endif

struct PassResult {
  bool progressed;  // a primitive ran, a task completed, or an SQE arrived
  bool pending;     // the task queue is not empty
  bool exit;        // an exit SQE was read and nothing is pending
};

// Statistics have one writer (the block's leader) and are read by the host at any time, by a copy
// (daemon memory: device scope).
OCCL_HD inline void bump(uint64_t& counter, uint64_t by) {
  using atomics::Scope;
  atomics::storeRelaxed<Scope::Device>(&counter, atomics::loadRelaxed<Scope::Device>(&counter) + by);
}

OCCL_HD inline SpinBudget spinBudgetFor(const SchedPolicy& p, uint32_t position) {
  if (p.disablePreemption) return {0, 0, true, 0, nullptr, 0, false, p.parkAfterSpins, p.spinInPlaceNs, p.arrivalEveryTiles};
  if (p.forcePreempt) return {1, 0, false, 0, nullptr, 0, false, 0, 0, p.arrivalEveryTiles};
  if (p.spin == occlSpinPolicyFixed)
    return {p.thresholdMax, 0, false, p.spinRoundNs, nullptr, 0, false, p.parkAfterSpins, p.spinInPlaceNs, p.arrivalEveryTiles};
  uint64_t drop = static_cast<uint64_t>(position) * p.thresholdStep;
  uint32_t t = drop + p.thresholdMin >= p.thresholdMax ? p.thresholdMin : p.thresholdMax - static_cast<uint32_t>(drop);
  return {t, p.thresholdBoost, false, p.spinRoundNs, nullptr, 0, false, p.parkAfterSpins, p.spinInPlaceNs, p.arrivalEveryTiles};
}

// Whether an arrival may go ahead of the queued tasks, so a try gives way to it.
OCCL_HD inline bool arrivalsMayGoAhead(const SchedPolicy& p) {
  return p.order == occlOrderPriority || p.order == occlOrderAgreed;
}

// Priority and agreed order: a try gives way as soon as new SQEs are published (unless they
// could not be taken: the task queue is full, or the last poll left an entry whose parts did not
// fit or that block 0 could not relay, BlockState::sqBlocked; giving way would only thrash, and a
// pass that restarts at its front for an entry it cannot take never ends), since
// an arrival may belong ahead of it; priority order also gives way after every tile while a more
// urgent task waits ahead. The pass then starts over at the front. Under the agreed order this
// is what undoes a burst of submissions that began to run before its older part arrived.
OCCL_HD inline SpinBudget budgetFor(const DaemonEnv& env, const BlockState& bs, int block, uint32_t position) {
  SpinBudget b = spinBudgetFor(env.policy, position);
  if (!arrivalsMayGoAhead(env.policy) || env.policy.disablePreemption) return b;
  if (bs.nTasks < bs.capacity && !bs.exitSeen && !bs.sqBlocked) {
    b.sqPublished = sourceOf(env, block).published;
    b.sqSeen = bs.sqCursor;
    b.arrivalLookRound = env.policy.arrivalLookRound;
  }
  b.yieldEachTile = env.policy.order == occlOrderPriority && position > 0 &&
                    bs.tasks[0].priority > bs.tasks[position].priority;
  return b;
}

// Tells a stream waiting for submission `seq` of `d` that it completed (device/gate.hpp): its
// reader is the stream, not a daemon thread, hence system scope. Out of line, as gateOpened.
OCCL_HD OCCL_NOINLINE inline void gateDone(const CollDesc& d, uint64_t seq) {
  atomics::storeRelease(gateDoneWord(d, seq), gateValue(seq));
}

// Publishes the CQE (into daemon block `block`'s ring) once the last part of the collective is
// done with submission `seq`. Returns true if it waited for the poller to free a slot.
OCCL_HD inline bool finishTask(const DaemonEnv& env, BlockState& bs, const CollDesc& d, int block,
                               const TaskEntry& task, uint32_t status, bool& wroteCqe) {
  wroteCqe = false;
  if (!exec::isLeader()) return false;
  using atomics::Scope;  // CollShared is daemon memory (docs/design.md, Memory scopes)
  // The last of its parts to finish the submission publishes it: its form's parts (every part
  // but for the small form: ProgramForm::nParts; a look at the small form's alone, where the
  // kernel at its register cap spills for a form looked up by index). A form of one part
  // (daemonParts: block 0 runs it, on every backend) needs no count.
  const uint32_t parts = task.form == kFormSmall ? d.forms[kFormSmall].nParts : d.nBlocks;
  if (parts > 1) {
    uint32_t* counter = &d.shared->finished[windowSlot(task.seq, d.inflightWindow)];
    if (atomics::fetchAdd<Scope::Device>(counter, 1u) + 1 != parts) return false;
    atomics::storeRelaxed<Scope::Device>(counter, 0u);
  }
  // A change of form waits for this (kSqeBarrier); only collectives with a small form change.
  if (d.smallCount != 0) atomics::storeRelease<Scope::Device>(&d.shared->doneThrough, task.seq + 1);
  uint32_t sticky = atomics::loadAcquire<Scope::Device>(&d.shared->failStatus);
  uint64_t word = cqe::pack(d.collIndex, status != 0 ? status : sticky, task.seq);
  // A stream waiting for this submission (device/gate.hpp) goes on once every part is done,
  // failed or not: its reader is the stream, not a daemon thread.
  if (task.gate != kGateNone) gateDone(d, task.seq);
  // Counted before the CQE exists: once its callback has fired, the statistics include it.
  bump(d.stats[task.part].completions, 1);
  bool waited = false;
  while (!env.cq.tryPush(static_cast<uint32_t>(block), bs.cqTail, word, bs.cqLimit)) {  // the poller frees slots
#if !OCCL_ON_DEVICE
    if (!waited && tCqFullBell.ring != nullptr) tCqFullBell.ring(tCqFullBell.arg);
#endif
    waited = true;
    exec::spinPause();
  }
  bs.cqTail += 1;
  wroteCqe = true;
  return waited;
}

// How long a failure waits for peer processes to leave this rank's buffers (failCollective): a
// tile fold takes well under a millisecond even when its thread is preempted a few times.
inline constexpr uint64_t kPeerDrainProcessesNs = 200'000'000;

// Records a failure so every block of this rank and every peer reached by a connector fails the
// collective too (Gloo's fail-fast), instead of waiting for its own timeout. Peers see a
// registration mismatch and a timeout as what they are (a hung rank makes every other rank's
// copy time out, whichever deadline passes first); any other failure as occlRemoteError. Out of
// line: a failure path, whose loops over the forms cost the kernel's tile loop spills inlined
// (tools/gpu/daemon_kernel_resources.txt).
OCCL_HD OCCL_NOINLINE inline void failCollective(const CollDesc& d, int part, uint64_t seq, uint32_t code) {
  if (!exec::isLeader()) return;
  uint32_t expected = 0;
  atomics::compareExchange<atomics::Scope::Device>(&d.shared->failStatus, expected, code);
  const bool asIs = code == occlInvalidUsage || code == occlTimeout;
  const uint32_t remote = asIs ? code : static_cast<uint32_t>(occlRemoteError);
  for (const ProgramForm& form : d.forms) {
    if (form.blocks == nullptr) continue;  // no small form
    const BlockPlan& plan = form.blocks[part];
    for (uint32_t i = 0; i < plan.nSends; ++i) plan.sends[i].poisonWith(remote, seq);
    for (uint32_t i = 0; i < plan.nRecvs; ++i) plan.recvs[i].poisonWith(remote, seq);
    if (d.peerShared && form.peerReads) releasePeerNoticesOnFailure(d, plan);
  }
  // A peer may still be using this rank's buffers (peer access, primitives/peer_read.hpp): the
  // failure completes, and the user may free them, only once it has left. Peer access never
  // waits, so this ends; later peers see the poison and touch nothing. A peer process can die
  // or stop inside a tile, so between processes the wait is bounded: their mappings of this
  // rank's buffers stay valid whatever the user does with them (memory/shared_buffers.hpp).
  const uint64_t until = d.peerShared ? exec::nowNs() + kPeerDrainProcessesNs : 0;
  for (const ProgramForm& form : d.forms) {
    if (form.blocks == nullptr) continue;
    const BlockPlan& plan = form.blocks[part];
    for (uint32_t i = 0; i < plan.nSends; ++i)
      while (!plan.sends[i].peerUsersGone() && (until == 0 || exec::nowNs() < until)) exec::spinPause();
  }
}

// Part `part`'s next submission of collective `collIndex` among the tasks this block holds, but
// for the one at `skip`: the lowest seq, or `none`. A collective with a small form
// (CollDesc::smallCount) runs its small submissions on fewer parts, so a part's submissions are
// not consecutive and its context (BlockContext::seq) must name the next one the part runs, not
// the one after its last. Only the block that owns the part (daemonParts) queues its tasks, so the
// part's next submission is either among them or not taken from the SQ yet; in the second case
// pollSubmissions sets the context when it arrives (a part with no task queued is idle: its
// last submission finished). Leader only; a scan of the queue, for such collectives alone, and
// out of line, so that the kernel's other paths keep their registers.
OCCL_HD OCCL_NOINLINE inline uint64_t nextOnPart(const BlockState& bs, uint32_t collIndex, uint32_t part, uint32_t skip, uint64_t none) {
  uint64_t next = none;
  bool found = false;
  for (uint32_t i = 0; i < bs.nTasks; ++i) {
    const TaskEntry& t = bs.tasks[i];
    if (i == skip || t.collIndex != collIndex || t.part != part) continue;
    if (!found || t.seq < next) next = t.seq;
    found = true;
  }
  return next;
}

// pollSubmissions, for a collective with a small form: part `part` starts at submission `seq` if
// it is idle (no task of it queued). Leader only.
OCCL_HD OCCL_NOINLINE inline void startIfIdle(const BlockState& bs, const CollDesc& d, uint32_t collIndex, uint32_t part,
                                             uint64_t seq) {
  if (nextOnPart(bs, collIndex, part, bs.nTasks, ~uint64_t{0}) == ~uint64_t{0})
    d.contexts[part] = BlockContext{seq, 0, 0, 0, 0, 0};
}

// One clock read for what happens with no work in between: on the host a read costs about a
// tenth of a small collective's pass. The SQEs one poll takes and the try after them share a
// read, and a try that finishes reads the clock once, for its statistics and for the next try's
// start (a submission taken and tried in one pass thus counts no queue wait). A try that does
// not finish, or whose CQE waited for a free slot, leaves it stale. The first pass that a waiter
// with a timeout helps starts from the reading the waiter took for its deadline (Backend::help),
// which may be older than a pop of another thread's pass: durations from it are clamped at 0
// (elapsedNs). Each lane keeps its own (the leader's is the one that counts).
OCCL_HD inline uint64_t elapsedNs(uint64_t fromNs, uint64_t toNs) { return toNs > fromNs ? toNs - fromNs : 0; }

struct PassClock {
  uint64_t ns = 0;  // 0 = stale
  OCCL_HD uint64_t now() {
    if (ns == 0) ns = exec::nowNs();
    return ns;
  }
  OCCL_HD uint64_t fresh() { return ns = exec::nowNs(); }
  OCCL_HD void stale() { ns = 0; }
};

// Whether gated task `position` may start (device/gate.hpp): its gate is open, or the
// communicator was aborted, which fails it without waiting, so abort and finalize never wait for a
// gate nobody will open. On opening, its queue wait and timeout restart from `nowNs` (an earlier
// submission of its collective may still be running: its clock starts as an ungated one's does,
// when it is startable but queued). Out of line, so the look at a gate costs the path of ungated
// tasks no registers.
OCCL_HD OCCL_NOINLINE inline bool gateOpened(const DaemonEnv& env, BlockState& bs, uint32_t position, uint64_t nowNs) {
  const uint64_t seq = bs.tasks[position].seq;
  const CollDesc& d = *env.colls.get(bs.tasks[position].collIndex);
  const bool open = exec::broadcastFromLeader([&] {
    return gateReached(atomics::loadAcquire(gateOpenWord(d, seq)), seq) ||
           (env.abortFlag != nullptr && atomics::loadAcquire<atomics::Scope::Device>(env.abortFlag) != 0);
  });
  if (!open) return false;
  leaderUpdate([&] {
    bs.tasks[position].gate = kGateOpen;
    bs.tasks[position].popNs = nowNs;
  });
  return true;
}

// Whether every submission of `d` before task `position`'s has completed (kSqeBarrier: its form
// differs from its predecessor's, CollShared::doneThrough). Once they have, the task stops
// looking. Out of line, as gateOpened.
OCCL_HD OCCL_NOINLINE inline bool earlierCompleted(const DaemonEnv& env, BlockState& bs, uint32_t position) {
  const uint64_t seq = bs.tasks[position].seq;
  const CollDesc& d = *env.colls.get(bs.tasks[position].collIndex);
  const bool done = exec::broadcastFromLeader(
      [&] { return atomics::loadAcquire<atomics::Scope::Device>(&d.shared->doneThrough) >= seq; });
  if (done) leaderUpdate([&] { bs.tasks[position].barrier = 0; });
  return done;
}

// A v-collective's first try of submission `seq` on part `part`: the lanes copy the submission's
// table of blocks from its window slot (shared memory, written by the host before the SQE) into the
// part's cache in daemon memory (device/vec_table.hpp), which every later try reads.
OCCL_HD OCCL_NOINLINE inline void copyVecTable(const CollDesc& d, int part, uint64_t seq) {
  const uint64_t words = vecTableBlocks(d.vecGroups) * 2;
  const auto* from = reinterpret_cast<const uint64_t*>(d.vecSlots + vecTableBlocks(d.vecGroups) * windowSlot(seq, d.inflightWindow));
  auto* to = reinterpret_cast<uint64_t*>(d.vecCache + vecTableBlocks(d.vecGroups) * static_cast<uint64_t>(part));
  for (uint64_t i = static_cast<uint64_t>(exec::lane()); i < words; i += static_cast<uint64_t>(exec::laneCount()))
    to[i] = atomics::loadRelaxed(const_cast<uint64_t*>(from + i));
  exec::blockSync();
}

// One try of task `position`; returns true when the task left the queue. Every lane runs the
// executor on its own copy of the context; decisions inside it are made uniform by the leader.
OCCL_HD inline bool tryTask(const DaemonEnv& env, BlockState& bs, int block, uint32_t position, bool& progressed,
                            bool& yielded, PassClock& clock) {
  if (bs.tasks[position].gate == kGateClosed && !gateOpened(env, bs, position, clock.now())) return false;
  if (bs.tasks[position].barrier && !earlierCompleted(env, bs, position)) return false;  // of the other form: all first
  const TaskEntry task = bs.tasks[position];
  const CollDesc& d = *env.colls.get(task.collIndex);
  const int part = static_cast<int>(task.part);
  BlockContext* saved = &d.contexts[part];
  if (saved->seq != task.seq) return false;  // an earlier submission of this collective runs first

  const BlockContext loaded = *saved;
  BlockContext ctx = loaded;
  BlockStats& stats = d.stats[part];
  const uint64_t now = clock.now();
  if (!ctx.started) {
    ctx.started = 1;
    ctx.startNs = now;
  }
  if (!loaded.started && d.vecGroups != 0) copyVecTable(d, part, task.seq);
  const ProgramForm& form = d.forms[task.form];
  TaskBuffers bufs{reinterpret_cast<char*>(task.sendbuf), reinterpret_cast<char*>(task.recvbuf), form.scratch};
  uint64_t deadline = d.timeoutNs != 0 ? task.popNs + d.timeoutNs : 0;
  SpinBudget budget = budgetFor(env, bs, block, position);
  budget.stampData = env.timelineDepth != 0;
  BlockExecutor ex(d, form, part, ctx, bufs, budget, env.abortFlag, deadline, task.count);
  TryOutcome out = ex.run();
  const DataStamps stamps = ex.stamps();
  if (out.status != TryStatus::Done) clock.stale();
  progressed = progressed || out.progressed;
  yielded = out.yielded;

  if (out.status == TryStatus::Preempted) {
    // Lazy save: only a context this try moved ("dirty") is written back. Dirty is not
    // "progressed" (a primitive moved data, so the block is not idle): the first try marks the
    // submission started and a nop moves the step, both without data; a try that gave up at the
    // wait it was loaded at moves nothing and saves nothing (tests/unit/daemon/daemon_try_test.cpp).
    bool dirty = ctx.tile != loaded.tile || ctx.step != loaded.step || ctx.sub != loaded.sub ||
                 ctx.started != loaded.started;
    leaderUpdate([&] {
      bump(stats.contextLoads, 1);
      bump(stats.preemptions, 1);
      if (!loaded.started) bump(stats.queueWaitNs, elapsedNs(task.popNs, now));
      if (dirty) {
        *saved = ctx;
        bump(stats.contextSaves, 1);
      }
    });
    return false;
  }
  if (out.status == TryStatus::Failed) failCollective(d, part, task.seq, out.failCode);
  leaderUpdate([&] {
    bump(stats.contextLoads, 1);
    if (!loaded.started) bump(stats.queueWaitNs, elapsedNs(task.popNs, now));
    if (out.status == TryStatus::Done) bump(stats.executionNs, clock.fresh() - ctx.startNs);
    const uint64_t next = d.smallCount == 0 ? task.seq + 1 : nextOnPart(bs, task.collIndex, task.part, position, task.seq + 1);
    *saved = BlockContext{next, 0, 0, 0, 0, 0};
  });
  bool wroteCqe = false;
  if (finishTask(env, bs, d, block, task, out.status == TryStatus::Failed ? out.failCode : 0, wroteCqe)) clock.stale();
  if (env.timelineDepth != 0 && exec::isLeader())
    appendTimeline(*timelineOf(env, block), env.timelineDepth, task.collId, task.seq, task.popNs, ctx.startNs,
                   stamps.firstNs, stamps.lastNs, task.part | (static_cast<uint64_t>(wroteCqe ? kTimelineWroteCqe : 0) << 32));
  progressed = true;
  return true;
}

// Moves published entries of the block's queue (sourceOf: the SQ, or the relay) into the task
// queue while it has room: one task per part of the collective this block runs (daemonParts()).
// An entry whose parts do not fit, or that block 0 cannot relay yet, stays where it is until
// tasks finish. Returns true if any arrived.
// A block reports its cursor (BlockReport::sqNext) after an entry that asks for it and whenever
// its task queue is full (queues/sq.hpp): a producer that waits for room is then never left
// waiting for a block that has copied what it wants but is too busy to look at the SQ.
// A block given no part of an entry (its nParts) skips it without reading its CollDesc, so the
// host may reuse a deregistered collective's table index at once: the blocks that read it ran
// parts of its submissions, which had all completed before it could be deregistered.
OCCL_HD inline bool pollSubmissions(const DaemonEnv& env, BlockState& bs, int block, PassClock& clock) {
  bool any = false;
  bool full = false;
  while (!bs.exitSeen) {
    if (bs.nTasks >= bs.capacity) {
      full = true;
      break;
    }
    if (!exec::broadcastFromLeader([&] { return sourceOf(env, block).tryPop(bs.sqCursor, bs.incoming); })) break;
    const SqeView e = bs.incoming;
    exec::blockSync();  // every lane has its copy before the leader may overwrite `incoming`
    const uint32_t parts =
        (e.flags & kSqeExit) ? 0 : daemonParts(e.nParts, env.nBlocks, static_cast<uint32_t>(block));
    // The leader decides: it writes nTasks in insertTask below, and a lane still reading it here
    // would race with that write (there is no barrier between them otherwise).
    if (!exec::broadcastFromLeader([&] { return bs.nTasks + parts <= bs.capacity; })) {  // read again later
      full = true;
      break;
    }
    if (mustRelay(env, block, e) && !exec::broadcastFromLeader([&] { return relayEntry(env, bs, e); })) {
      full = true;  // a reader of the relay lags: this entry waits in the SQ
      break;
    }
    any = true;
    const CollDesc* d = parts != 0 ? env.colls.get(e.collIndex) : nullptr;
    const uint32_t form = (e.flags & kSqeSmall) ? kFormSmall : (e.flags & kSqeInPlace) ? kFormInPlace : kFormOutOfPlace;
    for (uint32_t i = 0; i < parts; ++i) {
      const uint32_t part = static_cast<uint32_t>(block) + i * env.nBlocks;
      const uint16_t gate = (e.flags & kSqeGated) ? kGateClosed : kGateNone;
      // An idle part of a collective whose parts skip submissions starts at this one (nextOnPart).
      if (d->smallCount != 0) leaderUpdate([&] { startIfIdle(bs, *d, e.collIndex, part, e.seq); });
      TaskEntry t{e.collIndex, env.policy.order == occlOrderPriority ? d->priority : 0, e.seq, e.sendbuf, e.recvbuf,
                  clock.now(), static_cast<uint16_t>(form), gate, static_cast<uint16_t>(part),
                  static_cast<uint16_t>((e.flags & kSqeBarrier) ? 1 : 0), d->collId, e.count};
      insertTask(bs, t, env.policy.order);
    }
    leaderUpdate([&] {
      if (e.flags & kSqeExit) bs.exitSeen = 1;
      bs.sqCursor += 1;
      bs.sqBlocked = 0;  // set again below if the poll stops at an entry it cannot take
      if (e.flags & kSqeReport) reportCursor(bs);
    });
  }
  if (full)
    leaderUpdate([&] {
      reportCursor(bs);
      bs.sqBlocked = 1;
    });
  return any;
}

OCCL_HD inline bool shouldPollSq(const DaemonEnv& env, const BlockState& bs) {
  if (bs.nTasks == 0 || bs.lastPassIdle) return true;
  if (env.policy.order == occlOrderPriority)
    return env.policy.priorityPollInterval == 0 || bs.tries % env.policy.priorityPollInterval == 0;
  return bs.passesSincePoll >= 64;  // FIFO: new work must not starve behind a slow collective
}

// The block has read the exit SQE and finished every task it took: it has nothing left to do.
OCCL_HD inline bool blockRetired(const BlockState& bs) { return bs.exitSeen != 0 && bs.nTasks == 0; }

// `clockNs`: a reading of the clock just taken by the caller (a helper's, host only), or 0.
OCCL_HD inline PassResult daemonPass(const DaemonEnv& env, int block, uint64_t clockNs = 0) {
  BlockState& bs = env.blocks[block];
  bool progressed = false;
  PassClock clock{clockNs};
  // The leader decides (it alone updates passesSincePoll, right below): lanes that decided
  // themselves took different branches once in a while and met at different barriers.
  if (exec::broadcastFromLeader([&] { return shouldPollSq(env, bs); })) {
    progressed = pollSubmissions(env, bs, block, clock);
    leaderUpdate([&] { bs.passesSincePoll = 0; });
  } else {
    leaderUpdate([&] { bs.passesSincePoll += 1; });
  }
  for (uint32_t i = 0; i < bs.nTasks;) {
    leaderUpdate([&] { bs.tries += 1; });
    bool yielded = false;
    if (tryTask(env, bs, block, i, progressed, yielded, clock)) removeTask(bs, i);
    else ++i;
    if (arrivalsMayGoAhead(env.policy)) {
      const bool arrived =
          (yielded || exec::broadcastFromLeader([&] { return shouldPollSq(env, bs); })) && pollSubmissions(env, bs, block, clock);
      progressed = progressed || arrived;
      if (arrived || yielded) i = 0;  // the front (perhaps a new arrival) goes first again
    }
  }
  leaderUpdate([&] { bs.lastPassIdle = progressed ? 0 : 1; });
  return {progressed, bs.nTasks != 0, blockRetired(bs)};
}

}  // namespace occl
