// Priority order (paper §3.2): a small high-priority collective submitted behind a large
// low-priority one that is already under way must overtake it on every rank.
//
// Deterministic, whatever the machine's speed: ranks 0..kRanks-2 submit the large collective
// first, and it stalls there, since the last rank holds its part back; each of them submits the
// small one only once its daemon has preempted the large one. Then the last rank submits the
// large one and, at once, the small one. From then on the large one could flow to its end on
// every rank: under FIFO it would complete first everywhere, so the small one completing first
// on every rank shows the priority order at work.
#include <gtest/gtest.h>

#include <chrono>
#include <latch>
#include <memory>
#include <thread>

#include "torture/torture.hpp"
#include "support/ranks.hpp"

namespace occl::torture {
namespace {

using namespace std::chrono_literals;

constexpr int kRanks = 4;
constexpr uint64_t kLarge = 0x1a, kSmall = 0x5a;
constexpr size_t kLargeCount = 8 << 20;  // 32 MiB: tens of ms at least, while the last rank's two
                                         // submissions are microseconds apart
constexpr size_t kSmallCount = 256;      // 1 KiB

uint64_t largePreemptions(occlComm_t comm) {
  occlCollStats_t stats{};
  return occlCollGetStats(comm, kLarge, &stats) == occlSuccess ? stats.preemptions : 0;
}

// Waits (bounded) until this rank's daemon has preempted the large collective since `before`:
// it has started and is stuck waiting for the rank that holds back.
bool waitForPreemption(occlComm_t comm, uint64_t before) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < deadline) {
    if (largePreemptions(comm) > before) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

void registerPair(const CommSet& comms) {
  for (int r = 0; r < kRanks; ++r) {
    CollPlan large, small;
    large.comm = small.comm = comms[static_cast<size_t>(r)];
    large.count = kLargeCount;
    large.priority = 0;
    small.count = kSmallCount;
    small.priority = 10;
    occlCollDesc_t dl = allReduceDesc(large), ds = allReduceDesc(small);
    ASSERT_EQ(occlCollRegister(large.comm, kLarge, &dl), occlSuccess) << occlGetLastError(large.comm);
    ASSERT_EQ(occlCollRegister(small.comm, kSmall, &ds), occlSuccess) << occlGetLastError(small.comm);
  }
}

TEST(PriorityTest, SmallHighPriorityCollectiveOvertakesARunningLargeOneOnEveryRank) {
  occlConfig_t config = test::testConfig();
  config.orderPolicy = occlOrderPriority;
  // Buffers and trackers are declared before the communicators, so they outlive them.
  std::vector<std::vector<float>> largeIn(kRanks, std::vector<float>(kLargeCount, 1.0f));
  std::vector<std::vector<float>> largeOut(kRanks, std::vector<float>(kLargeCount));
  std::vector<std::vector<float>> smallIn(kRanks, std::vector<float>(kSmallCount, 2.0f));
  std::vector<std::vector<float>> smallOut(kRanks, std::vector<float>(kSmallCount));
  constexpr int kRounds = 3;
  std::vector<std::unique_ptr<PendingTracker>> trackers;
  CommSet comms;
  ASSERT_EQ(comms.initAll(kRanks, config, nullptr), occlSuccess) << occlGetLastError(nullptr);
  ASSERT_NO_FATAL_FAILURE(registerPair(comms));
  for (int round = 0; round < kRounds; ++round) {
    PendingTracker& tracker = *trackers.emplace_back(std::make_unique<PendingTracker>(kRanks));
    std::latch smallSubmitted(kRanks - 1);
    std::vector<int> largeStalled(kRanks, 1);
    test::runRanks(kRanks, [&](int r) {
      occlComm_t comm = comms[static_cast<size_t>(r)];
      const bool holdsBack = r == kRanks - 1;
      if (holdsBack) smallSubmitted.wait();
      const uint64_t preemptedBefore = largePreemptions(comm);
      ASSERT_EQ(tracker.submit(comm, tracker.slot(r, kLarge), largeIn[r].data(), largeOut[r].data()), occlSuccess);
      if (!holdsBack) {
        largeStalled[r] = waitForPreemption(comm, preemptedBefore) ? 1 : 0;
        ASSERT_TRUE(tracker.completionOrder(r).empty()) << "rank " << r << ": the large one completed without rank "
                                                        << kRanks - 1;
      }
      ASSERT_EQ(tracker.submit(comm, tracker.slot(r, kSmall), smallIn[r].data(), smallOut[r].data()), occlSuccess);
      if (!holdsBack) smallSubmitted.count_down();
      if (!tracker.wait(r, 60s)) reportHang(tracker, "rank " + std::to_string(r) + " priority round timed out");
    });
    ASSERT_FALSE(tracker.cancelled()) << "pending: " << tracker.describePending();
    ASSERT_EQ(tracker.failedCallbacks(), 0u) << tracker.firstFailure();
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_EQ(largeStalled[r], 1) << "rank " << r << ": the stalled large collective was never preempted";
      EXPECT_EQ(tracker.completionOrder(r), (std::vector<uint64_t>{kSmall, kLarge}))
          << "rank " << r << " round " << round << ": the high-priority collective did not complete first";
      EXPECT_EQ(smallOut[r][0], 2.0f * kRanks);
      EXPECT_EQ(largeOut[r][kLargeCount - 1], 1.0f * kRanks);
    }
  }
}

}  // namespace
}  // namespace occl::torture
