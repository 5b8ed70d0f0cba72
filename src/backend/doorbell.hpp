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
  // waiter is registered (no lost wake-up: the registration and ring()'s look at it are
  // read-modify-writes of one word, so one of them reads the other's, and the work stored
  // before the ring is visible to a check after the registration).
  template <typename Pred>
  void park(int64_t timeoutUs, Pred&& workArrived) {
    uint32_t seen = bell_.load(std::memory_order_seq_cst);
    parked_.fetch_add(1, std::memory_order_seq_cst);
    if (!workArrived()) wait(seen, timeoutUs);
    parked_.fetch_sub(1, std::memory_order_seq_cst);
  }

  // Returns whether anybody was parked (and so was woken). The caller publishes its work with
  // whatever store it likes (the SQ and the CQ use release stores); the look at parked_ is a
  // read-modify-write, so it cannot be done before that store is visible. A plain load could be
  // (x86 lets a load pass an earlier store to another address): the parker would then register
  // and look at the work while the store still sat in this core's store buffer, both would miss
  // the other, and the parker would sleep its whole timeout with work waiting
  // (tests/unit/backend/doorbell_test.cpp catches that). The RMW is a locked instruction on x86, a few
  // nanoseconds; a seq_cst fence (mfence) costs several times as much here.
  bool ring() {
    if (parked_.fetch_add(0, std::memory_order_seq_cst) == 0) return false;
    bell_.fetch_add(1, std::memory_order_seq_cst);
    wakeAll();
    return true;
  }

 private:
  void wait(uint32_t seen, int64_t timeoutUs);
  void wakeAll();

  std::atomic<uint32_t> bell_{0};
  std::atomic<uint32_t> parked_{0};
};

}  // namespace occl::backend
