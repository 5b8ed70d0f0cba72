// The host doorbell's promise (backend/doorbell.hpp): a side that publishes work with an ordinary
// release store and then rings either finds the parker there, or the parker's own check finds the
// work. Neither missing the other is a lost wake-up: the parker sleeps to its timeout (a second
// for an idle daemon block) with work waiting.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "backend/doorbell.hpp"
#include "util/spin.hpp"

namespace occl::backend {
namespace {

using Clock = std::chrono::steady_clock;

// Both threads leave a round's start line together, so that the publish and the park race at
// the closest quarters the cores allow: a store still in the publisher's store buffer while the
// parker registers and looks is the interleaving that loses a wake-up. A wait for the start
// line spins a little, then yields, so the test also passes on one core or a loaded machine.
void waitForRound(const std::atomic<uint64_t>& round, uint64_t want) {
  for (int spins = 0; round.load(std::memory_order_acquire) < want; ++spins) {
    if (spins < 4096) {
      cpuRelax();
    } else {
      std::this_thread::yield();
    }
  }
}

// A lost wake-up is a park that sleeps its whole timeout although the round's work came and was
// rung for meanwhile. The timeout is long (2 s) so that nothing else sleeps it out: a parker or a
// publisher held up by a loaded machine (sanitizers, builds beside the test) delays a round by
// milliseconds, not seconds. (The count once came from the publisher's side, "the ring found
// nobody parked while the park had not returned": a parker preempted between its park's return
// and its note of it made that true for a park that had merely timed out, once in 800,000 rounds
// under AddressSanitizer on a loaded machine.)
TEST(DoorbellTest, ARingFindsTheParkerOrTheParkerFindsTheWork) {
  constexpr uint64_t kRounds = 1'000'000;
  constexpr int64_t kParkUs = 2'000'000;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  Doorbell bell;
  std::atomic<uint64_t> work{0};
  std::atomic<uint64_t> start{0};      // the round both threads may begin
  std::atomic<uint64_t> published{0};  // the last round the publisher finished
  uint64_t lost = 0, rounds = 0;
  std::thread publisher([&] {
    for (uint64_t r = 1;; ++r) {
      waitForRound(start, r);
      if (start.load(std::memory_order_acquire) == UINT64_MAX) return;
      work.store(r, std::memory_order_release);  // as the SQ and the CQ publish
      bell.ring();
      published.store(r, std::memory_order_release);
    }
  });
  for (uint64_t r = 1; r <= kRounds && Clock::now() < deadline; ++r) {
    bool sawWork = false;
    start.store(r, std::memory_order_release);
    const auto parked = Clock::now();
    bell.park(kParkUs, [&] { return sawWork = work.load(std::memory_order_acquire) >= r; });
    const auto slept = Clock::now() - parked;
    waitForRound(published, r);
    if (!sawWork && slept >= std::chrono::microseconds(kParkUs)) ++lost;
    rounds = r;
  }
  start.store(UINT64_MAX, std::memory_order_release);
  publisher.join();
  EXPECT_EQ(lost, 0u) << "of " << rounds << " rounds, the ring missed the parker and the parker missed the work";
  EXPECT_GT(rounds, 1000u);
}

}  // namespace
}  // namespace occl::backend
