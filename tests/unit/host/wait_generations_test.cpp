// WaitGenerations (host/wait_generations.hpp), what occlCommWaitAll waits on: a waiter asleep on a
// generation wakes when its last submission fires, and when submissions counted in but never
// queued are counted back (a group's rest after a failed wait for room in the SQ); a wait started
// after submissions of the current generation waits for them.
#include <gtest/gtest.h>

#include <chrono>
#include <future>

#include "host/wait_generations.hpp"

namespace occl::host {
namespace {

using namespace std::chrono_literals;

// Starts a wait as occlCommWaitAll does (take(), then sleep on the generation it left), bounded.
std::future<bool> waitFor(WaitGenerations& w) {
  return std::async(std::launch::async, [&w] {
    std::optional<WaitGenerations::Turn> turn;
    while (!(turn = w.take())) {
    }
    return w.sleepUntil(turn->generation, WaitGenerations::Clock::now() + 30s);
  });
}

TEST(WaitGenerationsTest, AWaiterWakesWhenItsLastSubmissionFires) {
  WaitGenerations w;
  const int g = w.current();
  w.countIn(2, g);
  std::future<bool> woke = waitFor(w);
  w.countOut(g);
  EXPECT_EQ(woke.wait_for(50ms), std::future_status::timeout) << "one of two submissions is still pending";
  w.countOut(g);
  ASSERT_EQ(woke.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(woke.get());
  EXPECT_EQ(w.unfired(), 0u);
}

TEST(WaitGenerationsTest, AWaiterWakesWhenWhatItWaitsOnIsCountedBack) {
  WaitGenerations w;
  const int g = w.current();
  w.countIn(3, g);  // a group of three, counted in whole
  std::future<bool> woke = waitFor(w);
  w.countOut(g);  // the first part went in and fired
  EXPECT_EQ(woke.wait_for(50ms), std::future_status::timeout) << "two submissions are still counted in";
  w.countBack(2, g);  // the rest never went in
  ASSERT_EQ(woke.wait_for(20s), std::future_status::ready) << "the count back did not wake the waiter";
  EXPECT_TRUE(woke.get());
  EXPECT_EQ(w.unfired(), 0u);
  EXPECT_FALSE(w.outstanding());
}

TEST(WaitGenerationsTest, SubmissionsAfterAWaitStartedAreNotItsToWaitFor) {
  WaitGenerations w;
  std::future<bool> first = waitFor(w);
  ASSERT_EQ(first.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(first.get()) << "nothing was pending";
  const int g = w.current();
  w.countIn(1, g);
  std::future<bool> second = waitFor(w);
  EXPECT_EQ(second.wait_for(50ms), std::future_status::timeout) << "a submission made before the wait is pending";
  w.countOut(g);
  ASSERT_EQ(second.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(second.get());
}

}  // namespace
}  // namespace occl::host
