// The emulated CUDA block itself (device/simt_block.hpp): every lane runs the body with its own
// lane id, blockSync() is a real barrier, broadcastFromLeader() hands the leader's answer to every
// lane, and lanes that wait at different barriers — which a GPU would pair up silently — abort the
// process naming both call sites. The lane count comes from OCCL_SIMT_LANES (ctest sets it).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <vector>

#include "device/simt_block.hpp"
#include "occl/occl.h"

namespace occl::exec::simt {
namespace {

int lanesFromEnvironment() {
  occlConfig_t c;
  if (occlConfigInit(&c) != occlSuccess) return 4;
  return c.simtLanes;
}

const int kLanes = lanesFromEnvironment();

TEST(SimtBlock, EveryLaneRunsWithItsOwnId) {
  Block block(kLanes, /*jitterSeed=*/0);
  std::mutex mu;
  std::multiset<int> seen;
  std::atomic<int> counts{0};
  block.run([&] {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(lane());
    if (laneCount() == kLanes) counts += 1;
  });
  ASSERT_EQ(seen.size(), static_cast<size_t>(kLanes));
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(seen.count(l), 1u) << "lane " << l;
  EXPECT_EQ(counts.load(), kLanes);
  EXPECT_EQ(lane(), 0) << "the calling thread is lane 0 of a block of one again afterwards";
  EXPECT_EQ(laneCount(), 1);
}

// Each lane writes its own word, the barrier orders the writes before every lane's reads: the
// sum seen by every lane after the barrier is complete (and TSan sees no race).
TEST(SimtBlock, BarrierOrdersWritesBeforeReads) {
  Block block(kLanes, /*jitterSeed=*/7);
  std::vector<int> words(static_cast<size_t>(kLanes), 0);
  std::vector<int> sums(static_cast<size_t>(kLanes), 0);
  block.run([&] {
    for (int round = 1; round <= 50; ++round) {
      words[static_cast<size_t>(lane())] = round * (lane() + 1);
      blockSync();
      int sum = 0;
      for (int w : words) sum += w;
      sums[static_cast<size_t>(lane())] = sum;
      blockSync();  // nobody writes the next round before everybody has read this one
    }
  });
  const int expected = 50 * kLanes * (kLanes + 1) / 2;
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(sums[static_cast<size_t>(l)], expected) << "lane " << l;
}

TEST(SimtBlock, BroadcastGivesEveryLaneTheLeadersAnswer) {
  Block block(kLanes, /*jitterSeed=*/11);
  std::vector<int> answers(static_cast<size_t>(kLanes), -1);
  block.run([&] {
    int agreed = 0;
    for (int round = 0; round < 40; ++round) {
      // Only the leader's evaluation counts: other lanes would answer differently.
      if (broadcastFromLeader([&] { return lane() == 0 && round % 3 == 0; })) agreed += 1;
    }
    answers[static_cast<size_t>(lane())] = agreed;
  });
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(answers[static_cast<size_t>(l)], 14) << "lane " << l;
}

// Lanes that reach a barrier on different lines. Not inside EXPECT_DEATH: a macro's arguments
// all sit on the line it is invoked at, so their barriers would look like one.
void divergentBarriers() {
  Block block(kLanes, 0);
  block.run([] {
    if (lane() == 0) {
      blockSync();  // the leader's barrier
    } else {
      blockSync();  // every other lane's
    }
  });
}

void laneReturnsEarly() {
  Block block(kLanes, 0);
  block.run([] {
    if (lane() != 0) blockSync();
  });
}

TEST(SimtBlockDeathTest, LanesAtDifferentBarriersAbort) {
  if (kLanes < 2) GTEST_SKIP() << "a block of one lane cannot diverge";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(divergentBarriers(),
               "divergent barrier: lane [0-9]+ waits at a barrier .*simt_block_test.cpp:[0-9]+ while lane [0-9]+ "
               "waits at .*simt_block_test.cpp:[0-9]+");
}

TEST(SimtBlockDeathTest, LaneThatReturnsWhileOthersWaitAborts) {
  if (kLanes < 2) GTEST_SKIP() << "a block of one lane cannot diverge";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(laneReturnsEarly(), "divergent barrier: lane [0-9]+ (returned|waits at a barrier)");
}

// A decision every lane makes from state the leader updates, the pattern of defect D1: with
// jitter, a late lane reads the value after the leader's update and branches differently. The
// emulation turns that into an abort (or a TSan report) instead of a silent GPU desync; the
// broadcast form of the same loop runs clean.
TEST(SimtBlockDeathTest, LanesDecidingOnTheLeadersStateThemselvesAreCaught) {
  if (kLanes < 2) GTEST_SKIP() << "a block of one lane cannot diverge";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto loop = [](bool broadcast) {
    Block block(kLanes, /*jitterSeed=*/99);
    uint32_t counter = 0;  // block state: the leader alone writes it
    block.run([&] {
      for (int pass = 0; pass < 8000; ++pass) {
        auto due = [&] { return atomics::loadRelaxed(&counter) % 64 == 63; };
        const bool poll = broadcast ? broadcastFromLeader(due) : due();
        if (poll) blockSync();  // a barrier only the polling lanes reach
        if (isLeader()) atomics::storeRelaxed(&counter, counter + 1);
        blockSync();
      }
    });
  };
  loop(/*broadcast=*/true);
  EXPECT_DEATH(loop(/*broadcast=*/false), "divergent barrier");
}

}  // namespace
}  // namespace occl::exec::simt
