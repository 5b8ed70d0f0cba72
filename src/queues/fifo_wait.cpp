// Futex sleeps and wakes on FIFO words (fifo_wait.hpp). The futex is the low half of the 64-bit
// tail or head: every publish changes it, and FIFOs shared between processes need the shared
// (not PRIVATE) futex operations.
#include "queues/fifo_wait.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <bit>
#include <climits>

namespace occl {
namespace {

static_assert(std::endian::native == std::endian::little, "the futex is the low half of a 64-bit word");

uint32_t* lowHalf(uint64_t* word) { return reinterpret_cast<uint32_t*>(word); }

thread_local uint64_t tParks = 0;

}  // namespace

void fifoWakeSleepers(uint64_t* word, uint32_t wake, int32_t bellFd) {
  if (wake >= kFifoWakeParked) syscall(SYS_futex, lowHalf(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  if ((wake & kFifoWakeBell) != 0 && bellFd >= 0) {
    const uint64_t one = 1;
    ssize_t n = ::write(bellFd, &one, sizeof one);
    (void)n;  // EAGAIN: the counter is saturated, i.e. already rung
  }
}

void fifoPark(uint64_t* word, uint32_t* wake, uint64_t seen, uint64_t maxNs) {
  std::atomic_ref<uint32_t> w(*wake);
  w.fetch_add(kFifoWakeParked, std::memory_order_seq_cst);
  // Pairs with fifoPublished's fence: a publish after this load finds the sleeper announced.
  if (std::atomic_ref<uint64_t>(*word).load(std::memory_order_seq_cst) == seen) {
    timespec ts{static_cast<time_t>(maxNs / 1000000000), static_cast<long>(maxNs % 1000000000)};
    // The kernel sleeps only while the low half still equals `seen`'s: a publish in between
    // returns EAGAIN. EINTR and timeouts return too; the caller re-checks either way.
    syscall(SYS_futex, lowHalf(word), FUTEX_WAIT, static_cast<uint32_t>(seen), &ts, nullptr, 0);
  }
  w.fetch_sub(kFifoWakeParked, std::memory_order_seq_cst);
  ++tParks;
}

uint64_t fifoParksOnThisThread() { return tParks; }

}  // namespace occl
