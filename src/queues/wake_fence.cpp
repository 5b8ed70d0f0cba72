// Asymmetric fences for the FIFO wake-up protocol (wake_fence.hpp).
#include "queues/wake_fence.hpp"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <mutex>

namespace occl {
namespace {

int membarrier(int cmd) { return static_cast<int>(syscall(SYS_membarrier, cmd, 0u, 0)); }

// Whether this process may issue the barrier: also where its own registration failed, since
// publishers in other processes may have registered.
std::atomic<bool> gCanBarrierOthers{false};

}  // namespace

namespace detail {

std::atomic<int> gWakeFenceMode{0};

// Registration happens before the mode is published: a publisher that skips its full fence is
// always one that sleepers' barriers reach.
WakeFenceMode initWakeFenceMode() {
  static std::once_flag once;
  std::call_once(once, [] {
    const int supported = membarrier(MEMBARRIER_CMD_QUERY);
    const bool barrier = supported > 0 && (supported & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0;
    gCanBarrierOthers.store(barrier, std::memory_order_relaxed);
    const bool asymmetric = barrier && (supported & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
                            membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0;
    gWakeFenceMode.store(static_cast<int>(asymmetric ? WakeFenceMode::Asymmetric : WakeFenceMode::Symmetric),
                         std::memory_order_release);
  });
  return static_cast<WakeFenceMode>(gWakeFenceMode.load(std::memory_order_acquire));
}

}  // namespace detail

void sleeperFence() {
  (void)wakeFenceMode();  // this process's registration (and gCanBarrierOthers) first
  // The system call is a full barrier for this thread too; should it fail, the fence is.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (gCanBarrierOthers.load(std::memory_order_relaxed)) (void)membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
}

}  // namespace occl
