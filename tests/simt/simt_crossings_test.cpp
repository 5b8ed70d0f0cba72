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

// Per 8 B AllReduce, one daemon block, one tile, on any number of ranks of one process (issue
// 40's target):
//   reads: the SQ poll that finds the entry (one 64-byte line: queues/sq.hpp)
//   writes: the CQE (queues/cq.hpp: the ring takes credit from the poller's head, read once per
//           cqDepth CQEs, and the SQ asks for a block's cursor once per sqDepth / 2 entries; neither
//           comes within the 60 collectives measured here)
// The abort flag, the statistics and the block's state are device memory; the held count and the
// CQE count are reported as a block leaves a launch.
constexpr double kReadsPerSmallCollective = 1;
constexpr double kWritesPerSmallCollective = 1;

struct PerCollective {
  double reads, writes, rmws;
  double waitLooks;  // looks for new submissions by waits that were not ready, counted apart
};

// How each collective is submitted: occlSubmit; occlSubmitGated with its gate opened right after;
// occlSubmitCount of 2 elements under a registration of kVariableMax (desc.variableCount).
enum class How { Plain, Gated, Variable };
constexpr size_t kVariableMax = size_t{1} << 20;

// Runs `iters` 8 B AllReduces one after another on every rank of a simt communicator with
// `blocks` daemon blocks and returns the crossings of the last `iters - warmup`, per collective
// and rank.
PerCollective measure(int nRanks, int iters, int warmup, int blocks = 1, How how = How::Plain) {
  exec::simt::countCrossings(true);  // before the first launch: its lanes count
  occlConfig_t cfg = testConfig();
  cfg.backend = occlBackendSimt;
  cfg.daemonBlocks = blocks;
  cfg.idleQuitUs = 10'000'000;  // no voluntary quit between collectives: its words are crossings too
  CommGroup comms(nRanks, cfg);
  std::vector<std::vector<float>> bufs(nRanks, std::vector<float>(2, 1.0f));
  for (int r = 0; r < nRanks; ++r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = how == How::Variable ? kVariableMax : 2;
    d.variableCount = how == How::Variable ? 1 : 0;
    expectOk(occlCollRegister(comms[r], 1, &d), comms[r], "register");
  }
  exec::simt::Crossings before;
  auto runOne = [&] {
    runRanks(nRanks, [&](int r) {
      CallbackCounter done;
      if (how == How::Gated) {
        occlGate_t gate{};
        expectOk(occlSubmitGated(comms[r], 1, bufs[r].data(), bufs[r].data(), &CallbackCounter::callback, done.arg(),
                                 &gate),
                 comms[r], "occlSubmitGated");
        expectOk(occlGateOpen(comms[r], gate), comms[r], "occlGateOpen");
      } else {
        expectOk(occlSubmitCount(comms[r], 1, how == How::Variable ? 2 : OCCL_COUNT_REGISTERED, bufs[r].data(),
                                 bufs[r].data(), &CallbackCounter::callback, done.arg()),
                 comms[r], "submit");
      }
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
          static_cast<double>(after.rmws - before.rmws) / n,
          static_cast<double>(after.waitLooks - before.waitLooks) / n};
}

TEST(SimtCrossings, ASmallCollectiveOnOneRankCrossesAsPinned) {
  const PerCollective c = measure(1, 60, 10);
  EXPECT_EQ(c.reads, kReadsPerSmallCollective);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0) << "a GPU's read-modify-write of host memory needs native atomics across the bus";
  RecordProperty("reads", std::to_string(c.reads));
  RecordProperty("writes", std::to_string(c.writes));
}

// Four ranks of one process: each also waits on its peers. A wait looks at the abort flag and for
// failures in device memory; a preempted try's statistics are device memory too. What a wait adds
// across the bus is a look for new submissions after 63 rounds not ready (SpinBudget::
// arrivalLookRound), which depends on how long the peers take and is counted apart.
TEST(SimtCrossings, FourRanksOfOneProcessCrossAsOneRank) {
  const PerCollective c = measure(4, 40, 10);
  EXPECT_EQ(c.reads, kReadsPerSmallCollective);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0);
  RecordProperty("reads", std::to_string(c.reads));
  RecordProperty("writes", std::to_string(c.writes));
  RecordProperty("wait_looks", std::to_string(c.waitLooks));
}

// Several daemon blocks fan out (daemon/daemon.hpp): block 0 alone reads the SQ, and the entry of
// a one-part collective goes no further, so the other blocks add no crossing. Without fan-out
// each of the four blocks would read every entry.
TEST(SimtCrossings, FourDaemonBlocksReadASmallCollectiveOnce) {
  const PerCollective c = measure(1, 60, 10, /*blocks=*/4);
  EXPECT_EQ(c.reads, kReadsPerSmallCollective);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0);
}

// A gated submission (device/gate.hpp): the gate's words are shared memory (mapped pinned memory
// on a GPU, where a stream's 32-bit operations refuse pool memory: bench/results/gpu-2026-11-30.md),
// so the done word is one more write, and each look at the gate one more read: at least the look
// that finds it open. A look that finds it still closed (the host opens it right after the
// submission, and the daemon may look first) adds a read per pass, which this test leaves unpinned.
TEST(SimtCrossings, AGatedCollectiveCrossesForItsGateWordsOnly) {
  const PerCollective c = measure(2, 40, 10, /*blocks=*/1, How::Gated);
  EXPECT_GE(c.reads, kReadsPerSmallCollective + 1);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective + 1);
  EXPECT_EQ(c.rmws, 0);
}

TEST(SimtCrossings, TwoRanksOfThreeDaemonBlocksReadASmallCollectiveOnce) {
  const PerCollective c = measure(2, 40, 10, /*blocks=*/3);
  EXPECT_EQ(c.reads, kReadsPerSmallCollective);
  EXPECT_EQ(c.writes, kWritesPerSmallCollective);
  EXPECT_EQ(c.rmws, 0);
}

// A count per submission (desc.variableCount): the count rides in the SQE's line, so a small
// count under a large maximum (4 MiB) crosses the bus as a small registration does. On four daemon
// blocks the maximum has four parts, but a small count runs the small-message form of one part
// (docs/design.md): block 0 takes it and relays nothing, and writes its CQE, as for a small
// registration. (Before the small form the parts went to every block and the last to finish wrote
// the CQE, from a block whose first CQE read the poller's head for its credit: up to a tenth of a
// read more per collective.)
TEST(SimtCrossings, ASmallCountUnderALargeMaximumCrossesAsASmallCollective) {
  const PerCollective one = measure(2, 40, 10, /*blocks=*/1, How::Variable);
  EXPECT_EQ(one.reads, kReadsPerSmallCollective);
  EXPECT_EQ(one.writes, kWritesPerSmallCollective);
  EXPECT_EQ(one.rmws, 0);
  const PerCollective four = measure(2, 40, 10, /*blocks=*/4, How::Variable);
  EXPECT_EQ(four.reads, kReadsPerSmallCollective);
  EXPECT_EQ(four.writes, kWritesPerSmallCollective);
  EXPECT_EQ(four.rmws, 0);
}

}  // namespace
}  // namespace occl::test
