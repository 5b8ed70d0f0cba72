#include "submit.hpp"

#include <cstdio>

namespace occl::bench {

void Completion::arm(int expected) {
  firstError_.store(occlSuccess, std::memory_order_relaxed);
  pending_.store(expected, std::memory_order_seq_cst);
}

void Completion::callback(uint64_t, occlResult_t status, void* arg) {
  auto* self = static_cast<Completion*>(arg);
  if (status != occlSuccess) {
    occlResult_t none = occlSuccess;
    self->firstError_.compare_exchange_strong(none, status, std::memory_order_acq_rel);
  }
  if (self->pending_.fetch_sub(1, std::memory_order_seq_cst) != 1) return;
  if (self->sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(self->mu_);  // the waiter is in wait_for or about to be
    self->cv_.notify_all();
  }
}

void Completion::cancel(int n) { pending_.fetch_sub(n, std::memory_order_seq_cst); }

bool Completion::wait(std::chrono::milliseconds bound) {
  // Usually done already (occlCommWaitAll fired the callbacks): no lock, no clock.
  if (done()) return true;
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.store(true, std::memory_order_seq_cst);
  const bool ok = cv_.wait_for(lock, bound, [this] { return done(); });
  sleeping_.store(false, std::memory_order_relaxed);
  return ok;
}

RunStatus submitAndWait(occlComm_t comm, std::span<const Submission> parts, Completion& done,
                        std::chrono::milliseconds bound) {
  RunStatus status;
  const int n = static_cast<int>(parts.size());
  done.arm(n);
  for (int i = 0; i < n; ++i) {
    const Submission& p = parts[static_cast<size_t>(i)];
    const occlResult_t r = occlSubmit(comm, p.collId, p.send, p.recv, &Completion::callback, &done);
    if (r != occlSuccess) {
      status.error = std::string("occlSubmit: ") + occlGetErrorString(r) + ": " + occlGetLastError(comm);
      done.cancel(n - i);  // this part and the ones never submitted
      break;
    }
  }
  // Waits as a blocking caller does, in occlCommWaitAll (only this run is in flight on `comm`),
  // which lends this thread to the completion path; the callback is what says it is done.
  if (status.ok()) (void)occlCommWaitAll(comm, bound.count());
  if (!done.wait(bound)) {
    char message[160];
    std::snprintf(message, sizeof message, "no completion within %lld ms (callback lost or collective hung)",
                  static_cast<long long>(bound.count()));
    status.error = message;
    status.lost = true;
    return status;
  }
  if (status.ok() && done.firstError() != occlSuccess)
    status.error = std::string("collective completed with ") + occlGetErrorString(done.firstError()) + ": " +
                   occlGetLastError(comm);
  return status;
}

}  // namespace occl::bench
