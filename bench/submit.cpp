#include "submit.hpp"

#include <cstdio>

namespace occl::bench {

void Completion::arm(int expected) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ = expected;
  firstError_ = occlSuccess;
}

void Completion::callback(uint64_t, occlResult_t status, void* arg) {
  auto* self = static_cast<Completion*>(arg);
  std::lock_guard<std::mutex> lock(self->mu_);
  if (status != occlSuccess && self->firstError_ == occlSuccess) self->firstError_ = status;
  // Notify under the lock: the waiter may destroy the Completion as soon as it sees 0.
  if (--self->pending_ == 0) self->cv_.notify_all();
}

void Completion::cancel(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ -= n;
}

bool Completion::wait(std::chrono::milliseconds bound) {
  std::unique_lock<std::mutex> lock(mu_);
  // Usually done already (occlCommWaitAll fired the callbacks): wait_for would read the clock first.
  if (pending_ <= 0) return true;
  return cv_.wait_for(lock, bound, [this] { return pending_ <= 0; });
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
