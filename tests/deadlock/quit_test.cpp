// Voluntary quit (paper §3.1.3) on the host backend: a daemon with nothing pending for
// idleQuitUs parks, so the process stops using CPU, and the next submission wakes it. A rank
// whose peer submits its side seconds later still completes.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "torture/torture.hpp"
#include "support/ranks.hpp"

namespace occl::torture {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kRanks = 2;
constexpr uint64_t kId = 0x9017;
constexpr size_t kCount = 64 << 10;

struct Pair {
  // Declared before the communicators, so they outlive them (callbacks, daemon writes).
  PendingTracker tracker{kRanks};
  std::vector<std::vector<float>> in = std::vector<std::vector<float>>(kRanks, std::vector<float>(kCount));
  std::vector<std::vector<float>> out = std::vector<std::vector<float>>(kRanks, std::vector<float>(kCount));
  CommSet comms;

  explicit Pair(const occlConfig_t& config) {
    EXPECT_EQ(comms.initAll(kRanks, config, nullptr), occlSuccess) << occlGetLastError(nullptr);
    for (int r = 0; r < kRanks; ++r) {
      CollPlan p;
      p.comm = comms[static_cast<size_t>(r)];
      p.count = kCount;
      occlCollDesc_t d = allReduceDesc(p);
      EXPECT_EQ(occlCollRegister(p.comm, kId, &d), occlSuccess) << occlGetLastError(p.comm);
      std::fill(in[r].begin(), in[r].end(), static_cast<float>(r + 1));
    }
  }
  void submit(int r) {
    ASSERT_EQ(tracker.submit(comms[static_cast<size_t>(r)], tracker.slot(r, kId), in[r].data(), out[r].data()),
              occlSuccess);
  }
  void expectSums() {
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(out[r][0], 3.0f) << "rank " << r;
      EXPECT_EQ(out[r][kCount - 1], 3.0f) << "rank " << r;
    }
  }
};

// Fraction of one core this process used over `window`.
double cpuShareOver(std::chrono::milliseconds window) {
  double cpu0 = processCpuSeconds();
  auto t0 = Clock::now();
  std::this_thread::sleep_for(window);
  double wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return (processCpuSeconds() - cpu0) / wall;
}

TEST(QuitTest, IdleDaemonParksAndTheNextSubmissionWakesIt) {
  occlConfig_t config = test::testConfig();
  config.idleQuitUs = 2000;
  Pair job(config);
  ASSERT_FALSE(HasFailure());
  for (int r = 0; r < kRanks; ++r) ASSERT_NO_FATAL_FAILURE(job.submit(r));
  ASSERT_TRUE(job.tracker.wait(-1, 30s)) << job.tracker.describePending();
  job.expectSums();

  std::this_thread::sleep_for(50ms);  // >> idleQuitUs: both daemons have quit (parked)
  const double idleShare = cpuShareOver(1000ms);
  std::printf("[torture] CPU while idle: %.2f%% of a core\n", 100 * idleShare);
  EXPECT_LT(idleShare, 0.015) << "an idle communicator keeps using CPU: the daemon did not park";

  auto woken = Clock::now();
  for (int r = 0; r < kRanks; ++r) ASSERT_NO_FATAL_FAILURE(job.submit(r));
  ASSERT_TRUE(job.tracker.wait(-1, 30s)) << job.tracker.describePending();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - woken).count();
  std::printf("[torture] submission after the quit completed in %lld ms\n", static_cast<long long>(ms));
  EXPECT_LT(ms, 5000) << "the parked daemon woke up late";
  job.expectSums();
  EXPECT_EQ(job.tracker.failedCallbacks(), 0u) << job.tracker.firstFailure();
  occlCollStats_t s = sumStats({{job.comms[0], kId}, {job.comms[1], kId}});
  EXPECT_EQ(s.completions, 4u);
  EXPECT_EQ(statsProblems(s), "");
}

TEST(QuitTest, RankWhosePeerSubmitsSecondsLaterStillCompletes) {
  Pair job(test::testConfig());
  ASSERT_FALSE(HasFailure());
  ASSERT_NO_FATAL_FAILURE(job.submit(0));
  std::this_thread::sleep_for(300ms);
  const double stuckShare = cpuShareOver(2200ms);  // rank 0 waits for a peer that is not there
  std::printf("[torture] CPU while rank 0 waits for its late peer: %.1f%% of a core\n", 100 * stuckShare);
  EXPECT_TRUE(job.tracker.completionOrder(0).empty()) << "completed without its peer";
  ASSERT_NO_FATAL_FAILURE(job.submit(1));
  ASSERT_TRUE(job.tracker.wait(-1, 30s)) << job.tracker.describePending();
  EXPECT_EQ(job.tracker.failedCallbacks(), 0u) << job.tracker.firstFailure();
  job.expectSums();
  occlCollStats_t s0{}, s1{};
  ASSERT_EQ(occlCollGetStats(job.comms[0], kId, &s0), occlSuccess);
  ASSERT_EQ(occlCollGetStats(job.comms[1], kId, &s1), occlSuccess);
  EXPECT_GT(s0.preemptions, 0u) << "rank 0 should have given up its wait again and again";
  EXPECT_GT(s0.queueWaitNs + s0.executionNs, 2'000'000'000ull) << "rank 0 waited 2.5 s for its peer";
  EXPECT_EQ(statsProblems(s0), "");
  EXPECT_EQ(statsProblems(s1), "");
}

}  // namespace
}  // namespace occl::torture
