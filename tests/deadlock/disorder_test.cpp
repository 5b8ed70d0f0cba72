// Disordered submission with ranks as threads: every rank submits the same collectives in its
// own order, which deadlocks NCCL; occl must complete them all with bit-exact results.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>

#include "torture/torture.hpp"
#include "support/ranks.hpp"

namespace occl::torture {
namespace {

using namespace std::chrono_literals;

// Fails the test with the first wrong element, the hang report, or a failed callback.
void expectClean(const std::vector<RankResult>& results, const PendingTracker& tracker, int iters) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_FALSE(results[r].timedOut) << "rank " << r << " hung (pending collectives are printed above)";
    EXPECT_EQ(results[r].itersDone, iters) << "rank " << r;
    EXPECT_EQ(results[r].wrong, 0u) << results[r].firstWrong;
  }
  EXPECT_EQ(tracker.failedCallbacks(), 0u) << tracker.firstFailure();
}

void expectStatsConsistent(const std::vector<std::vector<CollPlan>>& plans) {
  for (const auto& rankPlan : plans)
    for (const CollPlan& p : rankPlan) {
      occlCollStats_t s = sumStats({{p.comm, p.collId}});
      EXPECT_EQ(statsProblems(s), "") << "collId 0x" << std::hex << p.collId;
      if (p.nBlocks > 0) {
        EXPECT_EQ(s.parts, static_cast<uint32_t>(p.nBlocks)) << "collId 0x" << std::hex << p.collId;
      }
    }
}

// The paper's test (§5.2): 8 ranks, 8 AllReduces from 256 B to 1 MiB, each rank in its own order
// every iteration, 200 iterations.
void paperWorkload(int nRanks, int iters, occlOrderPolicy_t order = occlOrderAgreed) {
  PendingTracker tracker(nRanks);
  CommSet comms;
  size_t first = 0;
  occlConfig_t config = test::testConfig();
  config.orderPolicy = order;
  ASSERT_EQ(comms.initAll(nRanks, config, &first), occlSuccess) << occlGetLastError(nullptr);
  auto plans = singleCommPlans(comms, first, nRanks, geometricCounts(8, 256, 1 << 20));
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = iters;
  o.iterTimeout = 20s;
  auto started = std::chrono::steady_clock::now();
  auto results = runRankThreads(plans, o, tracker, comms);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  expectClean(results, tracker, iters);
  if (::testing::Test::HasFailure()) return;
  expectStatsConsistent(plans);
  occlCollStats_t total{};
  for (const auto& p : plans[0]) total.preemptions += sumStats({{p.comm, p.collId}}).preemptions;
  std::printf("[torture] %d ranks x 8 allreduces x %d iterations: %lld ms, rank 0 preemptions %llu\n", nRanks, iters,
              static_cast<long long>(ms), static_cast<unsigned long long>(total.preemptions));
}

// OCCL_TORTURE_ITERS overrides the iteration count for experiments; the suite runs the paper's 200.
int itersFromEnv(int fallback) {
  const char* text = std::getenv("OCCL_TORTURE_ITERS");
  return text != nullptr && std::atoi(text) > 0 ? std::atoi(text) : fallback;
}

TEST(DisorderTest, PaperEightRanksEightAllReducesTwoHundredIterations) { paperWorkload(8, itersFromEnv(200)); }

// The same under the arrival-order (FIFO) and priority policies, where every rank's task queue
// holds the collectives in its own order and only preemption and stickiness make them meet.
TEST(DisorderTest, PaperWorkloadUnderTheFifoOrder) { paperWorkload(4, itersFromEnv(50), occlOrderFifo); }
TEST(DisorderTest, PaperWorkloadUnderThePriorityOrderWithEqualPriorities) {
  paperWorkload(4, itersFromEnv(50), occlOrderPriority);
}

// Three overlapping groupings of 8 ranks (paper Fig. 2): tensor-parallel {0,1},{2,3},...,
// data-parallel {0,2},{1,3},..., pipeline {0,4},{1,5},...; one communicator per group, random
// sizes, every rank submits to its three communicators in a random order each iteration.
TEST(DisorderTest, ThreeOverlappingGroupsRandomOrdersAndSizes) {
  constexpr int kRanks = 8, kCollsPerGroup = 3, kIters = 40;
  const std::vector<std::vector<int>> groups = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {0, 2}, {1, 3},
                                                {4, 6}, {5, 7}, {0, 4}, {1, 5}, {2, 6}, {3, 7}};
  PendingTracker tracker(kRanks);
  CommSet comms;
  std::vector<std::vector<CollPlan>> plans(kRanks);
  std::mt19937_64 rng(42);
  for (size_t g = 0; g < groups.size(); ++g) {
    size_t first = 0;
    ASSERT_EQ(comms.initAll(2, test::testConfig(), &first), occlSuccess) << occlGetLastError(nullptr);
    for (int c = 0; c < kCollsPerGroup; ++c) {
      const size_t count = 1 + rng() % (size_t{192} << 10);  // up to 768 KiB, ragged counts included
      for (size_t m = 0; m < 2; ++m) {
        CollPlan p;
        p.comm = comms[first + m];
        p.collId = (g << 8) | static_cast<uint64_t>(c);
        p.count = count;
        p.members = groups[g];
        plans[static_cast<size_t>(groups[g][m])].push_back(p);
      }
    }
  }
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = kIters;
  o.seed = 7;
  o.iterTimeout = 20s;
  auto results = runRankThreads(plans, o, tracker, comms);
  expectClean(results, tracker, kIters);
  if (!::testing::Test::HasFailure()) expectStatsConsistent(plans);
}

// 32 collectives in flight on 2 daemon blocks: half use both blocks, half only block 0, so the
// blocks juggle different task queues.
TEST(DisorderTest, MoreCollectivesInFlightThanDaemonBlocks) {
  constexpr int kRanks = 4, kColls = 32, kIters = 20;
  occlConfig_t config = test::testConfig();
  config.daemonBlocks = 2;
  PendingTracker tracker(kRanks);
  CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(kRanks, config, &first), occlSuccess) << occlGetLastError(nullptr);
  std::vector<size_t> counts;
  for (int c = 0; c < kColls; ++c) counts.push_back(size_t{1} << (6 + c % 12));  // 256 B .. 512 KiB
  auto plans = singleCommPlans(comms, first, kRanks, counts);
  for (auto& rankPlan : plans)
    for (size_t c = 0; c < rankPlan.size(); ++c) rankPlan[c].nBlocks = c % 2 == 0 ? 2 : 1;
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = kIters;
  o.iterTimeout = 20s;
  auto results = runRankThreads(plans, o, tracker, comms);
  expectClean(results, tracker, kIters);
  if (!::testing::Test::HasFailure()) expectStatsConsistent(plans);
}

TEST(DisorderTest, MoreCollectivesThanOneDaemonBlock) {
  constexpr int kRanks = 3, kColls = 32, kIters = 20;
  PendingTracker tracker(kRanks);
  CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(kRanks, test::testConfig(), &first), occlSuccess) << occlGetLastError(nullptr);
  std::vector<size_t> counts;
  for (int c = 0; c < kColls; ++c) counts.push_back(size_t{3} << (5 + c % 12));
  auto plans = singleCommPlans(comms, first, kRanks, counts);
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = kIters;
  o.iterTimeout = 20s;
  auto results = runRankThreads(plans, o, tracker, comms);
  expectClean(results, tracker, kIters);
  if (!::testing::Test::HasFailure()) expectStatsConsistent(plans);
}

}  // namespace
}  // namespace occl::torture
