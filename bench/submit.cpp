#include "submit.hpp"

#include <cstdio>
#include <exception>
#include <string_view>

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

namespace {

// Submits one part the way `path` says; the name of the call that failed, or nullptr.
const char* submitPart(occlComm_t comm, const Submission& p, Completion& done, const SubmitPath& path,
                       occlResult_t& r) {
  switch (path.mode) {
    case SubmitMode::Plain:
      r = occlSubmitCount(comm, p.collId, p.count, p.send, p.recv, &Completion::callback, &done);
      return r == occlSuccess ? nullptr : "occlSubmitCount";
    case SubmitMode::Gated: {
      occlGate_t gate{};
      r = occlSubmitGated(comm, p.collId, p.send, p.recv, &Completion::callback, &done, &gate);
      if (r != occlSuccess) return "occlSubmitGated";
      r = occlGateOpen(comm, gate);
      return r == occlSuccess ? nullptr : "occlGateOpen";  // submitted: its callback still fires
    }
    case SubmitMode::Stream:
      r = occlSubmitOnStream(comm, p.collId, p.send, p.recv, static_cast<struct CUstream_st*>(path.stream->handle()),
                             &Completion::callback, &done);
      return r == occlSuccess ? nullptr : "occlSubmitOnStream";
  }
  return nullptr;
}

}  // namespace

RunStatus submitAndWait(occlComm_t comm, std::span<const Submission> parts, Completion& done,
                        std::chrono::milliseconds bound, const SubmitPath& path) {
  RunStatus status;
  const int n = static_cast<int>(parts.size());
  done.arm(n);
  for (int i = 0; i < n; ++i) {
    occlResult_t r = occlSuccess;
    if (const char* call = submitPart(comm, parts[static_cast<size_t>(i)], done, path, r)) {
      status.error = std::string(call) + ": " + occlGetErrorString(r) + ": " + occlGetLastError(comm);
      // A gated part whose gate did not open is submitted and will not complete: its callback
      // comes only with the abort the caller does for a lost run.
      status.lost = std::string_view(call) == "occlGateOpen";
      if (status.lost) return status;
      done.cancel(n - i);  // this part and the ones never submitted
      break;
    }
  }
  // A stream-ordered run ends where the stream is released: the host waits for the stream first,
  // as a framework's next kernel would, and then for the callbacks.
  if (status.ok() && path.mode == SubmitMode::Stream) {
    try {
      path.stream->synchronize();
    } catch (const std::exception& e) {
      status.error = e.what();
      status.lost = true;
      return status;
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
