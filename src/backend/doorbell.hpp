// A futex-backed doorbell for the host backend: a daemon block or the poller parks on it when it
// has nothing to do, and the side that creates work rings it. Ringing costs a system call only
// when somebody is parked, so the submit path stays syscall-free while the daemon is busy.
#pragma once

#include <atomic>
#include <cstdint>

namespace occl::backend {

class Doorbell {
 public:
  // Parks until rung or `timeoutUs` passes, unless `workArrived()` already holds once this
  // waiter is registered (no lost wake-up: ring() and the check are ordered by seq_cst).
  template <typename Pred>
  void park(int64_t timeoutUs, Pred&& workArrived) {
    uint32_t seen = bell_.load(std::memory_order_seq_cst);
    parked_.fetch_add(1, std::memory_order_seq_cst);
    if (!workArrived()) wait(seen, timeoutUs);
    parked_.fetch_sub(1, std::memory_order_seq_cst);
  }

  void ring() {
    if (parked_.load(std::memory_order_seq_cst) == 0) return;
    bell_.fetch_add(1, std::memory_order_seq_cst);
    wakeAll();
  }

  bool anyoneParked() const { return parked_.load(std::memory_order_seq_cst) != 0; }

 private:
  void wait(uint32_t seen, int64_t timeoutUs);
  void wakeAll();

  std::atomic<uint32_t> bell_{0};
  std::atomic<uint32_t> parked_{0};
};

}  // namespace occl::backend
