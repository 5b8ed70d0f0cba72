// The two fences of the FIFO wake-up protocol (queues/fifo.hpp), on the host. A publisher stores
// tail or head and then reads the wake word; a sleeper announces itself in the wake word and then
// reads tail or head once more before it sleeps. Each side needs a StoreLoad barrier between its
// store and its load, or both may read the old values and the sleeper sleeps through the publish.
//
// Publishes happen several times per collective per rank; sleeps are rare and already cost two
// system calls. So the barrier is asymmetric (Linux membarrier, the pattern of membarrier(2)'s
// manual): the publisher's side is a compiler barrier only, and the sleeper's side makes every
// running thread of every registered process execute a full barrier
// (MEMBARRIER_CMD_GLOBAL_EXPEDITED), which orders the publisher's store before its load wherever
// the two met. A full fence on the publisher's side stalls until its stores of the slot, the
// length and the tail have reached the peer's core: 9% of all CPU time on 4 thread-ranks, 64 B
// AllReduce (perf); the barrier costs a sleeper about 2 us (an interrupt per busy core).
//
// A process registers for the barrier at its first fence (its first publish or sleep), before
// that fence's load: from then on every sleeper's barrier reaches it. Where registration is
// refused (an old kernel, a seccomp filter), this process publishes with a full fence: the
// symmetric protocol. Its sleepers still issue the barrier where the kernel offers it, for the
// publishers in other processes that registered; where the kernel lacks it, no process registers.
#pragma once

#include <atomic>

namespace occl {

enum class WakeFenceMode : int {
  Symmetric = 1,   // full fences on both sides
  Asymmetric = 2,  // compiler barrier on publish, membarrier before a sleep
};

namespace detail {
// 0 until the first call of wakeFenceMode() (wake_fence.cpp), then the mode.
extern std::atomic<int> gWakeFenceMode;
WakeFenceMode initWakeFenceMode();
}  // namespace detail

// Registers this process on the first call; the same answer on every later one.
inline WakeFenceMode wakeFenceMode() {
  const int mode = detail::gWakeFenceMode.load(std::memory_order_relaxed);
  return mode != 0 ? static_cast<WakeFenceMode>(mode) : detail::initWakeFenceMode();
}

// Between a publish (the store of tail or head) and the read of its wake word.
inline void publisherFence() {
  if (wakeFenceMode() == WakeFenceMode::Asymmetric) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
  } else {
    std::atomic_thread_fence(std::memory_order_seq_cst);
  }
}

// Between a sleeper's announcement in the wake word and its last read of the word it sleeps on.
void sleeperFence();

}  // namespace occl
