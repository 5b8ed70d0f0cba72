// A daemon that runs as a persistent kernel (OCCL §3.1.3): launched when work arrives, quitting
// by a vote of its blocks when idle or stuck (daemon/quit_vote.hpp), relaunched by the host while
// SQEs outstrip CQEs. The launch control lives here, once, for the two backends whose daemon is
// a kernel: the CUDA backend (cuda_backend_cuda.cpp) and its emulation on host threads, the simt
// backend (simt_backend.cpp). They differ only in memory and in how a launch runs.
//
// Launch state. The last block to leave a sealed launch stores the launch's epoch in shared
// memory, so the host sees that a launch is over without a CUDA call: notifySubmission runs on
// the application's threads and must not leave cudaErrorNotReady behind for their
// cudaGetLastError. A new launch may be queued behind a sealed one that is still retiring: the
// launch order (a CUDA stream) keeps them apart. Only the poller thread asks whether a launch died.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "backend/backend.hpp"
#include "backend/doorbell.hpp"
#include "daemon/daemon_main.hpp"

namespace occl::backend {

class KernelBackend : public Backend {
 public:
  Status start(DaemonEnv* env) final;
  void notifySubmission() final;
  void waitForCompletion(int64_t timeoutUs, absl::FunctionRef<bool()> outstanding) final;
  // Runs the daemon until every block has read the exit SQE and drained its tasks, then waits
  // for the last launch to retire. A derived destructor calls it before freeing anything.
  Status stop() final;
  bool daemonMayStillRun() final { return kernelMayStillRun(); }
  int daemonBlocks() const final { return nBlocks_; }
  bool daemonIsKernel() const final { return true; }

 protected:
  // How often the poller looks at the CQ while submissions are outstanding (waitForCompletion):
  // every `divisor`-th of the time since the last completion it saw, within [minStepUs, maxStepUs].
  struct PollSteps {
    int64_t minStepUs;
    int64_t maxStepUs;
    int64_t divisor;
  };
  // `where` names the device in messages ("CUDA device 0").
  KernelBackend(const occlConfig_t& config, std::string where, PollSteps steps);

  // Queues a launch of env.nBlocks blocks behind the previous launches (stream order).
  virtual Status launchKernel(const DaemonEnv& env, const DaemonLaunch& launch) = 0;
  // A launch that died (a fault), or success while they run or after they ended well.
  virtual Status kernelHealth() = 0;
  // Waits until every launch has retired.
  virtual Status waitKernels() = 0;

  // The subclass's init sets these: the blocks' vote word (daemon memory, zeroed) and the
  // ended-epoch word (shared memory, zeroed).
  void setLaunchWords(uint64_t* quitWord, uint32_t* endedEpoch);
  // A kernel that would not stop may still read anything: its memory must leak, not be freed.
  bool kernelMayStillRun();

  const std::string where_;
  // config.daemonBlocks; where that is 0 (auto), 1 until the subclass's init chooses
  // (CudaBackend: autoDaemonBlocks).
  int nBlocks_;

 private:
  using Clock = std::chrono::steady_clock;
  enum class Work { None, Unread, Queued };

  // All under launchMu_.
  bool launchOver() const;
  Work pendingWork() const;
  void noteLaunchEnded();
  bool relaunchDue() const;
  Status launch();
  void relaunchIfNeeded(bool honourDelay);
  void checkKernelHealth();
  void fail(const Status& s);

  const int64_t idleQuitUs_;
  const int64_t stuckQuitUs_;
  const PollSteps steps_;
  // The poller's: when it last saw a CQE taken (by itself or by a waiter) or work begin, and how
  // many CQEs had been taken then.
  Clock::time_point lastCompletionAt_{};
  uint64_t takenSeen_ = 0;
  uint64_t* quitWord_ = nullptr;
  uint32_t* endedEpoch_ = nullptr;
  DaemonEnv* env_ = nullptr;
  DaemonEnv envCopy_{};  // immutable once started; every launch passes it by value

  std::mutex launchMu_;
  bool everLaunched_ = false;
  bool stopped_ = false;
  bool stopTimedOut_ = false;
  uint32_t epoch_ = 0;
  uint64_t cqAtLaunch_ = 0;
  bool endNoted_ = true;
  Clock::time_point endedAt_{};
  int64_t relaunchDelayUs_ = 0;  // 0 = relaunch at once
  Status fatal_;                 // the first unrecoverable error; no launch after it

  // The poller parks on it while nothing is outstanding: rung by every submission and by stop().
  Doorbell submitted_;
  std::atomic<bool> stopping_{false};
};

}  // namespace occl::backend
