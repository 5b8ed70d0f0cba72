// The spin-threshold policy of src/daemon/daemon.hpp and executor.hpp, exactly: stickiness gives
// the front of the task queue the highest threshold, falling by thresholdStep per position down
// to thresholdMin; every successful primitive adds thresholdBoost (saturating); the fixed policy
// gives everyone thresholdMax; forcePreempt means 1 round; disablePreemption means no limit.
// Priority order adds the two ways a try gives way to a more urgent submission, the agreed order
// (the default) the first of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <thread>
#include <vector>

#include "daemon/daemon.hpp"
#include "support/one_block.hpp"
#include "util/cpus.hpp"

namespace occl {
namespace {

constexpr uint32_t kRoundNs = 64;

// The documented defaults (docs/configuration.md), with the host's time bound per round.
SchedPolicy defaults() {
  return SchedPolicy{occlOrderAgreed, occlSpinPolicyStickiness, 4096, 64, 512, 1024, 4, 0, 0, kRoundNs, 0, 0, 1, 0};
}

TEST(SpinPolicyTest, StickinessFallsWithQueuePositionDownToTheFloor) {
  const SchedPolicy p = defaults();
  const uint32_t expected[] = {4096, 3584, 3072, 2560, 2048, 1536, 1024, 512, 64, 64};
  for (uint32_t position = 0; position < std::size(expected); ++position) {
    SpinBudget b = spinBudgetFor(p, position);
    EXPECT_EQ(b.threshold, expected[position]) << "position " << position;
    EXPECT_EQ(b.boost, 1024u);
    EXPECT_FALSE(b.unlimited);
    EXPECT_EQ(b.roundNs, kRoundNs);
    EXPECT_EQ(b.sqPublished, nullptr);
    EXPECT_FALSE(b.yieldEachTile);
  }
}

TEST(SpinPolicyTest, TheFloorAppliesOnceMaxMinusTheDropWouldReachIt) {
  SchedPolicy p = defaults();
  p.thresholdMax = 1000;
  p.thresholdMin = 100;
  p.thresholdStep = 300;
  EXPECT_EQ(spinBudgetFor(p, 2).threshold, 400u);
  EXPECT_EQ(spinBudgetFor(p, 3).threshold, 100u);  // 1000 - 900 = 100: the floor itself
  p.thresholdStep = 299;
  EXPECT_EQ(spinBudgetFor(p, 3).threshold, 103u);
  EXPECT_EQ(spinBudgetFor(p, 4).threshold, 100u);
}

TEST(SpinPolicyTest, HugePositionsAndStepsDoNotWrapAboveTheFloor) {
  SchedPolicy p = defaults();
  p.thresholdStep = 0xffffffffu;
  EXPECT_EQ(spinBudgetFor(p, 0).threshold, 4096u);
  EXPECT_EQ(spinBudgetFor(p, 1).threshold, 64u);
  EXPECT_EQ(spinBudgetFor(p, 0xffffffffu).threshold, 64u);
  p.thresholdStep = 0;  // no decrease: every position spins as long as the front
  EXPECT_EQ(spinBudgetFor(p, 0xffffffffu).threshold, 4096u);
}

TEST(SpinPolicyTest, FixedPolicyGivesEveryPositionTheMaximumAndNoBoost) {
  SchedPolicy p = defaults();
  p.spin = occlSpinPolicyFixed;
  for (uint32_t position : {0u, 1u, 7u, 1000u}) {
    SpinBudget b = spinBudgetFor(p, position);
    EXPECT_EQ(b.threshold, 4096u) << "position " << position;
    EXPECT_EQ(b.boost, 0u);
    EXPECT_FALSE(b.unlimited);
    EXPECT_EQ(b.roundNs, kRoundNs);
  }
}

TEST(SpinPolicyTest, ForcePreemptGivesUpAfterOneRoundWhateverThePolicy) {
  for (uint32_t spin : {occlSpinPolicyStickiness, occlSpinPolicyFixed}) {
    SchedPolicy p = defaults();
    p.spin = spin;
    p.forcePreempt = 1;
    for (uint32_t position : {0u, 5u}) {
      SpinBudget b = spinBudgetFor(p, position);
      EXPECT_EQ(b.threshold, 1u);
      EXPECT_EQ(b.boost, 0u);
      EXPECT_FALSE(b.unlimited);
    }
  }
}

// The host's spin in place before yielding (SchedPolicy::spinInPlaceNs) reaches every wait whatever
// the policy, and a forced preemption, which gives up after one round, never spins.
TEST(SpinPolicyTest, SpinInPlaceReachesEveryBudgetButForcedPreemption) {
  SchedPolicy p = defaults();
  p.spinInPlaceNs = 2000;
  EXPECT_EQ(spinBudgetFor(p, 0).spinInPlaceNs, 2000u);
  EXPECT_EQ(spinBudgetFor(p, 9).spinInPlaceNs, 2000u);
  p.spin = occlSpinPolicyFixed;
  EXPECT_EQ(spinBudgetFor(p, 3).spinInPlaceNs, 2000u);
  p.disablePreemption = 1;
  EXPECT_EQ(spinBudgetFor(p, 0).spinInPlaceNs, 2000u);
  p.disablePreemption = 0;
  p.forcePreempt = 1;
  EXPECT_EQ(spinBudgetFor(p, 0).spinInPlaceNs, 0u);
}

// Whether a wait may spin in place at all goes by the CPUs a host's ranks may run on together
// (host/comm.cpp): ranks bound to a core each (one-CPU masks) cover as many CPUs as there are
// ranks, ranks bound two to a core cover half as many.
TEST(SpinPolicyTest, TheRanksOfAHostCoverTheUnionOfTheirAffinityMasks) {
  auto mask = [](std::initializer_list<int> cpus) {
    cpu_set_t m;
    CPU_ZERO(&m);
    for (int c : cpus) CPU_SET(c, &m);
    return m;
  };
  EXPECT_EQ(cpusCovered(std::vector<cpu_set_t>{mask({0}), mask({1})}), 2);
  EXPECT_EQ(cpusCovered(std::vector<cpu_set_t>{mask({0}), mask({1}), mask({0}), mask({1})}), 2);
  EXPECT_EQ(cpusCovered(std::vector<cpu_set_t>{mask({0, 1}), mask({1, 2}), mask({})}), 3);
  EXPECT_EQ(cpusCovered({}), 0);
  const cpu_set_t mine = threadCpus();
  EXPECT_GE(CPU_COUNT(&mine), 1);
}

TEST(SpinPolicyTest, DisablePreemptionSpinsWithoutLimitAndOverridesForcePreempt) {
  SchedPolicy p = defaults();
  p.disablePreemption = 1;
  EXPECT_TRUE(spinBudgetFor(p, 0).unlimited);
  EXPECT_TRUE(spinBudgetFor(p, 9).unlimited);
  p.forcePreempt = 1;  // validateConfig rejects both; the daemon still never preempts then
  EXPECT_TRUE(spinBudgetFor(p, 0).unlimited);
  EXPECT_EQ(spinBudgetFor(p, 0).boost, 0u);
}

TEST(SpinPolicyTest, EachSuccessfulPrimitiveAddsTheBoostAndSaturates) {
  uint32_t t = spinBudgetFor(defaults(), 7).threshold;
  ASSERT_EQ(t, 512u);
  for (uint32_t expected : {1536u, 2560u, 3584u, 4608u}) {
    t = boostedThreshold(t, 1024);
    EXPECT_EQ(t, expected);
  }
  EXPECT_EQ(boostedThreshold(4096, 0), 4096u);
  EXPECT_EQ(boostedThreshold(kMaxBoostedThreshold - 10, 1024), kMaxBoostedThreshold);
  EXPECT_EQ(boostedThreshold(4096, 0xffffffffu), kMaxBoostedThreshold);  // used to wrap to 4095
  EXPECT_EQ(boostedThreshold(0xfffffff0u, 1024), 0xfffffff0u);  // a configured maximum is never lowered
}

// A block's view for budgetFor: `priorities` are the task queue, front first.
struct QueueView {
  uint64_t sqPublished = 10;
  TaskEntry tasks[3]{};
  BlockState block{};
  DaemonEnv env{};

  QueueView(SchedPolicy policy, std::initializer_list<int32_t> priorities) {
    env.policy = policy;
    env.sq.published = &sqPublished;
    block.tasks = tasks;
    block.capacity = 3;
    block.sqCursor = 7;
    for (int32_t prio : priorities) tasks[block.nTasks++].priority = prio;
  }
};

TEST(SpinPolicyTest, FifoOrderAddsNothingToThePositionsBudget) {
  SchedPolicy p = defaults();
  p.order = occlOrderFifo;
  QueueView q(p, {0, 5});
  SpinBudget b = budgetFor(q.env, q.block, 0, 1);
  EXPECT_EQ(b.threshold, 3584u);
  EXPECT_EQ(b.sqPublished, nullptr);
  EXPECT_FALSE(b.yieldEachTile);
}

TEST(SpinPolicyTest, PriorityOrderGivesWayToNewSubmissionsWhileTheQueueHasRoom) {
  SchedPolicy p = defaults();
  p.order = occlOrderPriority;
  QueueView q(p, {5, 5});
  SpinBudget b = budgetFor(q.env, q.block, 0, 1);
  EXPECT_EQ(b.threshold, 3584u);
  EXPECT_EQ(b.sqPublished, &q.sqPublished);
  EXPECT_EQ(b.sqSeen, 7u);
  EXPECT_FALSE(b.yieldEachTile);  // equal priority ahead: nothing more urgent waits

  q.tasks[q.block.nTasks++].priority = 1;  // full: a new submission could not be taken anyway
  EXPECT_EQ(budgetFor(q.env, q.block, 0, 1).sqPublished, nullptr);
  q.block.nTasks -= 1;
  q.block.exitSeen = 1;  // nothing is read after the exit SQE
  EXPECT_EQ(budgetFor(q.env, q.block, 0, 1).sqPublished, nullptr);
}

TEST(SpinPolicyTest, PriorityOrderYieldsEachTileOnlyBehindAMoreUrgentTask) {
  SchedPolicy p = defaults();
  p.order = occlOrderPriority;
  QueueView q(p, {9, 3, 3});
  EXPECT_FALSE(budgetFor(q.env, q.block, 0, 0).yieldEachTile);
  EXPECT_TRUE(budgetFor(q.env, q.block, 0, 1).yieldEachTile);
  EXPECT_TRUE(budgetFor(q.env, q.block, 0, 2).yieldEachTile);
}

// An arrival may belong ahead of the task being tried (an older submission that a rank submitted
// late), so the agreed order gives way to new submissions too; it never yields per tile, since
// every task has priority 0.
TEST(SpinPolicyTest, AgreedOrderGivesWayToNewSubmissionsButNeverYieldsEachTile) {
  QueueView q(defaults(), {0, 0});
  for (uint32_t position = 0; position < 2; ++position) {
    SpinBudget b = budgetFor(q.env, q.block, 0, position);
    EXPECT_EQ(b.sqPublished, &q.sqPublished) << "position " << position;
    EXPECT_EQ(b.sqSeen, 7u);
    EXPECT_FALSE(b.yieldEachTile);
  }
  SchedPolicy p = defaults();
  p.disablePreemption = 1;
  QueueView stuck(p, {0, 0});
  EXPECT_EQ(budgetFor(stuck.env, stuck.block, 0, 1).sqPublished, nullptr);
}

TEST(SpinPolicyTest, PriorityOrderWithoutPreemptionNeverGivesWay) {
  SchedPolicy p = defaults();
  p.order = occlOrderPriority;
  p.disablePreemption = 1;
  QueueView q(p, {9, 3});
  SpinBudget b = budgetFor(q.env, q.block, 0, 1);
  EXPECT_TRUE(b.unlimited);
  EXPECT_EQ(b.sqPublished, nullptr);
  EXPECT_FALSE(b.yieldEachTile);
}

// Between tiles, a try that has moved data looks for new submissions before every
// arrivalEveryTiles-th tile (each look is a read across PCIe on the GPU). With submissions
// waiting in the SQ, a 16-tile copy gives way before tile `every`; with a full task queue it
// never looks and runs to its end. The tiles it ran are copied, the rest untouched.
TEST(SpinPolicyTest, ATryLooksForArrivalsBeforeEveryFewTilesAsThePolicySays) {
  constexpr uint32_t kTileElems = 4, kTiles = 16, kElems = kTileElems * kTiles;
  const DeviceStep step{StepOp::Copy, BufKind::Input, BufKind::Output, 0, 0, 0, 1, -1, 0, kNoConnector, kNoConnector};
  const BlockPlan plan{&step, nullptr, nullptr, 1, 0, 0};
  CollShared shared{};
  CollDesc d = test::oneBlockDesc(&plan, &shared, 1, kElems, kTileElems, kTiles);
  const ProgramForm& form = d.forms[kFormOutOfPlace];
  std::vector<float> in(kElems);
  for (uint32_t i = 0; i < kElems; ++i) in[i] = static_cast<float>(i);
  for (uint32_t every : {0u, 1u, 5u, 8u, 16u, 17u}) {
    SCOPED_TRACE(testing::Message() << "arrivalEveryTiles " << every);
    SchedPolicy p = defaults();
    p.arrivalEveryTiles = every;
    for (bool roomForArrivals : {true, false}) {
      QueueView q(p, {0});  // sqPublished 10, sqCursor 7: three submissions wait
      if (!roomForArrivals) q.block.capacity = 1;
      std::vector<float> out(kElems, -1.0f);
      BlockContext ctx{};
      const TaskBuffers bufs{reinterpret_cast<char*>(in.data()), reinterpret_cast<char*>(out.data()), nullptr};
      BlockExecutor ex(d, form, 0, ctx, bufs, budgetFor(q.env, q.block, 0, 0), nullptr, 0);
      const TryOutcome o = ex.run();
      const uint32_t ran = roomForArrivals && every < kTiles ? std::max(every, 1u) : kTiles;
      EXPECT_EQ(o.status, ran < kTiles ? TryStatus::Preempted : TryStatus::Done) << "room " << roomForArrivals;
      EXPECT_EQ(o.yielded, ran < kTiles);
      if (ran < kTiles) {
        EXPECT_EQ(ctx.tile, ran);
      }
      for (uint32_t i = 0; i < kElems; ++i)
        ASSERT_EQ(out[i], i < ran * kTileElems ? in[i] : -1.0f) << "element " << i << ", room " << roomForArrivals;
    }
  }
}

// A wait reads the clock once a round while it yields, and once every kSpinRoundsPerClockRead
// rounds while it spins in place (WaitClock, executor.hpp); the rounds between see that reading.
TEST(SpinPolicyTest, ASpinningWaitReadsTheClockOnceEveryFewRounds) {
  auto tick = [] { std::this_thread::sleep_for(std::chrono::microseconds(50)); };
  WaitClock clock;
  clock.spinning = true;
  const uint64_t first = clock.at(0);
  for (uint32_t round = 1; round < kSpinRoundsPerClockRead; ++round) {
    tick();
    EXPECT_EQ(clock.at(round), first) << "round " << round;
  }
  tick();
  const uint64_t second = clock.at(kSpinRoundsPerClockRead);
  EXPECT_GT(second, first);
  EXPECT_EQ(clock.at(kSpinRoundsPerClockRead), second);  // the same round's other check
  clock.spinning = false;
  tick();
  const uint64_t yielding = clock.at(kSpinRoundsPerClockRead + 1);
  EXPECT_GT(yielding, second);
  tick();
  EXPECT_GT(clock.at(kSpinRoundsPerClockRead + 2), yielding);
}

}  // namespace
}  // namespace occl
