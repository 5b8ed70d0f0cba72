// Preemption proven from both sides: forced preemption at every wait changes no bit of the
// results, the statistics add up, a preemption that moved nothing saves nothing, and with
// preemption disabled a crossed submission order and the paper's disordered workload really hang
// (so the other tests exercise the ordering problem, not a lucky schedule).
#include <gtest/gtest.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "torture/torture.hpp"
#include "support/ranks.hpp"

namespace occl::torture {
namespace {

using namespace std::chrono_literals;

struct RunSummary {
  std::vector<RankResult> results;
  std::vector<occlCollStats_t> stats;  // per collective, summed over ranks
  occlCollStats_t total{};
  uint64_t failedCallbacks = 0;
};

// 4 ranks, 8 AllReduces from 256 B to 1 MiB, per-rank orders.
RunSummary runDisordered(occlConfig_t config, int iters) {
  constexpr int kRanks = 4;
  RunSummary out;
  PendingTracker tracker(kRanks);
  CommSet comms;
  size_t first = 0;
  if (comms.initAll(kRanks, config, &first) != occlSuccess) {
    ADD_FAILURE() << "occlCommInitAll: " << occlGetLastError(nullptr);
    return out;
  }
  auto plans = singleCommPlans(comms, first, kRanks, geometricCounts(8, 256, 1 << 20));
  std::string error;
  for (const auto& p : plans) {
    if (registerAll(p, &error) != occlSuccess) {
      ADD_FAILURE() << error;
      return out;
    }
  }
  RunOptions o;
  o.iters = iters;
  o.iterTimeout = 20s;
  o.hashOutputs = true;
  out.results = runRankThreads(plans, o, tracker, comms);
  out.failedCallbacks = tracker.failedCallbacks();
  for (const auto& r : out.results) {
    EXPECT_FALSE(r.timedOut);
    EXPECT_EQ(r.wrong, 0u) << r.firstWrong;
  }
  if (::testing::Test::HasFailure()) return out;
  for (size_t c = 0; c < plans[0].size(); ++c) {
    std::vector<std::pair<occlComm_t, uint64_t>> everyRank;
    for (const auto& rankPlan : plans) everyRank.emplace_back(rankPlan[c].comm, rankPlan[c].collId);
    out.stats.push_back(sumStats(everyRank));
    out.total.preemptions += out.stats.back().preemptions;
    out.total.contextSaves += out.stats.back().contextSaves;
    out.total.contextLoads += out.stats.back().contextLoads;
    out.total.completions += out.stats.back().completions;
  }
  return out;
}

TEST(PreemptionTest, ForcedPreemptionAtEveryWaitIsBitIdenticalToAnUnpreemptedRun) {
  constexpr int kIters = 10;
  occlConfig_t plain = test::testConfig();
  plain.disablePreemption = 1;  // consistent order below cannot hang, so nothing is ever preempted
  occlConfig_t forced = test::testConfig();
  forced.forcePreempt = 1;

  RunSummary reference;
  {
    // The unpreempted reference runs the same collectives in one order on every rank.
    constexpr int kRanks = 4;
    PendingTracker tracker(kRanks);
    CommSet comms;
    size_t first = 0;
    ASSERT_EQ(comms.initAll(kRanks, plain, &first), occlSuccess) << occlGetLastError(nullptr);
    auto plans = singleCommPlans(comms, first, kRanks, geometricCounts(8, 256, 1 << 20));
    std::string error;
    for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
    RunOptions o;
    o.iters = kIters;
    o.order = Order::Consistent;
    o.iterTimeout = 20s;
    o.hashOutputs = true;
    reference.results = runRankThreads(plans, o, tracker, comms);
    for (const CollPlan& p : plans[0]) EXPECT_EQ(sumStats({{p.comm, p.collId}}).preemptions, 0u);
  }
  RunSummary preempted = runDisordered(forced, kIters);
  ASSERT_FALSE(HasFailure());
  for (size_t r = 0; r < preempted.results.size(); ++r) {
    EXPECT_EQ(reference.results[r].wrong, 0u) << reference.results[r].firstWrong;
    EXPECT_EQ(preempted.results[r].outputHash, reference.results[r].outputHash) << "rank " << r;
  }
  EXPECT_GT(preempted.total.preemptions, 0u);
  EXPECT_LE(preempted.total.contextSaves, preempted.total.preemptions);
  for (size_t c = 0; c < preempted.stats.size(); ++c) {
    EXPECT_GT(preempted.stats[c].preemptions, 0u) << "collective " << c << " was never preempted";
    EXPECT_EQ(statsProblems(preempted.stats[c]), "") << "collective " << c;
  }
  std::printf("[torture] forced preemption: %llu preemptions, %llu context saves, %llu loads, %llu completions\n",
              static_cast<unsigned long long>(preempted.total.preemptions),
              static_cast<unsigned long long>(preempted.total.contextSaves),
              static_cast<unsigned long long>(preempted.total.contextLoads),
              static_cast<unsigned long long>(preempted.total.completions));
}

// occlCommWaitAll, not the callbacks, is the fence here: right after it the counters must add up.
TEST(PreemptionTest, StatisticsAddUpRightAfterWaitAll) {
  constexpr int kRanks = 3, kColls = 6, kRounds = 30;
  occlConfig_t config = test::testConfig();
  config.daemonBlocks = 2;
  CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(kRanks, config, &first), occlSuccess) << occlGetLastError(nullptr);
  auto plans = singleCommPlans(comms, first, kRanks, geometricCounts(kColls, 1024, 256 << 10));
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  std::vector<std::string> problems(kRanks);
  test::runRanks(kRanks, [&](int r) {
    std::vector<std::vector<float>> send(kColls), recv(kColls);
    for (int c = 0; c < kColls; ++c) {
      send[c].assign(plans[r][c].count, 1.0f);
      recv[c].resize(plans[r][c].count);
    }
    for (int round = 0; round < kRounds; ++round) {
      for (size_t c : submissionOrder(r, round, kColls, Order::Shuffled, 3))
        test::expectOk(occlSubmit(plans[r][c].comm, plans[r][c].collId, send[c].data(), recv[c].data(), nullptr, nullptr),
                       plans[r][c].comm, "submit");
      test::expectOk(occlCommWaitAll(plans[r][0].comm, 20000), plans[r][0].comm, "waitAll");
      for (int c = 0; c < kColls; ++c) {
        std::string p = statsProblems(sumStats({{plans[r][c].comm, plans[r][c].collId}}));
        if (!p.empty() && problems[r].empty()) problems[r] = "round " + std::to_string(round) + ": " + p;
      }
    }
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(problems[r], "") << "rank " << r;
}

// Rank 0 submits A then B, rank 1 B then A; one daemon block, connectors far smaller than either
// collective. Each daemon takes its first collective and, unable to preempt it, waits forever for
// a peer that waits on the other one.
struct CrossedOrder {
  // 16 KiB per collective vs 2 slots of 64 B: neither fits in flight, so each rank's first waits for
  // its peer. (256 KiB took 5-10 s on simt with 3 lanes, and over its 30 s bound under load.)
  static constexpr size_t kCount = 4 << 10;
  static constexpr uint64_t kA = 0xA, kB = 0xB;
  // Declared before the communicators, so they outlive them (callbacks, daemon writes).
  PendingTracker tracker{2};
  std::vector<std::vector<float>> send = std::vector<std::vector<float>>(4, std::vector<float>(kCount, 1.0f));
  std::vector<std::vector<float>> recv = std::vector<std::vector<float>>(4, std::vector<float>(kCount));
  CommSet comms;

  explicit CrossedOrder(occlConfig_t config) {
    // Arrival order, so each daemon starts with its own first submission: under the agreed order
    // a daemon that found both queued would run them in its peer's order, and whether the crossing
    // happens at all would depend on timing.
    config.orderPolicy = occlOrderFifo;
    config.daemonBlocks = 1;
    config.connectorSlots = 2;
    config.connectorSlotBytes = 64;
    EXPECT_EQ(comms.initAll(2, config, nullptr), occlSuccess) << occlGetLastError(nullptr);
  }
  void submit() {
    for (int r = 0; r < 2; ++r) {
      for (uint64_t id : {kA, kB}) {
        CollPlan p;
        p.comm = comms[static_cast<size_t>(r)];
        p.collId = id;
        p.count = kCount;
        occlCollDesc_t d = allReduceDesc(p);
        ASSERT_EQ(occlCollRegister(p.comm, id, &d), occlSuccess) << occlGetLastError(p.comm);
      }
    }
    const uint64_t orders[2][2] = {{kA, kB}, {kB, kA}};
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 2; ++k) {
        size_t buf = static_cast<size_t>(r * 2 + k);
        ASSERT_EQ(tracker.submit(comms[static_cast<size_t>(r)], tracker.slot(r, orders[r][k]), send[buf].data(),
                                 recv[buf].data()),
                  occlSuccess);
      }
    }
  }
};

TEST(PreemptionTest, WithoutPreemptionACrossedOrderHangsAndTheBoundedWaitCatchesIt) {
  occlConfig_t config = test::testConfig();
  config.disablePreemption = 1;
  CrossedOrder job(config);
  ASSERT_NO_FATAL_FAILURE(job.submit());
  const bool finished = job.tracker.wait(-1, 2s);
  const std::string pending = job.tracker.describePending();
  std::printf("[torture] expected hang, pending after 2 s: %s\n", pending.c_str());
  EXPECT_FALSE(finished) << "the crossed order completed without preemption: the test does not exercise ordering";
  EXPECT_EQ(pending, "rank 0: 0xa (1 pending) 0xb (1 pending); rank 1: 0xa (1 pending) 0xb (1 pending)");
  job.comms.abortAll();  // fails the stuck collectives, so their callbacks fire and the test ends
  EXPECT_TRUE(job.tracker.wait(-1, 10s)) << job.tracker.describePending();
  EXPECT_EQ(job.tracker.failedCallbacks(), 4u);
}

TEST(PreemptionTest, WithPreemptionTheSameCrossedOrderCompletes) {
  CrossedOrder job(test::testConfig());
  ASSERT_NO_FATAL_FAILURE(job.submit());
  ASSERT_TRUE(job.tracker.wait(-1, 30s)) << job.tracker.describePending();
  EXPECT_EQ(job.tracker.failedCallbacks(), 0u) << job.tracker.firstFailure();
  for (const auto& out : job.recv)
    for (float v : out) ASSERT_EQ(v, 2.0f);
  occlCollStats_t s = sumStats({{job.comms[0], CrossedOrder::kA}, {job.comms[0], CrossedOrder::kB},
                                {job.comms[1], CrossedOrder::kA}, {job.comms[1], CrossedOrder::kB}});
  EXPECT_GT(s.preemptions, 0u);
  EXPECT_EQ(statsProblems(s), "");
}


// Polls rank `comm`'s statistics of `collId` until `atLeast` preemptions (bounded).
occlCollStats_t statsOncePreempted(occlComm_t comm, uint64_t collId, uint64_t atLeast) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  occlCollStats_t s{};
  while (std::chrono::steady_clock::now() < deadline) {
    EXPECT_EQ(occlCollGetStats(comm, collId, &s), occlSuccess) << occlGetLastError(comm);
    if (s.preemptions >= atLeast) return s;
    std::this_thread::sleep_for(1ms);
  }
  ADD_FAILURE() << "collId 0x" << std::hex << collId << std::dec << " preempted " << s.preemptions << " times, not "
                << atLeast;
  return s;
}

// Rank 0 submits an AllReduce that rank 1 has not submitted yet. Its first try starts it and
// sends what the ring lets it send before the first receive, then waits for rank 1 in vain; every
// later try is preempted at that same receive and moves nothing. So the context is saved exactly
// once however often it is preempted and loaded, until rank 1 joins.
TEST(PreemptionTest, APreemptionWhoseTryMovedNothingDoesNotSave) {
  constexpr size_t kCount = 1024;  // one tile per chunk
  constexpr uint64_t kId = 0x5A;
  std::vector<std::vector<float>> send(2, std::vector<float>(kCount, 1.0f)), recv(2, std::vector<float>(kCount));
  test::CallbackCounter callbacks;
  occlConfig_t config = test::testConfig();
  config.daemonBlocks = 1;  // the counts below are those of one block
  CommSet comms;
  ASSERT_EQ(comms.initAll(2, config, nullptr), occlSuccess) << occlGetLastError(nullptr);
  CollPlan plan;
  plan.count = kCount;
  const occlCollDesc_t desc = allReduceDesc(plan);
  for (size_t r = 0; r < 2; ++r)
    ASSERT_EQ(occlCollRegister(comms[r], kId, &desc), occlSuccess) << occlGetLastError(comms[r]);
  ASSERT_EQ(occlSubmit(comms[0], kId, send[0].data(), recv[0].data(), &test::CallbackCounter::callback, callbacks.arg()),
            occlSuccess);

  const occlCollStats_t early = statsOncePreempted(comms[0], kId, 10);
  const occlCollStats_t later = statsOncePreempted(comms[0], kId, early.preemptions + 40);
  EXPECT_EQ(early.contextSaves, 1u);
  EXPECT_EQ(later.contextSaves, 1u);
  EXPECT_GE(early.contextLoads, early.preemptions);  // read after preemptions: never behind it
  EXPECT_GT(later.contextLoads, early.contextLoads);
  EXPECT_EQ(later.completions, 0u);

  ASSERT_EQ(occlSubmit(comms[1], kId, send[1].data(), recv[1].data(), &test::CallbackCounter::callback, callbacks.arg()),
            occlSuccess);
  ASSERT_TRUE(callbacks.waitFor(2, 30s));
  for (const auto& [id, status] : callbacks.fired()) EXPECT_EQ(status, occlSuccess) << occlGetErrorString(status);
  for (const auto& out : recv)
    for (float v : out) ASSERT_EQ(v, 2.0f);
  const occlCollStats_t done = sumStats({{comms[0], kId}});
  EXPECT_EQ(statsProblems(done), "");
}

// describePending()'s text when every collective of `plans` has one submission pending.
std::string everyCollectivePending(const std::vector<std::vector<CollPlan>>& plans) {
  std::ostringstream out;
  for (size_t r = 0; r < plans.size(); ++r) {
    out << (r == 0 ? "rank " : "; rank ") << r << ":";
    for (const CollPlan& p : plans[r]) out << " 0x" << std::hex << p.collId << std::dec << " (1 pending)";
  }
  return out.str();
}

// The paper's disordered workload (8 ranks, 8 AllReduces of 256 B..1 MiB, per-rank orders) with
// preemption disabled hangs on its first iteration, and the bounded wait reports it. The hang is
// certain, not a matter of timing: in iteration 0, submissionOrder() rotates rank r's order to
// start with collective r, so every rank's first submission is a different collective. A rank's
// single daemon block takes its first submission to the front of its FIFO task queue and, never
// preempted, spins on it until it completes; it completes only once all 8 ranks run it, and each
// of the other 7 ranks spins on its own first collective. So no collective ever completes.
TEST(PreemptionTest, WithoutPreemptionThePaperWorkloadHangsOnItsFirstIteration) {
  constexpr int kRanks = 8, kColls = 8;
  for (int r = 0; r < kRanks; ++r)
    ASSERT_EQ(submissionOrder(r, 0, kColls, Order::Shuffled, RunOptions{}.seed).front(), static_cast<size_t>(r))
        << "rank " << r << " no longer starts iteration 0 with its own collective: the hang is not certain";
  occlConfig_t config = test::testConfig();
  config.disablePreemption = 1;
  config.daemonBlocks = 1;
  config.orderPolicy = occlOrderFifo;
  PendingTracker tracker(kRanks);
  std::vector<RankBuffers> buffers(kRanks);  // the stuck submissions write them until the abort
  CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(kRanks, config, &first), occlSuccess) << occlGetLastError(nullptr);
  auto plans = singleCommPlans(comms, first, kRanks, geometricCounts(kColls, 256, 1 << 20));
  // The ring for all: the direct AllReduce of the small ones sends its whole input before it
  // receives, so once the abort below frees the ranks, one whose every peer had already sent could
  // complete with all its data (a right answer, and a success), and every failure would not be certain.
  for (auto& rankPlans : plans)
    for (CollPlan& p : rankPlans) p.algorithm = "ring";
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;

  RunOptions o;
  o.iters = 1;
  o.iterTimeout = 2s;
  std::vector<RankResult> results(kRanks);
  test::runRanks(kRanks, [&](int r) { results[r] = runRank(r, plans[r], o, tracker, buffers[r]); });

  // Every rank has submitted all 8 (runRank submits before it waits), none has completed.
  const std::string pending = tracker.describePending();  // runRank has printed it on timing out
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(results[r].timedOut) << "rank " << r;
    EXPECT_EQ(results[r].itersDone, 0) << "rank " << r;
  }
  EXPECT_EQ(pending, everyCollectivePending(plans));

  comms.abortAll();  // fails the stuck submissions; their callbacks have fired once it returns
  EXPECT_EQ(tracker.describePending(), "nothing pending");
  EXPECT_EQ(tracker.failedCallbacks(), static_cast<uint64_t>(kRanks * kColls));
}

}  // namespace
}  // namespace occl::torture
