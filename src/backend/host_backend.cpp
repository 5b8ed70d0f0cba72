// The host backend: each daemon block is a thread of this process running the shared daemon
// passes. Its waits on FIFOs sleep on them (queues/fifo_wait.hpp). A block that makes no progress
// otherwise backs off (yield, then short timed parks) so that many ranks share few cores; a block
// with nothing queued for idleQuitUs quits, i.e. parks on the submission doorbell until the next
// SQE.
//
// A thread in occlCommWaitAll may run the passes instead (Backend::help), on a one-block daemon:
// the rank's work then needs one runnable thread, not a waiter and a daemon thread taking turns
// on the cores. A block is run by whoever holds it (BlockHold), so passes never overlap and the
// block's state passes between threads with the hold's acquire and release. While a helper is
// there the daemon thread stands aside: it sleeps in short timed parks that nobody rings on the
// submit path (a submitter who goes on to wait would pay a futex wake for a thread that steps
// back at once). A helper that leaves with work in flight rings it; otherwise the next timed
// wake-up, at most kMaxAsideUs later, finds it gone.
//
// Both count their yields on the rank's word of the yield board (queues/yield_board.hpp), and
// their passes' waits read the peers' words there: tYieldBoard and tYieldWord are set for the
// daemon threads once and around each helped pass.
#include <algorithm>
#include <atomic>
#include <memory>
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
  explicit HostBackend(const occlConfig_t& config)
      : idleQuitUs_(config.idleQuitUs),
        preemptive_(config.disablePreemption == 0),
        blocks_(config.daemonBlocks > 0 ? config.daemonBlocks : 1) {}
  ~HostBackend() override { (void)stop(); }

  Status start(DaemonEnv* env) override {
    env_ = env;
    holds_ = std::make_unique<BlockHold[]>(env->nBlocks);
    retired_ = std::make_unique<std::atomic<bool>[]>(env->nBlocks);
    cursors_ = std::make_unique<std::atomic<uint64_t>[]>(env->nBlocks);
    try {
      threads_.reserve(env->nBlocks);
      for (uint32_t b = 0; b < env->nBlocks; ++b) threads_.emplace_back([this, b] {
          nameThisThread(absl::StrFormat("occl-daemon%d", b));
          blockLoop(static_cast<int>(b));
        });
    } catch (const std::exception& e) {
      // The threads already running leave without an exit SQE (none will come): retired, each
      // one's next pass reports exit (stop() wakes a parked one).
      const size_t started = threads_.size();
      for (uint32_t b = 0; b < env->nBlocks; ++b) retired_[b].store(true, std::memory_order_release);
      (void)stop();
      return Status::error(occlSystemError, absl::StrFormat("starting daemon thread %d of %d failed: %s", started,
                                                            env->nBlocks, e.what()));
    }
    return Status::success();
  }

  void notifySubmission() override { submissions_.ring(); }

  // Without preemption a wait lasts until its peer comes: a helper in it could not keep its
  // waiter's timeout, and would turn a hang the user asked for into preemption.
  bool canHelp() const override { return env_ != nullptr && env_->nBlocks == 1 && preemptive_; }
  void beginHelp() override { helpers_.fetch_add(1, std::memory_order_seq_cst); }
  void useYieldBoard(YieldBoard* board, int rank) override {
    board_ = board;
    word_ = board != nullptr ? board->of(rank) : nullptr;
  }
  HelpResult help(uint64_t deadlineNs, uint64_t clockNs) override {
    if (!holds_[0].tryHold()) return {};
    HelpResult result;
    if (!retired_[0].load(std::memory_order_acquire)) {
      tPassDeadlineNs = deadlineNs;
      tCqFullBell = cqFullBell();
      tYieldBoard = board_;
      tYieldWord = word_;
      const PassResult r = daemonPass(*env_, 0, clockNs);
      noteCursor(0);
      tYieldBoard = nullptr;
      tYieldWord = nullptr;
      tCqFullBell = {};
      tPassDeadlineNs = 0;
      if (r.exit) retired_[0].store(true, std::memory_order_release);
      result = {true, r.progressed};
      // The helper takes its CQEs itself; a poller parked on them (no helper when it parked)
      // is rung as after a daemon thread's pass. A pass that publishes a CQE has progressed.
      if (r.progressed) completions_.ring();
    }
    holds_[0].release();
    return result;
  }
  void endHelp(bool workLeft) override {
    helpers_.fetch_sub(1, std::memory_order_seq_cst);
    if (workLeft) aside_.ring();
  }

  void waitForCompletion(int64_t timeoutUs, absl::FunctionRef<bool()>) override {
    completions_.park(timeoutUs, [&] { return env_->cq.anyWaiting() || stopped_.load(std::memory_order_acquire); });
  }

  // Also wakes the poller: an idle poller parks for long (comm_poller.cpp) and must not make
  // every shutdown wait for its timeout.
  Status stop() override {
    stopping_.store(true, std::memory_order_seq_cst);
    aside_.ring();
    submissions_.ring();  // a block parked idle sees stopping_ (an abort without exit SQE)
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
    stopped_.store(true, std::memory_order_release);
    completions_.ring();
    return Status::success();
  }

  const char* name() const override { return "host"; }
  // Auto is one thread: a host daemon's blocks are threads that share the rank's cores.
  int daemonBlocks() const override { return blocks_; }

 private:
  // Whether SQEs wait that `block` has not copied, as of its last pass: a block reports its cursor
  // to the SQ only when asked (queues/sq.hpp), so the cursor is taken from its state here, by the
  // thread that ran the pass while it still holds the block.
  bool sqHasWork(int block) const {
    return env_->sq.publishedCount() > cursors_[block].load(std::memory_order_acquire);
  }
  void noteCursor(int block) { cursors_[block].store(env_->blocks[block].sqCursor, std::memory_order_release); }

  // Who runs a block's passes: its daemon thread, or a helper (help()).
  struct alignas(64) BlockHold {
    std::atomic<bool> held{false};
    bool tryHold() {
      bool expected = false;
      return held.compare_exchange_strong(expected, true, std::memory_order_acquire, std::memory_order_relaxed);
    }
    void release() { held.store(false, std::memory_order_release); }
  };

  // A pass that finds the completion ring full wakes a poller parked on it (daemon.hpp). A
  // helper's pass may find the poller parked on the communicator's own bell instead, which is
  // bounded at 1 ms (comm_poller.cpp).
  CqFullBell cqFullBell() {
    return {[](void* bell) { (void)static_cast<Doorbell*>(bell)->ring(); }, &completions_};
  }

  // The daemon thread of `block` steps back while a helper runs it (see the top of the file).
  bool helped(int block) const {
    return helpers_.load(std::memory_order_seq_cst) > 0 && block == 0 && env_->nBlocks == 1 &&
           !stopping_.load(std::memory_order_seq_cst);
  }
  void standAside(int block, int64_t& asideUs) {
    asideUs = asideUs == 0 ? kMinAsideUs : std::min<int64_t>(asideUs * 2, kMaxAsideUs);
    aside_.park(asideUs, [&] { return !helped(block); });
  }

  void blockLoop(int block) {
    using Clock = std::chrono::steady_clock;
    auto lastActivity = Clock::now();
    int64_t backoffUs = 0;
    int64_t asideUs = 0;
    uint64_t cqSeen = 0;
    tCqFullBell = cqFullBell();
    tYieldBoard = board_;
    tYieldWord = word_;
    for (;;) {
      if (helped(block)) {
        standAside(block, asideUs);
        continue;
      }
      if (!holds_[block].tryHold()) {  // a helper's pass, just ending
        countedYield(word_);
        continue;
      }
      asideUs = 0;
      const uint64_t parksBefore = fifoParksOnThisThread();
      PassResult r = retired_[block].load(std::memory_order_acquire) ? PassResult{false, false, true}
                                                                        : daemonPass(*env_, block);
      noteCursor(block);
      // Its own ring only: a block rings the poller for the CQEs it wrote, not for other blocks'.
      const uint64_t cq = env_->blocks[block].cqTail;  // daemon memory is host memory here
      holds_[block].release();
      if (cq != cqSeen) {
        cqSeen = cq;
        completions_.ring();
      }
      if (r.exit) return;
      // Aborted and stopping, with nothing held and every SQE read: the exit SQE may never come
      // (Comm::shutdown could not queue it). Every submission queued before has failed and fired.
      if (!r.pending && stopping_.load(std::memory_order_seq_cst) && atomics::loadAcquire(env_->hostAbortFlag) != 0 &&
          !sqHasWork(block))
        return;
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
        countedYield(word_);
        continue;
      }
      // Stuck waiting for peers: sleep briefly, longer the longer nothing moves (capped so a
      // late peer costs at most ~1 ms of extra latency).
      backoffUs = std::min<int64_t>(backoffUs == 0 ? 20 : backoffUs * 2, 1000);
      submissions_.park(backoffUs, [&] { return sqHasWork(block); });
    }
  }

  static constexpr int64_t kMinAsideUs = 50;
  static constexpr int64_t kMaxAsideUs = 1000;

  int64_t idleQuitUs_;
  bool preemptive_;
  int blocks_;
  YieldBoard* board_ = nullptr;  // useYieldBoard; read by the daemon threads once they start
  YieldWord* word_ = nullptr;
  DaemonEnv* env_ = nullptr;
  std::unique_ptr<BlockHold[]> holds_;
  std::unique_ptr<std::atomic<bool>[]> retired_;  // a helper's pass read the exit SQE
  std::unique_ptr<std::atomic<uint64_t>[]> cursors_;  // each block's SQ cursor after its last pass
  std::atomic<int> helpers_{0};
  std::atomic<bool> stopping_{false};
  Doorbell aside_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  Doorbell submissions_;
  Doorbell completions_;
};

}  // namespace

std::unique_ptr<Backend> makeHostBackend(const occlConfig_t& config) { return std::make_unique<HostBackend>(config); }

}  // namespace occl::backend
