// The poller: takes CQEs from the completion queue and fires the callbacks of each collective
// in submission order, exactly once each. A CQE whose sequence bits do not fit the window of
// submissions in flight means a lost or duplicated completion: reported, never ignored.
#include <chrono>
#include <vector>

#include "absl/strings/str_format.h"
#include "host/comm.hpp"
#include "queues/cq.hpp"

namespace occl::host {

namespace {
constexpr int64_t kIdleParkUs = 20000;
}  // namespace

void Comm::pollerLoop() {
  uint64_t consumed = 0;
  std::vector<uint64_t> heads(env_->cq.nRings, 0);  // the next word of each block's ring
  for (;;) {
    bool any = false;
    for (uint32_t ring = 0; ring < env_->cq.nRings; ++ring) {
      uint64_t word = 0;
      while (env_->cq.tryTake(ring, heads[ring], word)) {
        processCqe(word);
        heads[ring] += 1;
        consumed += 1;
        any = true;
      }
    }
    if (any) continue;
    // The daemon is joined before stopPoller_ is set, so nothing can arrive after this check.
    if (stopPoller_.load(std::memory_order_acquire) && consumed == env_->cq.publishedCount()) return;
    // Nothing outstanding: no CQE can come before the next submission, whose completion rings
    // the poller awake anyway, so park long and leave an idle communicator really idle.
    const bool idle = firedTotal_.load(std::memory_order_acquire) == submittedTotal_.load(std::memory_order_acquire);
    backend_->waitForCompletion(consumed, idle ? kIdleParkUs : 1000);
  }
}

void Comm::processCqe(uint64_t word) {
  const Cqe cqe = cqe::unpack(word);
  std::unique_lock<std::mutex> lock(registryMu_);
  Collective* c = byIndex(cqe.collIndex);
  if (c == nullptr) {
    lock.unlock();
    setAsyncError(occlInternalError, absl::StrFormat("completion for unregistered collective index %d", cqe.collIndex));
    return;
  }
  const uint64_t base = c->completedSeq();
  const uint64_t delta = (cqe.seqLow - base) & cqe::kSeqMask;
  const uint64_t seq = base + delta;
  if (delta >= c->inFlight() || c->slotFor(seq).done) {
    uint64_t collId = c->collId();
    lock.unlock();
    setAsyncError(occlInternalError,
                  absl::StrFormat("collId 0x%x: completion of submission %d is lost or duplicated (next expected %d, "
                                  "%d in flight)",
                                  collId, seq, base, delta));
    return;
  }
  CallbackSlot& slot = c->slotFor(seq);
  slot.done = true;
  slot.status = cqe.status;
  lock.unlock();
  fireInOrder(cqe.collIndex);
}

// What a failed completion means, for occlGetLastError: the CQE carries only the code.
std::string Comm::completionFailure(uint64_t collId, uint64_t seq, occlResult_t status) const {
  const std::string head = absl::StrFormat("collId 0x%x, submission %d: ", collId, seq);
  switch (status) {
    case occlInvalidUsage:
      return head + "a peer registered this collId differently (type, count, datatype, op, root, algorithm and "
                    "connector geometry must match on every rank)";
    case occlTimeout:
      return head + absl::StrFormat("did not complete within config.collTimeoutMs = %d ms (here, or on a peer "
                                    "whose timeout then failed it here)",
                                    config_.collTimeoutMs);
    case occlRemoteError: {
      std::lock_guard<std::mutex> error(errorMu_);
      return head + "a peer failed it" + (asyncWhy_.empty() ? "" : ": " + asyncWhy_);
    }
    case occlAborted: return head + "the communicator was aborted";
    default: return head + occlGetErrorString(status);
  }
}

void Comm::fireInOrder(uint32_t index) {
  for (;;) {
    std::unique_lock<std::mutex> lock(registryMu_);
    Collective* c = byIndex(index);
    if (c == nullptr) return;
    CallbackSlot& slot = c->slotFor(c->completedSeq());
    if (c->inFlight() == 0 || !slot.done) return;
    const CallbackSlot fired = slot;
    const uint64_t collId = c->collId();
    slot = CallbackSlot{};
    const uint64_t seq = c->completedSeq();
    c->advanceCompleted();  // before the callback, so it may submit again
    queuedTasks_.fetch_sub(c->tasksPerSubmission(), std::memory_order_acq_rel);
    lock.unlock();
    const auto status = static_cast<occlResult_t>(fired.status);
    // Before the callback: a callback that asks occlGetLastError finds why.
    if (status != occlSuccess) (void)record(Status::error(status, completionFailure(collId, seq, status)));
    if (fired.fn != nullptr) fired.fn(collId, status, fired.arg);
    // seq_cst with waitAll's increment of waiters_ and its read of firedTotal_: with weaker orders
    // both sides may read the old value, and the waiter sleeps through its wake-up.
    firedTotal_.fetch_add(1, std::memory_order_seq_cst);
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> wake(waitMu_);
      waitCv_.notify_all();
    }
  }
}

Status Comm::waitAll(int64_t timeoutMs) {
  if (onPollerThread())
    return Status::error(occlInvalidUsage, "occlCommWaitAll called from a callback: it would wait for itself");
  if (timeoutMs > OCCL_MAX_TIMEOUT_MS) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("timeoutMs = %d: expected < 0 (no bound) or 0..%d (OCCL_MAX_TIMEOUT_MS)",
                                         timeoutMs, OCCL_MAX_TIMEOUT_MS));
  }
  const uint64_t target = submittedTotal_.load(std::memory_order_acquire);
  auto done = [&] { return firedTotal_.load(std::memory_order_seq_cst) >= target; };
  if (done()) return Status::success();
  waiters_.fetch_add(1, std::memory_order_seq_cst);
  std::unique_lock<std::mutex> lock(waitMu_);
  bool ok = true;
  if (timeoutMs < 0) {
    waitCv_.wait(lock, done);
  } else {
    ok = waitCv_.wait_for(lock, std::chrono::milliseconds(timeoutMs), done);
  }
  waiters_.fetch_sub(1);
  if (ok) return Status::success();
  return Status::error(occlTimeout, absl::StrFormat("rank %d: %d of %d submissions still pending after %d ms", rank_,
                                                    target - firedTotal_.load(), target, timeoutMs));
}

}  // namespace occl::host
