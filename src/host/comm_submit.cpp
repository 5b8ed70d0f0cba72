// Submission: a registered collective's submission checked (its buffers, its window, the task
// queues' room), then, once the SQ has room for it, its callback put in place and its SQE pushed,
// all under the submit lock; a group's submissions all checked, then pushed under one lock with
// one doorbell.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "device/gate.hpp"
#include "host/comm.hpp"
#include "memory/shared_buffers.hpp"

namespace occl::host {
namespace {

// Spin, then yield, then sleep: the SQ is full only while the daemon catches up.
void backoff(int attempt) {
  if (attempt < 64) return;
  if (attempt < 256) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// Buffers that validateBuffers passes at its first looks: both given, no occlMemAlloc memory
// asked for, and in place or disjoint.
bool buffersPlainlyValid(const Collective& c, const Collective::BufferExtents& x, const void* sendbuf,
                         const void* recvbuf, bool inPlace) {
  if (sendbuf == nullptr || recvbuf == nullptr || c.sharedBuffers()) return false;
  const auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
  return inPlace || s + x.sendBytes <= r || r + x.recvBytes <= s;
}

// A check that fails: its reason into the caller's `error`.
bool failWith(Status& error, Status reason) {
  error = std::move(reason);
  return false;
}

}  // namespace

Status Comm::waitForSqRoom(uint32_t n, bool exitRequest) {
  // The clock starts at the first full SQ: a push that fits reads no clock (one read costs about
  // as much as the push itself).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.initTimeoutMs);
  for (int attempt = 0;; ++attempt) {
    if (atomics::loadAcquire(env_->hostAbortFlag) != 0 && !exitRequest)
      return Status::error(occlAborted, "the communicator was aborted");
    if (std::chrono::steady_clock::now() > deadline)
      return Status::error(occlTimeout, "the submission queue stayed full: is the daemon running?");
    backend_->notifySubmission();
    backoff(attempt);
    if (env_->sq.hasRoom(sqTicket_, n, sqLimit_)) return Status::success();
  }
}

void Comm::writeSqes(const SqeView* e, uint32_t n) {
  // A copy: the SQ's stores may alias its fields where it lives (DaemonEnv).
  const SubmissionQueue sq = env_->sq;
  sq.writeAll(sqTicket_, e, n, sqLimit_);
  sqTicket_ += n;
}

Status Comm::pushSqe(const SqeView& e) {
  if (!sqHasRoom(1))
    if (Status s = waitForSqRoom(1, (e.flags & kSqeExit) != 0); !s.ok()) return s;
  writeSqe(e);
  return Status::success();
}

Status Comm::checkSharedBuffers(const Collective& c, const void* sendbuf, uint64_t sendBytes, const void* recvbuf,
                                uint64_t recvBytes) const {
  if (!c.sharedBuffers()) return Status::success();  // the peer programs map them in other processes
  Collective::BuffersSeen& seen = c.sharedBuffersSeen();
  const uint64_t releases = memory::releases();
  // The last buffers that passed pass again while nothing was freed; a v-collective's extents
  // change with its counts, so it looks every time.
  if (seen.valid && seen.send == sendbuf && seen.recv == recvbuf && seen.releases == releases && !c.vectorCounts())
    return Status::success();
  for (auto [name, buf, bytes] : {std::tuple{"sendbuf", sendbuf, sendBytes}, std::tuple{"recvbuf", recvbuf, recvBytes}}) {
    if (bytes > 0 && memory::describe(buf, bytes).inode == 0)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s of collId 0x%x is not memory from occlMemAlloc holding its %d bytes; "
                                           "the collective was registered with desc.sharedBuffers = 1",
                                           name, c.collId(), bytes));
  }
  seen = {true, sendbuf, recvbuf, releases};
  return Status::success();
}

Status Comm::validateBuffers(const Collective& c, const Collective::BufferExtents& x, const void* sendbuf,
                             const void* recvbuf, bool inPlace) const {
  if (x.sendBytes > 0 && sendbuf == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("sendbuf is NULL for collId 0x%x", c.collId()));
  if (x.recvBytes > 0 && recvbuf == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("recvbuf is NULL for collId 0x%x", c.collId()));
  if (Status s = checkSharedBuffers(c, sendbuf, x.sendBytes, recvbuf, x.recvBytes); !s.ok()) return s;
  if (sendbuf == nullptr || recvbuf == nullptr || inPlace) return Status::success();  // in place: the only overlap allowed
  const auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
  if (s + x.sendBytes <= r || r + x.recvBytes <= s) return Status::success();  // disjoint
  const int type = c.userDesc().type;
  return Status::error(occlInvalidArgument,
                       absl::StrFormat("sendbuf and recvbuf of collId 0x%x overlap but are not in place (%s in-place "
                                       "means %s)",
                                       c.collId(), collTypeName(type), inPlaceRuleText(type)));
}

inline bool Comm::inPlace(const Collective::BufferExtents& x, const void* sendbuf, const void* recvbuf) {
  if (!x.inPlaceDefined || sendbuf == nullptr || recvbuf == nullptr) return false;  // e.g. AllToAll: NCCL has none
  return reinterpret_cast<uintptr_t>(recvbuf) - reinterpret_cast<uintptr_t>(sendbuf) == x.inPlaceShift;
}

Status Comm::checkCount(const Collective& c, uint64_t count, bool inPlace) const {
  const uint64_t registered = c.registeredCount();
  if (!c.variableCount()) {
    if (count == registered) return Status::success();
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("count = %d: collId 0x%x was registered with count %d and no "
                                         "desc.variableCount, so every submission has that count",
                                         count, c.collId(), registered));
  }
  if (count > registered)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("count = %d: collId 0x%x takes at most the count it was registered with, %d",
                                         count, c.collId(), registered));
  const uint32_t form = c.runsSmall(count) ? kFormSmall : inPlace ? kFormInPlace : kFormOutOfPlace;
  const uint64_t nChunks = c.chunksPerLoop(form);
  if (!c.countSplits(count, form))
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("count = %d: collId 0x%x runs algorithm %s, whose %d chunks must be equal, and "
                                         "%d elements do not split into them",
                                         count, c.collId(), c.algorithmName(form), nChunks, count * c.countMultiplier()));
  return Status::success();
}

inline bool Comm::passesAtFirstLook(Collective& c, uint64_t count, const void* sendbuf, const void* recvbuf,
                                    Checked& out) const {
  if (c.vectorCounts() || c.variableCount() || (count != OCCL_COUNT_REGISTERED && count != c.registeredCount()))
    return false;
  const Collective::BufferExtents x = c.extentsFor(c.registeredCount());
  const bool inPlaceCall = inPlace(x, sendbuf, recvbuf);
  if (!buffersPlainlyValid(c, x, sendbuf, recvbuf, inPlaceCall) || checksUserBuffers_ ||
      !c.windowFits(uint64_t{c.groupScratch()} + 1))
    return false;
  out = Checked{&c, c.registeredCount(), inPlaceCall};
  return true;
}

bool Comm::checkEntryFully(Collective* found, uint64_t collId, uint64_t count, const void* sendbuf,
                           const void* recvbuf, const occlVectors_t* vectors, Checked& out, Status& error) {
  if (found == nullptr)
    return failWith(error, Status::error(occlInvalidArgument,
                                         absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_)));
  Collective& c = *found;
  const uint32_t earlierInGroup = c.groupScratch();
  if (count == OCCL_COUNT_REGISTERED) count = c.registeredCount();
  if (c.vectorCounts() != (vectors != nullptr))
    return failWith(error, Status::error(occlInvalidUsage,
                         c.vectorCounts()
                             ? absl::StrFormat("collId 0x%x is a v-collective (desc.vectorCounts): submit it with "
                                               "occlSubmitV, which gives its blocks",
                                               collId)
                             : absl::StrFormat("occlSubmitV: collId 0x%x was registered without desc.vectorCounts; "
                                               "submit it with occlSubmit or occlSubmitCount",
                                               collId)));
  out = Checked{found, count, false};
  uint64_t sendBytes = 0, recvBytes = 0;
  if (vectors != nullptr) {
    if (Status s = vecLayout(c.vecShape(), vectors, sendbuf, recvbuf, vecScratch_); !s.ok())
      return failWith(error, std::move(s));
    const uint64_t eb = c.vecShape().elemBytes;
    sendBytes = vecScratch_.sendElems * eb;
    recvBytes = vecScratch_.recvElems * eb;
    if (Status s = checkSharedBuffers(c, sendbuf, sendBytes, recvbuf, recvBytes); !s.ok())
      return failWith(error, std::move(s));
    out.inPlace = vecScratch_.inPlace;
  } else {
    const Collective::BufferExtents extents = c.extentsFor(count);
    out.inPlace = inPlace(extents, sendbuf, recvbuf);
    // The usual submission (its registered count, two buffers apart or in place) passes the
    // first looks of checkCount and validateBuffers, made here without a call or a Status.
    if (c.variableCount() || count != c.registeredCount())
      if (Status s = checkCount(c, count, out.inPlace); !s.ok()) return failWith(error, std::move(s));
    if (!buffersPlainlyValid(c, extents, sendbuf, recvbuf, out.inPlace))
      if (Status s = validateBuffers(c, extents, sendbuf, recvbuf, out.inPlace); !s.ok())
        return failWith(error, std::move(s));
    sendBytes = extents.sendBytes;
    recvBytes = extents.recvBytes;
  }
  if (checksUserBuffers_)
    if (Status s = backend_->checkUserBuffers(sendbuf, sendBytes, recvbuf, recvBytes); !s.ok())
      return failWith(error, std::move(s));
  if (!c.windowFits(uint64_t{earlierInGroup} + 1)) {
    if (earlierInGroup == 0)
      return failWith(error, Status::error(occlInProgress,
                                           absl::StrFormat("collId 0x%x already has %d submissions in flight "
                                                           "(config.maxInflightPerColl); submit again after a callback",
                                                           collId, c.window())));
    return failWith(error, Status::error(occlInProgress,
                                         absl::StrFormat("collId 0x%x has %d submissions in flight and %d earlier in "
                                                         "this group, its window is %d (config.maxInflightPerColl)",
                                                         collId, c.inFlight(), earlierInGroup, c.window())));
  }
  return true;
}

inline bool Comm::checkEntry(Collective* found, uint64_t collId, uint64_t count, const void* sendbuf,
                             const void* recvbuf, const occlVectors_t* vectors, Checked& out, Status& error) {
  if (found != nullptr && vectors == nullptr && passesAtFirstLook(*found, count, sendbuf, recvbuf, out)) return true;
  return checkEntryFully(found, collId, count, sendbuf, recvbuf, vectors, out, error);
}

Status Comm::checkTaskRoom(uint64_t tasks) const {
  // A block that cannot take an SQE stops reading the SQ, and a collective a peer waits on may be
  // behind it: so what is outstanding must always fit every block's task queue.
  if (queuedTasks() + tasks <= static_cast<uint64_t>(config_.taskQueueDepth)) return Status::success();
  return Status::error(occlInProgress,
                       absl::StrFormat("%d submissions are outstanding, %d task-queue entries of "
                                       "config.taskQueueDepth = %d; submit again after a callback",
                                       waits_.unfired(std::memory_order_seq_cst), queuedTasks(),
                                       config_.taskQueueDepth));
}

[[gnu::always_inline]] inline void Comm::prepareEntry(const Checked& entry, const void* sendbuf, void* recvbuf,
                                                      occlCallback_t callback, void* arg, Start start, int generation,
                                                      SqeView& out) {
  Collective& c = *entry.coll;
  const uint64_t seq = c.nextSeq();
  // The callback is in place before the SQE exists, so a fast completion always finds it: the
  // release of Armed publishes it to the thread that takes the CQE (CallbackSlot). The slot is
  // free: its last submission completed (advanceCompleted, a release that windowFits acquired, in
  // checkEntry or in an earlier submission's under the same lock), and until it reads Armed the
  // completion side reads nothing else of it. The SQ has room for the SQE (the caller waited for
  // it first), so the submission goes out once prepared: nothing here is ever taken back.
  // A stream opens its gate itself: occlGateOpen refuses it (kGateOpen).
  const uint8_t gate = start == Start::Now ? kGateNone : start == Start::AtGate ? kGateClosed : kGateOpen;
  CallbackSlot& slot = c.slotFor(seq);
  slot.fn = callback;
  slot.arg = arg;
  slot.status = 0;
  slot.generation = static_cast<uint8_t>(generation);
  slot.gate = gate;
  slot.state.store(SlotState::Armed, std::memory_order_release);
  // A v-collective's blocks, like the callback, are in place before the SQE that names them.
  if (c.vectorCounts()) c.writeVecTable(seq, vecScratch_.blocks);  // checkEntry's, under the same lock
  // A variable count's small submission runs the small form, on its parts alone.
  // A change between it and the large form waits for the earlier submissions (CollShared::doneThrough).
  const bool small = c.variableCount() && c.runsSmall(entry.count);
  const bool barrier = c.hasSmallForm() && c.changesForm(small);
  const uint16_t flags =
      static_cast<uint16_t>((entry.inPlace ? kSqeInPlace : kSqeSubmit) | (start == Start::Now ? 0 : kSqeGated) |
                            (small ? kSqeSmall : 0) | (barrier ? kSqeBarrier : 0));
  c.noteSubmitted();
  out = SqeView{flags, small ? c.smallParts() : c.nParts(), c.index(), seq, reinterpret_cast<uint64_t>(sendbuf),
                reinterpret_cast<uint64_t>(recvbuf), c.variableCount() ? entry.count : 0};
}

Status Comm::submitEntry(uint64_t collId, uint64_t count, const void* sendbuf, void* recvbuf, occlCallback_t callback,
                         void* arg, Start start, void* stream, uint64_t* seqOut, const occlVectors_t* vectors) {
  std::unique_lock<std::mutex> lock(submitMu_, std::defer_lock);
  if (Status s = lockForSubmission(lock); !s.ok()) return s;
  Checked checked;
  Status error;
  if (!checkEntry(registry_.find(collId), collId, count, sendbuf, recvbuf, vectors, checked, error)) return error;
  const uint64_t tasks = checked.coll->tasksPerSubmission();
  if (Status s = checkTaskRoom(tasks); !s.ok()) return s;
  if (!sqHasRoom(1))  // the usual case, without a Status; else a bounded wait for room
    if (Status s = waitForSqRoom(1, /*exitRequest=*/false); !s.ok()) return s;
  const int generation = waits_.current();  // read once: see WaitGenerations::countIn
  addSubmitted(1, tasks, generation);
  SqeView e;
  prepareEntry(checked, sendbuf, recvbuf, callback, arg, start, generation, e);
  writeSqe(e);
  const uint64_t seq = e.seq;
  if (seqOut != nullptr) *seqOut = seq;
  if (start == Start::OnStream) {
    // Under the submit lock, so one stream's submissions open in their submission order. The SQE
    // is out: were its gate never opened, only an abort would fail it, so a stream that cannot
    // take the gate (checkStream passed, so the driver itself refused) aborts the communicator.
    Collective& coll = *checked.coll;
    if (Status s = backend_->enqueueGate(stream, coll.gateOpenWord(seq), coll.gateDoneWord(seq), gateValue(seq));
        !s.ok()) {
      lock.unlock();
      const Status failed = s.withContext("occlSubmitOnStream: the submission was queued but its stream refused "
                                          "the gate, so the communicator is aborted");
      errors_.setAsync(failed.code, failed.message);
      raiseAbort(failed.code, /*keepFirst=*/true);
      backend_->notifySubmission();
      return failed;
    }
  }
  lock.unlock();
  backend_->notifySubmission();
  return Status::success();
}

Status Comm::submitGroup(std::span<const occlSubmission_t> subs, int* submitted) {
  if (submitted != nullptr) *submitted = 0;
  std::unique_lock<std::mutex> lock(submitMu_, std::defer_lock);
  if (Status s = lockForSubmission(lock); !s.ok() || subs.empty()) return s;
  // Every entry is checked before any is queued. Each collective counts its entries checked so
  // far (Collective::groupScratch), so that a collId listed several times fits its window.
  std::vector<Checked>& checks = groupChecks_;
  checks.resize(subs.size());
  uint64_t tasks = 0;
  Status bad;
  size_t checked = 0;
  // Each entry's collective is looked up one entry ahead and its line asked for, so that the
  // look-up's chain of loads overlaps the checks of the entry before.
  Collective* next = registry_.find(subs[0].collId);
  for (; checked < subs.size(); ++checked) {
    const occlSubmission_t& e = subs[checked];
    Collective* found = next;
    if (checked + 1 < subs.size()) {
      next = registry_.find(subs[checked + 1].collId);
      if (next != nullptr) next->prefetchLine();
    }
    if (!checkEntry(found, e.collId, e.count, e.sendbuf, e.recvbuf, nullptr, checks[checked], bad)) {
      bad = bad.withContext(absl::StrFormat("subs[%d] of %d", checked, subs.size()));
      break;
    }
    Collective& c = *checks[checked].coll;
    // The entry's callback slot is a line the completion side wrote last (Done, then Free), on
    // another core when the poller runs on its own thread: asked for now, it has arrived by the
    // time prepareEntry arms it (a group of 32 at 8 B: 49 -> 40 ns an entry with the daemon and
    // the poller on their own threads; +0.5 ns with the caller's thread running them).
    __builtin_prefetch(&c.slotFor(c.nextSeq() + c.groupScratch()), 1);
    c.groupScratch() += 1;
    tasks += c.tasksPerSubmission();
  }
  for (size_t i = 0; i < checked; ++i) checks[i].coll->groupScratch() = 0;
  if (!bad.ok()) return bad;
  if (Status s = checkTaskRoom(tasks); !s.ok())
    return s.withContext(absl::StrFormat("a group of %d submissions needs %d task-queue entries", subs.size(), tasks));
  // The whole group is counted in at once, in one generation (counted in part by part, a wait
  // that started between two parts could miss the later ones), and what a failed wait for room
  // leaves unqueued is counted back. It goes into the SQ in parts of at most half its depth
  // (the daemon need not drain the whole SQ before a group goes in): room for a part, then the
  // part's entries prepared (callback slots, counts, SQEs), then its SQEs written, the first last
  // (SubmissionQueue::hasRoom; writing each SQE as it was prepared took 2 ns more an entry).
  const int generation = waits_.current();
  addSubmitted(subs.size(), tasks, generation);
  const size_t most = std::max<size_t>(env_->sq.depth / 2, 1);
  std::vector<SqeView>& sqes = groupSqes_;
  sqes.resize(subs.size());
  for (size_t first = 0; first < subs.size();) {
    const auto part = static_cast<uint32_t>(std::min(subs.size() - first, most));
    if (!sqHasRoom(part))
      if (Status s = waitForSqRoom(part, /*exitRequest=*/false); !s.ok()) {
        uint64_t unqueuedTasks = 0;
        for (size_t i = first; i < subs.size(); ++i) unqueuedTasks += checks[i].coll->tasksPerSubmission();
        countBackSubmitted(subs.size() - first, unqueuedTasks, generation);
        if (submitted != nullptr) *submitted = static_cast<int>(first);
        lock.unlock();
        if (first > 0) backend_->notifySubmission();  // the ones queued run (or fail) as submitted
        return s.withContext(absl::StrFormat("subs[%d] of %d, after %d were queued", first, subs.size(), first));
      }
    for (size_t i = first; i < first + part; ++i) {
      const occlSubmission_t& e = subs[i];
      prepareEntry(checks[i], e.sendbuf, e.recvbuf, e.callback, e.arg, Start::Now, generation, sqes[i]);
    }
    writeSqes(&sqes[first], part);
    first += part;
  }
  if (submitted != nullptr) *submitted = static_cast<int>(subs.size());
  lock.unlock();
  backend_->notifySubmission();  // one doorbell for the group
  return Status::success();
}

}  // namespace occl::host
