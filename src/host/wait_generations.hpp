// What occlCommWaitAll waits for: a communicator's submissions counted in and out, in total and
// by generation, and the sleep of the threads that wait for them.
//
// A wait waits for the submissions made before it, which is not a count of callbacks: those of
// different collIds fire out of order, and later submissions (a callback's next step, another
// thread's) may fire first. So submissions are counted by generation, of which there are two: a
// wait starts the other one (a compare-and-swap, once an earlier wait's has drained: take()) and
// waits until the one it left has drained. Counted in by the submitter, under the communicator's
// submit lock (where current() is read, and kept in the callback slot), and out by the thread
// firing callbacks, under the CQ's lock: one writer each (addByOneWriter). A submission that
// reads current() just before a wait starts the other generation overlaps that wait's call, so
// either generation is right for it.
//
// A waiter that finds its generation still pending sleeps on cv_ (sleepUntil). The thread firing
// a callback counts it out with a seq_cst read-modify-write of fired_ and then reads waiters_;
// the waiter increments waiters_ and then reads fired_ (drained), both seq_cst, so one of them
// sees the other's write: the firer wakes the waiter, or the waiter sees the generation drained.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

#include "util/one_writer.hpp"

namespace occl::host {

class WaitGenerations {
 public:
  using Clock = std::chrono::steady_clock;

  // The submitter, under the submit lock: the generation a submission made now belongs to, and
  // the count of `submissions` made in `generation`. The submitter reads current() once and uses
  // that value for the count, the callback slot and a count back (countBack): a wait may
  // start the other generation in between, and a submission counted in one generation and out of
  // the other would leave the first pending for ever (a later wait hangs).
  int current() const { return generation_.load(std::memory_order_relaxed); }
  void countIn(uint64_t submissions, int generation) {
    addByOneWriter(submitted_, submissions);
    addByOneWriter(in_[generation], submissions);
  }

  // The submitter, under the submit lock: `submissions` counted in by countIn that never went out
  // (the rest of a group whose wait for room in the SQ failed). A waiter may already sleep on
  // them: woken as countOut wakes it (the seq_cst store here against its increment of waiters_).
  void countBack(uint64_t submissions, int generation) {
    addByOneWriter(submitted_, 0 - submissions);
    addByOneWriter(in_[generation], 0 - submissions, std::memory_order_seq_cst);
    wakeWaiters();
  }

  // The thread firing callbacks, under the CQ's lock, after a submission's callback has returned.
  void countOut(int generation) {
    addByOneWriter(out_[generation], uint64_t{1});
    // seq_cst with the waiter's increment of waiters_ and its read of fired_ (before it looks at
    // the generation): with weaker orders both sides may read the old value, and the waiter
    // sleeps through its wake-up. The RMW also releases the count of the generation above.
    fired_.fetch_add(1, std::memory_order_seq_cst);
    wakeWaiters();
  }

  // Submissions whose callbacks have not fired.
  uint64_t unfired(std::memory_order order = std::memory_order_acquire) const {
    return submitted_.load(order) - fired_.load(order);
  }
  bool outstanding() const {
    return fired_.load(std::memory_order_seq_cst) != submitted_.load(std::memory_order_seq_cst);
  }
  // Out first: a fire counted out after the look at `in` would otherwise make a pending
  // submission look fired (out never exceeds in).
  uint64_t pending(int g) const {
    const uint64_t out = out_[g].load(std::memory_order_seq_cst);
    return in_[g].load(std::memory_order_seq_cst) - out;
  }

  // A wait's turn: the generation it waits for, and whether that is an earlier wait's.
  struct Turn {
    int generation;
    bool earlier;
  };
  // Later submissions go to the other generation, unless an earlier wait's are still there:
  // those came before this call too, so the wait sees them fire first and then starts over.
  // nullopt: another wait started the other generation first (look again).
  std::optional<Turn> take() {
    int current = generation_.load(std::memory_order_seq_cst);
    const int other = 1 - current;
    const bool earlier = pending(other) != 0;
    if (!earlier && !generation_.compare_exchange_strong(current, other, std::memory_order_seq_cst))
      return std::nullopt;
    return Turn{earlier ? other : current, earlier};
  }

  // Whether every callback of generation `g` has fired.
  bool drained(int g) const {
    (void)fired_.load(std::memory_order_seq_cst);  // orders the look with countOut's wake-up
    return pending(g) == 0;
  }
  // Sleeps until generation `g` has drained (true) or `deadline` passes (false).
  bool sleepUntil(int g, std::optional<Clock::time_point> deadline) {
    auto done = [&] { return drained(g); };
    waiters_.fetch_add(1, std::memory_order_seq_cst);
    std::unique_lock<std::mutex> lock(mu_);
    bool ok = true;
    if (!deadline) {
      cv_.wait(lock, done);
    } else {
      ok = cv_.wait_until(lock, *deadline, done);
    }
    waiters_.fetch_sub(1);
    return ok;
  }

 private:
  void wakeWaiters() {
    if (waiters_.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> wake(mu_);
      cv_.notify_all();
    }
  }

  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> fired_{0};
  std::atomic<int> generation_{0};
  std::array<std::atomic<uint64_t>, 2> in_{};
  std::array<std::atomic<uint64_t>, 2> out_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<int> waiters_{0};
};

}  // namespace occl::host
