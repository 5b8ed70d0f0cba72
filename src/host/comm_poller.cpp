// The poller: takes CQEs from the completion queue and fires the callbacks of each collective
// in submission order, exactly once each. A CQE whose sequence bits do not fit the window of
// submissions in flight means a lost or duplicated completion: reported, never ignored. A thread
// in waitAll takes the poller's part while it waits (waitByPolling).
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "device/compat.hpp"
#include "host/comm.hpp"
#include "queues/cq.hpp"
#include "util/log.hpp"
#include "util/one_writer.hpp"

namespace occl::host {

namespace {
constexpr int64_t kIdleParkUs = 20000;
// How long a thread in waitAll goes on helping (waitByPolling) with nothing moving before it
// sleeps and leaves the work to the daemon's threads and the poller. Each idle look yields the
// core, so with more ranks than cores the threads being waited for still run.
constexpr int64_t kHelpSpinUs = 200;

// What fireInOrder takes of a Done slot before it frees it.
struct Fired {
  occlCallback_t fn;
  void* arg;
  uint32_t status;
  uint8_t generation;
};

// The communicator whose callbacks this thread fires: its poller's, or a thread's in waitAll
// while it does the poller's work. Not poller_.get_id(): join() writes that while another thread
// may be asking.
thread_local const Comm* tFiringFor = nullptr;

// A callback is a C function pointer: an exception must not cross it (occl.h). Should a C++
// one throw anyway, noexcept turns that into std::terminate here, before it could unwind a
// waiter through drainCq with cqMu_ held and the CQ half taken.
void fire(occlCallback_t fn, uint64_t collId, occlResult_t status, void* arg) noexcept { fn(collId, status, arg); }
}  // namespace

bool Comm::inCallback() const {
  return tFiringFor == this;
}

bool Comm::drainCq() {
  bool any = false;
  for (uint32_t ring = 0; ring < env_->cq.nRings; ++ring) {
    uint64_t word = 0;
    while (env_->cq.tryTake(ring, cqHeads_[ring], word)) {
      processCqe(word);
      cqHeads_[ring] += 1;
      any = true;
    }
  }
  return any;
}

void Comm::pollerLoop() {
  tFiringFor = this;
  for (;;) {
    bool any = false;
    {
      std::lock_guard<std::mutex> lock(cqMu_);
      any = drainCq();
    }
    if (any) continue;
    // The daemon is joined before stopPoller_ is set, so nothing can arrive after this check.
    if (stopPoller_.load(std::memory_order_acquire) && !env_->cq.anyWaiting()) return;
    if (pollingWaiters_.load(std::memory_order_seq_cst) > 0) {
      // A waiter takes the CQEs (waitByPolling); it rings pollerBell_ when it leaves with
      // callbacks still to fire. The bound re-checks the rest (shutdown, a waiter gone quietly).
      pollerBell_.park(1000, [&] { return pollingWaiters_.load(std::memory_order_seq_cst) == 0; });
      continue;
    }
    // Nothing outstanding: no CQE can come before the next submission, which wakes the poller
    // (its completion on the host backend, its notifySubmission on a kernel backend), so park
    // long and leave an idle communicator really idle.
    auto outstanding = [&] { return waits_.outstanding(); };
    backend_->waitForCompletion(outstanding() ? 1000 : kIdleParkUs, outstanding);
  }
}

void Comm::processCqe(uint64_t word) {
  const Cqe cqe = cqe::unpack(word);
  std::unique_lock<std::mutex> lock(registry_.indexMu());
  Collective* c = registry_.byIndex(cqe.collIndex);
  if (c == nullptr) {
    lock.unlock();
    errors_.setAsync(occlInternalError,
                     absl::StrFormat("completion for unregistered collective index %d", cqe.collIndex));
    return;
  }
  // Only this side's line and the slot: a submission that is not in flight has a slot that is
  // Free, Done (a CQE seen twice) or Armed for a later seq, which delta < window rules out.
  const uint64_t base = c->completedSeq();
  const uint64_t delta = (cqe.seqLow - base) & cqe::kSeqMask;
  const uint64_t seq = base + delta;
  CallbackSlot& slot = c->completionSlot(seq);
  if (delta >= c->completionWindow() || slot.state.load(std::memory_order_acquire) != SlotState::Armed) {
    uint64_t collId = c->collId();
    lock.unlock();
    errors_.setAsync(occlInternalError,
                     absl::StrFormat("collId 0x%x: completion of submission %d is lost or duplicated (next expected "
                                     "%d, %d in flight)",
                                     collId, seq, base, delta));
    return;
  }
  slot.status = cqe.status;
  slot.state.store(SlotState::Done, std::memory_order_relaxed);
  fireInOrder(cqe.collIndex, std::move(lock));
}

// What a failed completion means, for occlGetLastError: the CQE carries only the code.
std::string Comm::completionFailure(const Waiting& failed, occlResult_t status) {
  const uint64_t collId = failed.entry.key;
  const uint64_t seq = failed.seq;
  const std::string head = absl::StrFormat("collId 0x%x, submission %d: ", collId, seq);
  switch (status) {
    case occlInvalidUsage:
      return head + "ranks disagree on it: a peer registered this collId differently (type, count, datatype, op, "
                    "root, algorithm and connector geometry must match on every rank) or, with desc.variableCount, "
                    "submitted another count for this submission";
    case occlTimeout:
      return head + absl::StrFormat("did not complete within config.collTimeoutMs = %d ms (here, or on a peer "
                                    "whose timeout then failed it here): %s",
                                    config_.collTimeoutMs, describeWaits(failed));
    case occlRemoteError: {
      const std::string why = errors_.asyncWhy();
      return head + "a peer failed it" + (why.empty() ? "" : ": " + why);
    }
    case occlAborted: return head + (revoked() ? "the communicator was revoked" : "the communicator was aborted");
    default: return head + occlGetErrorString(status);
  }
}

// `lock` holds the registry's indexMu() for the first look (processCqe's); each later one takes it
// again.
void Comm::fireInOrder(uint32_t index, std::unique_lock<std::mutex> lock) {
  for (;;) {
    if (!lock.owns_lock()) lock.lock();
    Collective* c = registry_.byIndex(index);
    if (c == nullptr) return;
    CallbackSlot& slot = c->completionSlot(c->completedSeq());
    if (slot.state.load(std::memory_order_relaxed) != SlotState::Done) return;  // Done is this side's
    const Fired fired{slot.fn, slot.arg, slot.status, slot.generation};
    const uint64_t collId = c->collId();
    slot.state.store(SlotState::Free, std::memory_order_relaxed);
    const uint64_t seq = c->completedSeq();
    c->advanceCompleted();  // before the callback, so it may submit again
    addByOneWriter(tasksOut_, uint64_t{c->completionTasks()});
    // Whether the next submission's CQE came first. Slots are marked done under cqMu_ only,
    // which the caller holds throughout, so this cannot change during the callback: with
    // nothing more to fire the loop ends without taking indexMu() again.
    const bool more = c->completionSlot(c->completedSeq()).state.load(std::memory_order_relaxed) == SlotState::Done;
    const auto status = static_cast<occlResult_t>(fired.status);
    // Where this rank saw the failure, while the registry lock keeps the collective alive.
    const std::string place = status == occlSuccess ? std::string() : c->failurePlace(*backend_);
    std::optional<Waiting> failed;
    if (status != occlSuccess) failed = Waiting{boardEntry(*c), seq};
    lock.unlock();
    // Before the callback: a callback that asks occlGetLastError finds why.
    if (failed) {
      const std::string why = completionFailure(*failed, status) + place;
      logInfo(LogSubsys::Coll, absl::StrFormat("rank %d: %s: %s", rank_, occlGetErrorString(status), why));
      (void)record(Status::error(status, why));
    }
    if (fired.fn != nullptr) fire(fired.fn, collId, status, fired.arg);
    waits_.countOut(fired.generation);  // and wakes the threads in waitAll that sleep
    if (!more) return;
  }
}

// A thread that waits does the work it waits for where it can: it runs the daemon's passes
// (Backend::help, a one-block host daemon) and drains the CQ and fires the callbacks itself, where
// the poller would. A small collective then needs one runnable thread per rank instead of three
// taking turns, and its completion no futex wake-up of the poller nor of the waiter (~13 us each
// across cores here: occl-micro BM_HandoffDoorbell). It goes on while something moves and stops
// after kHelpSpinUs without progress (a peer that is late or gone): from there the daemon's
// threads and the poller take over and the waiter sleeps.
bool Comm::waitByPolling(int generation, std::optional<Clock::time_point> deadline,
                         std::optional<Clock::time_point> readAt) {
  // Set at the first look that finds work left: a wait that the first pass ends reads no clock.
  std::optional<Clock::time_point> lastMove;
  // A helped pass must be back by the waiter's deadline (its waits end there: executor.hpp).
  const uint64_t deadlineNs = deadline ? exec::steadyNs(*deadline) : 0;
  // The caller's reading serves the first pass only: later ones come after looks and yields.
  uint64_t clockNs = readAt ? exec::steadyNs(*readAt) : 0;
  const bool helping = backend_->canHelp();
  if (helping) backend_->beginHelp();
  pollingWaiters_.fetch_add(1, std::memory_order_seq_cst);
  bool done = false;
  for (;;) {
    bool moved = helping && backend_->help(deadlineNs, clockNs).progressed;
    clockNs = 0;
    if (cqMu_.try_lock()) {
      const Comm* outer = tFiringFor;
      tFiringFor = this;
      moved = drainCq() || moved;
      tFiringFor = outer;
      cqMu_.unlock();
    }
    done = waits_.pending(generation) == 0;
    if (done) break;
    const auto now = Clock::now();
    if (moved || !lastMove) lastMove = now;
    if (now - *lastMove >= std::chrono::microseconds(kHelpSpinUs)) break;
    if (deadline && now >= *deadline) break;
    if (!moved) countedYield(yieldWord_);
  }
  pollingWaiters_.fetch_sub(1, std::memory_order_seq_cst);
  // Work left, this waiter's or another thread's: the daemon's threads and the poller take it.
  const bool workLeft = waits_.outstanding();
  if (helping) backend_->endHelp(workLeft);
  if (workLeft) pollerBell_.ring();
  return done;
}

}  // namespace occl::host
