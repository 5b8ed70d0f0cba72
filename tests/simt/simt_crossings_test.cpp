// Bus crossings of the CUDA daemon's device code, counted on the simt backend
// (device/simt_crossings.hpp): every lane access to memory that a GPU reaches across PCIe (the SQ,
// the CQ, the block reports, the abort flag, the statistics). A small collective's time on a GPU
// is mostly these crossings (~1.5 us each on an H200), so this test pins their number: a change
// that adds one fails here, and one that removes one lowers the constants below.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "device/simt_crossings.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

// Per 8 B AllReduce on one rank, one daemon block, one tile (issue 40's target: 1 and 1).
//   reads: the SQ poll that finds the entry and its 5 fields; the abort flag at the try's start;
//          the CQ slot before it is written
//   writes: the block's SQ cursor (its report); the CQE and the ring's count
// (The statistics, 4 loads and 4 stores a collective in pinned memory, are in device memory; the
// count of held tasks, 2 stores, is reported as a block leaves a launch.)
constexpr double kReadsPerSmallCollective = 8;
constexpr double kWritesPerSmallCollective = 3;

struct PerCollective {
  double reads, writes, rmws;
};

// Runs `iters` 8 B AllReduces one after another on every rank of a one-block simt communicator
// and returns the crossings of the last `iters - warmup`, per collective and rank.
PerCollective measure(int nRanks, int iters, int warmup) {
  exec::simt::countCrossings(true);  // before the first launch: its lanes count
  occlConfig_t cfg = testConfig();
  cfg.backend = occlBackendSimt;
  cfg.daemonBlocks = 1;
  cfg.idleQuitUs = 10'000'000;  // no voluntary quit between collectives: its words are crossings too
  CommGroup comms(nRanks, cfg);
  std::vector<std::vector<float>> bufs(nRanks, std::vector<float>(2, 1.0f));
  for (int r = 0; r < nRanks; ++r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = 2;
    expectOk(occlCollRegister(comms[r], 1, &d), comms[r], "register");
  }
  exec::simt::Crossings before;
  auto runOne = [&] {
    runRanks(nRanks, [&](int r) {
      CallbackCounter done;
      expectOk(occlSubmit(comms[r], 1, bufs[r].data(), bufs[r].data(), &CallbackCounter::callback, done.arg()), comms[r],
               "submit");
      if (!done.waitFor(1) || done.fired()[0].second != occlSuccess) throw std::runtime_error("collective failed");
    });
  };
  for (int i = 0; i < warmup; ++i) runOne();
  before = exec::simt::crossings();
  for (int i = warmup; i < iters; ++i) runOne();
  const exec::simt::Crossings after = exec::simt::crossings();
  exec::simt::countCrossings(false);
  const double n = static_cast<double>(iters - warmup) * nRanks;
  // Each block's poll that found the entry is a read of the collective's; the idle polls are not.
  return {(static_cast<double>(after.reads - before.reads) + n) / n, static_cast<double>(after.writes - before.writes) / n,
          static_cast<double>(after.rmws - before.rmws) / n};
}

TEST(SimtCrossings, ASmallCollectiveOnOneRankCrossesAsPinned) {
  const PerCollective c = measure(1, 60, 10);
  EXPECT_EQ(c.reads, kReadsPerSmallCollective);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0) << "a GPU's read-modify-write of host memory needs native atomics across the bus";
  RecordProperty("reads", std::to_string(c.reads));
  RecordProperty("writes", std::to_string(c.writes));
}

// Four ranks of one process: each also waits on its peers; a wait looks at the abort flag every
// 64 rounds and a preempted try bumps the statistics (preemptions, context loads), so both counts
// depend on timing and only their floor is the one rank's.
TEST(SimtCrossings, FourRanksOfOneProcessCrossAtLeastAsOneRank) {
  const PerCollective c = measure(4, 40, 10);
  EXPECT_GE(c.reads, kReadsPerSmallCollective);
  EXPECT_GE(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0);
  RecordProperty("reads", std::to_string(c.reads));
  RecordProperty("writes", std::to_string(c.writes));
}

}  // namespace
}  // namespace occl::test
