#include "backend/kernel_backend.hpp"

#include <sys/prctl.h>

#include <algorithm>
#include <cstdio>
#include <thread>
#include <utility>

#include "absl/strings/str_format.h"

namespace occl::backend {
namespace {

// A block with tasks that cannot progress quits after this many idle periods, at least
// kMinStuckQuitUs: long enough that a slow peer is not mistaken for a deadlock, short enough
// that a cudaDeviceSynchronize elsewhere waits only this long for the daemon (Fig. 1(c)).
constexpr int64_t kStuckQuitFactor = 10;
constexpr int64_t kMinStuckQuitUs = 5000;
// After a launch that quit stuck without completing anything, the next launch waits this long,
// doubling up to the stuck-quit time, so the device gets idle windows instead of a busy loop.
constexpr int64_t kFirstRelaunchDelayUs = 200;
// With submissions outstanding the poller yields for kPollSpinUs after a completion (completions
// often come in bursts), then sleeps in steps (PollSteps).
constexpr int64_t kPollSpinUs = 50;
// stop() waits this long for the kernel to read the exit SQE and drain.
constexpr int64_t kStopTimeoutMs = 30000;

int64_t usSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

KernelBackend::KernelBackend(const occlConfig_t& config, std::string where, PollSteps steps)
    : where_(std::move(where)),
      nBlocks_(config.daemonBlocks > 0 ? config.daemonBlocks : 1),
      idleQuitUs_(config.idleQuitUs),
      stuckQuitUs_(std::max<int64_t>(kStuckQuitFactor * config.idleQuitUs, kMinStuckQuitUs)),
      steps_(steps) {}

void KernelBackend::setLaunchWords(uint64_t* quitWord, uint32_t* endedEpoch) {
  quitWord_ = quitWord;
  endedEpoch_ = endedEpoch;
}

bool KernelBackend::kernelMayStillRun() {
  std::lock_guard<std::mutex> lock(launchMu_);
  return stopTimedOut_;
}

Status KernelBackend::start(DaemonEnv* env) {
  if (env->nBlocks != static_cast<uint32_t>(nBlocks_))
    return Status::error(occlInternalError, absl::StrFormat("daemon environment has %d blocks, the %s backend was "
                                                            "sized for %d",
                                                            env->nBlocks, name(), nBlocks_));
  std::lock_guard<std::mutex> lock(launchMu_);
  env_ = env;
  envCopy_ = *env;
  return Status::success();  // event-driven: the first SQE launches the kernel
}

// The latest launch has sealed its quit vote (or there was none): it reads no further SQEs.
bool KernelBackend::launchOver() const {
  return !everLaunched_ || atomics::loadAcquire(endedEpoch_) == epoch_;
}

// Meaningful once the launch is over: SQEs no block has read (where the daemon fans out, blocks
// other than 0 read what block 0 relayed, daemon.hpp), or tasks a block still holds.
KernelBackend::Work KernelBackend::pendingWork() const {
  const uint64_t published = env_->sq.publishedCount();
  const BlockReport* reports = env_->sq.reports;
  const uint64_t relayed = env_->fanOut != 0 ? atomics::loadAcquire(&reports[0].relayed) : published;
  Work work = Work::None;
  for (uint32_t b = 0; b < env_->nBlocks; ++b) {
    const BlockReport& report = reports[b];
    if (atomics::loadAcquire(&report.sqNext) < (b == 0 ? published : relayed)) return Work::Unread;
    if (atomics::loadAcquire(&report.held) != 0) work = Work::Queued;
  }
  return work;
}

// Decides, once per launch, how soon the next one may follow: at once after a launch that
// completed something, later and later after launches that only sat stuck.
void KernelBackend::noteLaunchEnded() {
  if (endNoted_) return;
  endNoted_ = true;
  endedAt_ = Clock::now();
  if (env_->cq.reportedCount() != cqAtLaunch_) {
    relaunchDelayUs_ = 0;
  } else {
    relaunchDelayUs_ = std::min(relaunchDelayUs_ == 0 ? kFirstRelaunchDelayUs : 2 * relaunchDelayUs_, stuckQuitUs_);
  }
}

bool KernelBackend::relaunchDue() const { return usSince(endedAt_) >= relaunchDelayUs_; }

Status KernelBackend::launch() {
  DaemonLaunch l{quitWord_, endedEpoch_, epoch_ + 1, 0,
                 QuitLimits{static_cast<uint64_t>(idleQuitUs_) * 1000, static_cast<uint64_t>(stuckQuitUs_) * 1000}};
  const uint64_t cq = env_->cq.reportedCount();
  if (Status s = launchKernel(envCopy_, l); !s.ok()) return s;
  epoch_ = l.epoch;
  everLaunched_ = true;
  endNoted_ = false;
  cqAtLaunch_ = cq;
  return Status::success();
}

// Unread SQEs launch at once (a submission raced with the quit vote); tasks left by a launch
// that quit stuck wait for the relaunch delay.
void KernelBackend::relaunchIfNeeded(bool honourDelay) {
  if (!fatal_.ok() || env_ == nullptr || !launchOver()) return;
  if (everLaunched_) noteLaunchEnded();
  const Work work = pendingWork();
  if (work == Work::None) return;
  if (work == Work::Queued && honourDelay && !relaunchDue()) return;
  if (Status s = launch(); !s.ok()) fail(s);
}

// A kernel that faults never seals its vote; only the launch order tells.
void KernelBackend::checkKernelHealth() {
  if (!everLaunched_ || !fatal_.ok()) return;
  if (Status s = kernelHealth(); !s.ok()) fail(s);
}

// Unrecoverable: no more launches, and the host's abort flag makes new submissions fail fast.
void KernelBackend::fail(const Status& s) {
  if (!fatal_.ok()) return;
  fatal_ = s;
  std::fprintf(stderr, "occl: %s backend on %s stopped: %s\n", name(), where_.c_str(), s.message.c_str());
  // A kernel that did not stop in time may still run: the daemon's copy of the flag tells it to
  // fail what it holds. Best effort: after a fault the copy fails too, and nothing runs to read it.
  if (env_ != nullptr) (void)raiseAbort(*env_, static_cast<uint32_t>(occlUnhandledCudaError), /*keepFirst=*/true);
}

// A new SQE is new information (it may be what the queued tasks wait for): no relaunch delay.
// It also wakes a poller parked with nothing outstanding (waitForCompletion).
void KernelBackend::notifySubmission() {
  {
    std::lock_guard<std::mutex> lock(launchMu_);
    if (!stopped_) relaunchIfNeeded(/*honourDelay=*/false);
  }
  (void)submitted_.ring();
}

namespace {
// A sleep of a few microseconds takes that long, not the 50 us of slack Linux gives a thread by
// default. The poller is occl's own thread: nothing else of the application's runs on it.
void shortSleepsOnThisThread() {
#if defined(__linux__)
  thread_local bool lowered = false;
  if (!lowered) {
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // 1 us
    lowered = true;
  }
#endif
}
}  // namespace

// A GPU cannot ring a futex, so the poller polls the CQ. With nothing outstanding it parks until
// a submission or stop() rings it, or timeoutUs passes: an idle communicator costs no wake-ups.
// With submissions outstanding it yields for kPollSpinUs after the last completion it saw, then
// sleeps a `divisor`-th of the time since that completion (its own or a waiter's), within
// [minStepUs, maxStepUs]: a completion is seen within that share of the collective's time (a
// 1 ms collective on the GPU: ~62 us; a short one: minStepUs), for a number of wake-ups that
// grows with the log of the wait, not with its length. Each round also relaunches a daemon that
// quit with work left.
void KernelBackend::waitForCompletion(int64_t timeoutUs, absl::FunctionRef<bool()> outstanding) {
  shortSleepsOnThisThread();
  const auto start = Clock::now();
  for (;;) {
    if (env_ == nullptr) return;
    if (env_->cq.anyWaiting()) {
      lastCompletionAt_ = Clock::now();
      return;
    }
    // A thread in occlCommWaitAll takes CQEs too (Comm::waitByPolling): what it took counts as a
    // completion seen, or the poller would go on from a step sized for a long wait.
    if (const uint64_t taken = env_->cq.takenCount(); taken != takenSeen_) {
      takenSeen_ = taken;
      lastCompletionAt_ = Clock::now();
    }
    {
      std::lock_guard<std::mutex> lock(launchMu_);
      checkKernelHealth();
      if (!stopped_) relaunchIfNeeded(/*honourDelay=*/true);
    }
    const int64_t elapsed = usSince(start);
    if (elapsed >= timeoutUs) return;
    if (stopping_.load(std::memory_order_acquire)) {  // the poller's loop looks for its own stop
      std::this_thread::sleep_for(std::chrono::microseconds(steps_.minStepUs));
      return;
    }
    if (!outstanding()) {
      submitted_.park(timeoutUs - elapsed, [&] {
        return outstanding() || env_->cq.anyWaiting() || stopping_.load(std::memory_order_acquire);
      });
      lastCompletionAt_ = Clock::now();  // work begins now
      continue;
    }
    const int64_t waited = usSince(lastCompletionAt_);
    if (waited < kPollSpinUs) {
      std::this_thread::yield();
      continue;
    }
    const int64_t step = std::clamp(waited / steps_.divisor, steps_.minStepUs, steps_.maxStepUs);
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(step, timeoutUs - elapsed)));
  }
}

// Relaunches without delay until every block has read the exit SQE and drained its tasks (the
// abort flag, if set, fails whatever is left quickly).
Status KernelBackend::stop() {
  std::unique_lock<std::mutex> lock(launchMu_);
  if (env_ == nullptr || stopped_) return fatal_;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kStopTimeoutMs);
  for (;;) {
    if (!fatal_.ok()) break;
    if (launchOver()) {
      if (pendingWork() == Work::None) break;
      relaunchIfNeeded(/*honourDelay=*/false);
      continue;
    }
    if (Clock::now() > deadline) {
      stopTimedOut_ = true;
      fail(Status::error(occlTimeout, absl::StrFormat("the daemon kernel did not exit within %d ms of the exit "
                                                      "request (launch %d running, launch %d was the last to end)",
                                                      kStopTimeoutMs, epoch_, atomics::loadAcquire(endedEpoch_))));
      break;
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
  }
  stopped_ = true;
  stopping_.store(true, std::memory_order_release);
  (void)submitted_.ring();  // a poller parked with nothing outstanding returns
  if (everLaunched_ && fatal_.ok()) {
    // Sealed: the blocks are leaving, so this returns promptly (or reports a fault). Not under
    // the lock: a block may still need the poller to drain a full CQ before it can leave.
    lock.unlock();
    Status s = waitKernels();
    lock.lock();
    if (!s.ok()) fail(s);
  }
  return fatal_;
}

}  // namespace occl::backend
