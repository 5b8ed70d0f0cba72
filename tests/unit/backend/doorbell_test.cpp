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

TEST(DoorbellTest, ARingFindsTheParkerOrTheParkerFindsTheWork) {
  constexpr uint64_t kRounds = 1'000'000;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  Doorbell bell;
  std::atomic<uint64_t> work{0};
  std::atomic<uint64_t> start{0};      // the round both threads may begin
  std::atomic<uint64_t> published{0};  // the last round the publisher finished
  std::atomic<uint64_t> parkDone{0};  // the last round whose park returned
  // The publisher's view of its last round: whether its ring found the parker, and whether the
  // park was still under way after the ring (a ring after a park that gave up at its timeout,
  // the publisher having been held up for a millisecond, has no parker to find).
  std::atomic<bool> rang{false}, parkUnderWay{false};
  uint64_t lost = 0, rounds = 0;
  std::thread publisher([&] {
    for (uint64_t r = 1;; ++r) {
      waitForRound(start, r);
      if (start.load(std::memory_order_acquire) == UINT64_MAX) return;
      work.store(r, std::memory_order_release);  // as the SQ and the CQ publish
      rang.store(bell.ring(), std::memory_order_relaxed);
      parkUnderWay.store(parkDone.load(std::memory_order_seq_cst) < r, std::memory_order_relaxed);
      published.store(r, std::memory_order_release);
    }
  });
  for (uint64_t r = 1; r <= kRounds && Clock::now() < deadline; ++r) {
    bool sawWork = false;
    start.store(r, std::memory_order_release);
    // A lost wake-up sleeps this bound out; 1 ms keeps a failing run short.
    bell.park(1000, [&] { return sawWork = work.load(std::memory_order_acquire) >= r; });
    parkDone.store(r, std::memory_order_seq_cst);
    waitForRound(published, r);
    if (!sawWork && !rang.load(std::memory_order_relaxed) && parkUnderWay.load(std::memory_order_relaxed)) ++lost;
    rounds = r;
  }
  start.store(UINT64_MAX, std::memory_order_release);
  publisher.join();
  EXPECT_EQ(lost, 0u) << "of " << rounds << " rounds, the ring missed the parker and the parker missed the work";
  EXPECT_GT(rounds, 1000u);
}

}  // namespace
}  // namespace occl::backend
