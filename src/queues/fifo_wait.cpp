// Futex sleeps and wakes on FIFO words (fifo_wait.hpp). The futex is the word's epoch
// (queues/fifo.hpp), which every wake bumps first; FIFOs shared between processes need the
// shared (not PRIVATE) futex operations.
#include "queues/fifo_wait.hpp"
#include "queues/wake_fence.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>

namespace occl {
namespace {

thread_local uint64_t tParks = 0;

}  // namespace

void fifoWakeSleepers(uint32_t* epoch, uint32_t wake, int32_t bellFd) {
  if (wake >= kFifoWakeParked) {
    std::atomic_ref<uint32_t>(*epoch).fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, epoch, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  }
  if ((wake & kFifoWakeBell) != 0 && bellFd >= 0) {
    const uint64_t one = 1;
    ssize_t n = ::write(bellFd, &one, sizeof one);
    (void)n;  // EAGAIN: the counter is saturated, i.e. already rung
  }
}

void fifoPark(FifoHeader* h, FifoWord which, uint64_t seen, uint64_t maxNs) {
  std::atomic_ref<uint32_t> w(*fifoWake(h, which));
  uint32_t* epoch = fifoEpoch(h, which);
  w.fetch_add(kFifoWakeParked, std::memory_order_seq_cst);
  // Pairs with fifoPublished's fence: a publish (or poison) these loads miss finds the sleeper
  // announced, and its wake bumps the epoch after the epoch read here.
  sleeperFence();
  const uint32_t e = std::atomic_ref<uint32_t>(*epoch).load(std::memory_order_seq_cst);
  if (std::atomic_ref<uint64_t>(*fifoCount(h, which)).load(std::memory_order_seq_cst) == seen &&
      std::atomic_ref<uint32_t>(h->poison).load(std::memory_order_seq_cst) == 0) {
    timespec ts{static_cast<time_t>(maxNs / 1000000000), static_cast<long>(maxNs % 1000000000)};
    // The kernel sleeps only while the epoch is still `e`: a wake in between returns EAGAIN.
    // EINTR and timeouts return too; the caller re-checks either way.
    syscall(SYS_futex, epoch, FUTEX_WAIT, e, &ts, nullptr, 0);
  }
  w.fetch_sub(kFifoWakeParked, std::memory_order_seq_cst);
  ++tParks;
}

uint64_t fifoParksOnThisThread() { return tParks; }

}  // namespace occl
