// The host backend: each daemon block is a thread of this process running the shared daemon
// passes. Its waits on FIFOs sleep on them (queues/fifo_wait.hpp). A block that makes no progress
// otherwise backs off (yield, then short timed parks) so that many ranks share few cores; a block
// with nothing queued for idleQuitUs quits, i.e. parks on the submission doorbell until the next
// SQE.
#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/backend.hpp"
#include "backend/doorbell.hpp"
#include "backend/host_memory.hpp"
#include "queues/fifo_wait.hpp"
#include "util/thread_name.hpp"

namespace occl::backend {
namespace {

class HostBackend : public OnHostMemory<Backend> {
 public:
  explicit HostBackend(const occlConfig_t& config) : idleQuitUs_(config.idleQuitUs) {}
  ~HostBackend() override { (void)stop(); }

  Status start(DaemonEnv* env) override {
    env_ = env;
    try {
      for (uint32_t b = 0; b < env->nBlocks; ++b) threads_.emplace_back([this, b] {
          nameThisThread(absl::StrFormat("occl-daemon%d", b));
          blockLoop(static_cast<int>(b));
        });
    } catch (const std::system_error& e) {
      return Status::error(occlSystemError, absl::StrFormat("starting daemon thread failed: %s", e.what()));
    }
    return Status::success();
  }

  void notifySubmission() override { submissions_.ring(); }

  void waitForCompletion(uint64_t consumed, int64_t timeoutUs) override {
    completions_.park(timeoutUs, [&] {
      return env_->cq.publishedCount() > consumed || stopped_.load(std::memory_order_acquire);
    });
  }

  // Also wakes the poller: an idle poller parks for long (comm_poller.cpp) and must not make
  // every shutdown wait for its timeout.
  Status stop() override {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
    stopped_.store(true, std::memory_order_release);
    completions_.ring();
    return Status::success();
  }

  const char* name() const override { return "host"; }

 private:
  bool sqHasWork(int block) const {
    return env_->sq.publishedCount() > atomics::loadAcquire(&env_->sq.reports[block].sqNext);
  }

  void blockLoop(int block) {
    using Clock = std::chrono::steady_clock;
    auto lastActivity = Clock::now();
    int64_t backoffUs = 0;
    uint64_t cqSeen = 0;
    for (;;) {
      const uint64_t parksBefore = fifoParksOnThisThread();
      PassResult r = daemonPass(*env_, block);
      // Its own ring only: a block rings the poller for the CQEs it wrote, not for other blocks'.
      uint64_t cq = atomics::loadAcquire(&env_->cq.reports[block].cqPublished);
      if (cq != cqSeen) {
        cqSeen = cq;
        completions_.ring();
      }
      if (r.exit) return;
      if (r.progressed) {
        lastActivity = Clock::now();
        backoffUs = 0;
        continue;
      }
      // Its waits slept on FIFOs until their time bound (executor.hpp) and the peer's publish
      // would have woken them: the next pass waits there again, better than any backoff here.
      if (r.pending && fifoParksOnThisThread() != parksBefore) continue;
      auto idleUs = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - lastActivity).count();
      if (!r.pending && idleUs >= idleQuitUs_) {
        // Voluntary quit: nothing queued, nothing arriving. Only a submission restarts us.
        submissions_.park(1000000, [&] { return sqHasWork(block); });
        continue;
      }
      if (idleUs < 50) {
        std::this_thread::yield();
        continue;
      }
      // Stuck waiting for peers: sleep briefly, longer the longer nothing moves (capped so a
      // late peer costs at most ~1 ms of extra latency).
      backoffUs = std::min<int64_t>(backoffUs == 0 ? 20 : backoffUs * 2, 1000);
      submissions_.park(backoffUs, [&] { return sqHasWork(block); });
    }
  }

  int64_t idleQuitUs_;
  DaemonEnv* env_ = nullptr;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  Doorbell submissions_;
  Doorbell completions_;
};

}  // namespace

std::unique_ptr<Backend> makeHostBackend(const occlConfig_t& config) { return std::make_unique<HostBackend>(config); }

}  // namespace occl::backend
