// Waiting: occlCommWaitAll waits until every submission made before it has fired its callback
// (the generations of host/wait_generations.hpp), first by doing the poller's and the daemon's
// work itself (waitByPolling, comm_poller.cpp), then asleep.
#include <chrono>
#include <mutex>
#include <optional>

#include "absl/strings/str_format.h"
#include "host/comm.hpp"

namespace occl::host {

Status Comm::waitAll(int64_t timeoutMs) {
  if (inCallback())
    return Status::error(occlInvalidUsage, "occlCommWaitAll called from a callback: it would wait for itself");
  if (timeoutMs > OCCL_MAX_TIMEOUT_MS) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("timeoutMs = %d: expected < 0 (no bound) or 0..%d (OCCL_MAX_TIMEOUT_MS)",
                                         timeoutMs, OCCL_MAX_TIMEOUT_MS));
  }
  // Both generations drained: every submission made so far has fired (no lock, no clock).
  if (waits_.pending(0) == 0 && waits_.pending(1) == 0) return Status::success();
  std::optional<Clock::time_point> readAt, deadline;
  if (timeoutMs >= 0) {
    readAt = Clock::now();
    deadline = *readAt + std::chrono::milliseconds(timeoutMs);
  }
  for (;;) {
    const std::optional<WaitGenerations::Turn> turn = waits_.take();
    if (!turn) continue;  // another wait started the other generation first: look again
    if (!waitForGeneration(turn->generation, deadline, readAt)) {
      return Status::error(occlTimeout,
                           absl::StrFormat("rank %d: %d submissions still pending after %d ms", rank_,
                                           waits_.pending(0) + waits_.pending(1), timeoutMs));
    }
    if (!turn->earlier) return Status::success();
    // An earlier wait's generation drained: this wait now starts its own.
    readAt.reset();  // the first helped pass's reading is stale by now
  }
}

bool Comm::waitForGeneration(int generation, std::optional<Clock::time_point> deadline,
                             std::optional<Clock::time_point> readAt) {
  if (waits_.drained(generation)) return true;
  if (waitByPolling(generation, deadline, readAt)) return true;
  return waits_.sleepUntil(generation, deadline);
}

// A callback runs, and is counted out after it returns, under cqMu_ (comm_poller.cpp): taking it
// waits for one that is running. Without it a caller that saw a callback run (it set a flag there)
// could read the count before that callback's count-out and find its submission pending.
uint64_t Comm::pendingSubmissions() {
  std::lock_guard<std::mutex> settled(cqMu_);
  return waits_.unfired();
}

}  // namespace occl::host
