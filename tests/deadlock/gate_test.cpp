// Gated submission (occlSubmitGated, occlGateOpen; device/gate.hpp): a submission starts on a
// rank only once its gate is open there, gates open in any order on any rank without deadlock,
// an abort fails a gate nobody opened, and every misuse is refused with a message that names it.
// On the host backend and, through occl_add_simt_runs, on simt (the daemon code a GPU runs,
// where a stream's memory write stands in for occlGateOpen).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support/collective_cases.hpp"
#include "support/ranks.hpp"
#include "torture/torture.hpp"

namespace occl {
namespace {

using namespace std::chrono_literals;
using test::CallbackCounter;
using test::CommGroup;
using test::expectOk;
using test::inputValue;

occlCollDesc_t allReduce(size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = count;
  d.datatype = occlFloat32;
  d.op = occlSum;
  return d;
}

void fill(std::vector<float>& buf, int rank) {
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = inputValue(rank, i);
}

// Every rank's AllReduce of inputValue, bit-exact.
void expectSums(const std::vector<float>& out, int nRanks, const std::string& what) {
  for (size_t i = 0; i < out.size(); ++i) {
    float want = 0;
    for (int r = 0; r < nRanks; ++r) want += inputValue(r, i);
    ASSERT_EQ(std::memcmp(&out[i], &want, sizeof(float)), 0)
        << what << " element " << i << ": " << out[i] << ", expected " << want;
  }
}

// A gated submission does not start before its gate opens, even once its peers run theirs: the
// inputs are written only after the submission, so a start before the gate would sum the
// placeholders. No timing: without rank 1's gate the collective cannot complete at all, so the
// bounded waits must time out however loaded the machine is.
TEST(GateTest, NothingStartsBeforeItsGate) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 3000;
  CommGroup comms(kRanks);
  const occlCollDesc_t d = allReduce(kCount);
  for (int r = 0; r < kRanks; ++r) expectOk(occlCollRegister(comms[r], 0x7, &d), comms[r], "occlCollRegister");
  std::vector<std::vector<float>> send(kRanks, std::vector<float>(kCount, -1.0f)), recv(kRanks, std::vector<float>(kCount));
  CallbackCounter done;
  std::vector<occlGate_t> gates(kRanks);
  for (int r = 0; r < kRanks; ++r)
    expectOk(occlSubmitGated(comms[r], 0x7, send[r].data(), recv[r].data(), &CallbackCounter::callback, done.arg(),
                             &gates[r]),
             comms[r], "occlSubmitGated");
  EXPECT_EQ(gates[0].collId, 0x7u);
  EXPECT_EQ(gates[0].seq, 0u);
  fill(send[0], 0);
  expectOk(occlGateOpen(comms[0], gates[0]), comms[0], "occlGateOpen");
  EXPECT_EQ(occlCommWaitAll(comms[0], 200), occlTimeout) << "rank 0 completed without rank 1's gate";
  EXPECT_EQ(occlCommWaitAll(comms[1], 50), occlTimeout) << "rank 1 completed with its gate closed";
  EXPECT_TRUE(done.fired().empty());
  fill(send[1], 1);
  expectOk(occlGateOpen(comms[1], gates[1]), comms[1], "occlGateOpen");
  ASSERT_TRUE(done.waitFor(kRanks));
  for (const auto& [collId, status] : done.fired()) EXPECT_EQ(status, occlSuccess);
  for (int r = 0; r < kRanks; ++r) expectSums(recv[r], kRanks, "rank " + std::to_string(r));
}

// The paper's crossed order (Fig. 1) with gates: rank 0 submits A then B and opens B then A, rank 1
// the reverse of both, each rank opening its second gate only after a pause; then plain
// submissions of both behind the gates. Repeated, every result checked.
TEST(GateTest, CrossedOrdersOfSubmissionAndOpening) {
  constexpr int kRanks = 2, kIters = 20;
  constexpr size_t kCounts[2] = {257, 70000};
  CommGroup comms(kRanks);
  for (int r = 0; r < kRanks; ++r)
    for (int c = 0; c < 2; ++c) {
      const occlCollDesc_t d = allReduce(kCounts[c]);
      expectOk(occlCollRegister(comms[r], 0xA0 + c, &d), comms[r], "occlCollRegister");
    }
  for (int iter = 0; iter < kIters; ++iter) {
    std::vector<std::vector<float>> send[2], recv[2];
    for (int c = 0; c < 2; ++c) {
      send[c].assign(kRanks, std::vector<float>(kCounts[c], -1.0f));
      recv[c].assign(kRanks, std::vector<float>(kCounts[c]));
    }
    CallbackCounter done;
    test::runRanks(kRanks, [&](int r) {
      const int first = r == 0 ? 0 : 1, second = 1 - first;
      occlGate_t gates[2];
      for (int c : {first, second})
        expectOk(occlSubmitGated(comms[r], 0xA0 + c, send[c][r].data(), recv[c][r].data(), &CallbackCounter::callback,
                                 done.arg(), &gates[c]),
                 comms[r], "occlSubmitGated");
      for (int c : {second, first}) {
        fill(send[c][r], r);
        expectOk(occlGateOpen(comms[r], gates[c]), comms[r], "occlGateOpen");
        std::this_thread::sleep_for(std::chrono::milliseconds(iter % 3));
      }
      expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "occlCommWaitAll");
    });
    ASSERT_TRUE(done.waitFor(2 * kRanks));
    for (const auto& [collId, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << collId;
    for (int c = 0; c < 2; ++c)
      for (int r = 0; r < kRanks; ++r)
        expectSums(recv[c][r], kRanks, "iteration " + std::to_string(iter) + " collective " + std::to_string(c) +
                                           " rank " + std::to_string(r));
  }
}

// A closed gate holds the later submissions of its collective (submission order per collId) and
// nothing else: another collective submitted after it completes first.
TEST(GateTest, AClosedGateHoldsOnlyItsOwnCollective) {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 512;
  CommGroup comms(kRanks);
  const occlCollDesc_t d = allReduce(kCount);
  for (int r = 0; r < kRanks; ++r) {
    expectOk(occlCollRegister(comms[r], 0x1, &d), comms[r], "occlCollRegister");
    expectOk(occlCollRegister(comms[r], 0x2, &d), comms[r], "occlCollRegister");
  }
  std::vector<std::vector<float>> gatedSend(kRanks, std::vector<float>(kCount)), gatedRecv = gatedSend;
  std::vector<std::vector<float>> laterRecv = gatedSend, otherSend = gatedSend, otherRecv = gatedSend;
  CallbackCounter gated, other;
  std::vector<occlGate_t> gates(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    fill(gatedSend[r], r);
    fill(otherSend[r], r);
    expectOk(occlSubmitGated(comms[r], 0x1, gatedSend[r].data(), gatedRecv[r].data(), &CallbackCounter::callback,
                             gated.arg(), &gates[r]),
             comms[r], "occlSubmitGated");
    // Its successor on the same collective, ungated: it must wait behind the gate.
    expectOk(occlSubmit(comms[r], 0x1, gatedSend[r].data(), laterRecv[r].data(), &CallbackCounter::callback, gated.arg()),
             comms[r], "occlSubmit");
    expectOk(occlSubmit(comms[r], 0x2, otherSend[r].data(), otherRecv[r].data(), &CallbackCounter::callback, other.arg()),
             comms[r], "occlSubmit");
  }
  ASSERT_TRUE(other.waitFor(kRanks)) << "a closed gate of collId 0x1 held collId 0x2";
  EXPECT_TRUE(gated.fired().empty()) << "collId 0x1 ran behind a closed gate";
  for (int r = 0; r < kRanks; ++r) expectSums(otherRecv[r], kRanks, "collId 0x2 rank " + std::to_string(r));
  for (int r = 0; r < kRanks; ++r) expectOk(occlGateOpen(comms[r], gates[r]), comms[r], "occlGateOpen");
  ASSERT_TRUE(gated.waitFor(2 * kRanks));
  for (int r = 0; r < kRanks; ++r) {
    expectSums(gatedRecv[r], kRanks, "gated rank " + std::to_string(r));
    expectSums(laterRecv[r], kRanks, "its successor, rank " + std::to_string(r));
  }
}

// Misuse is refused, names what was wrong, and loses nothing: the gate still opens afterwards.
TEST(GateTest, MisuseIsRefusedAndNamed) {
  constexpr int kRanks = 2;
  CommGroup comms(kRanks);
  const occlCollDesc_t d = allReduce(64);
  for (int r = 0; r < kRanks; ++r) expectOk(occlCollRegister(comms[r], 0x5, &d), comms[r], "occlCollRegister");
  std::vector<std::vector<float>> send(kRanks, std::vector<float>(64)), recv = send, plainRecv = send;
  for (int r = 0; r < kRanks; ++r) fill(send[r], r);
  CallbackCounter done;
  occlComm_t c0 = comms[0];

  EXPECT_EQ(occlSubmitGated(c0, 0x5, send[0].data(), recv[0].data(), &CallbackCounter::callback, nullptr, nullptr),
            occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(c0)).find("gate is NULL"), std::string::npos) << occlGetLastError(c0);

  // A plain submission's number is not a gate.
  for (int r = 0; r < kRanks; ++r)
    expectOk(occlSubmit(comms[r], 0x5, send[r].data(), plainRecv[r].data(), &CallbackCounter::callback, done.arg()),
             comms[r], "occlSubmit");
  std::vector<occlGate_t> gates(kRanks);
  for (int r = 0; r < kRanks; ++r)
    expectOk(occlSubmitGated(comms[r], 0x5, send[r].data(), recv[r].data(), &CallbackCounter::callback, done.arg(),
                             &gates[r]),
             comms[r], "occlSubmitGated");
  EXPECT_EQ(gates[0].seq, 1u);
  EXPECT_EQ(occlGateOpen(c0, occlGate_t{0x5, 0}), occlInvalidUsage);  // outstanding or completed, never a gate
  EXPECT_EQ(occlGateOpen(c0, occlGate_t{0x5, 7}), occlInvalidUsage);
  EXPECT_NE(std::string(occlGetLastError(c0)).find("names no outstanding submission"), std::string::npos)
      << occlGetLastError(c0);
  EXPECT_EQ(occlGateOpen(c0, occlGate_t{0x6, 1}), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(c0)).find("gate.collId 0x6 is not registered"), std::string::npos)
      << occlGetLastError(c0);
  EXPECT_EQ(occlSubmitOnStream(c0, 0x5, send[0].data(), recv[0].data(), nullptr, &CallbackCounter::callback, nullptr),
            occlInvalidUsage);
  EXPECT_NE(std::string(occlGetLastError(c0)).find("needs a CUDA rank"), std::string::npos) << occlGetLastError(c0);

  for (int r = 0; r < kRanks; ++r) expectOk(occlGateOpen(comms[r], gates[r]), comms[r], "occlGateOpen");
  EXPECT_EQ(occlGateOpen(c0, gates[0]), occlInvalidUsage);  // open already, or completed since
  ASSERT_TRUE(done.waitFor(2 * kRanks));
  for (const auto& [collId, status] : done.fired()) EXPECT_EQ(status, occlSuccess);
  for (int r = 0; r < kRanks; ++r) {
    expectSums(plainRecv[r], kRanks, "plain rank " + std::to_string(r));
    expectSums(recv[r], kRanks, "gated rank " + std::to_string(r));
  }
}

// A gate nobody opens does not hold occlCommAbort: its submission fails with occlAborted.
TEST(GateTest, AbortFailsAGateNobodyOpened) {
  constexpr int kRanks = 2;
  occlComm_t comms[kRanks] = {};
  occlConfig_t config = test::testConfig();
  ASSERT_EQ(occlCommInitAll(comms, kRanks, nullptr, &config), occlSuccess) << occlGetLastError(nullptr);
  const occlCollDesc_t d = allReduce(256);
  for (occlComm_t c : comms) expectOk(occlCollRegister(c, 0x9, &d), c, "occlCollRegister");
  std::vector<float> send(256), recv(256);
  CallbackCounter done;
  occlGate_t gate{};
  expectOk(occlSubmitGated(comms[0], 0x9, send.data(), recv.data(), &CallbackCounter::callback, done.arg(), &gate),
           comms[0], "occlSubmitGated");
  ASSERT_EQ(occlCommAbort(comms[0]), occlSuccess);  // frees comms[0]
  ASSERT_TRUE(done.waitFor(1, 30s)) << "occlCommAbort did not fail the gated submission";
  EXPECT_EQ(done.fired()[0].second, occlAborted);
  EXPECT_EQ(occlCommDestroy(comms[1]), occlSuccess);
}

// The torture with gates (torture.hpp, RunOptions::gates): every rank submits its collectives in
// its own order before their inputs exist; a thread of its own writes each input and opens its
// gate in another order; every byte checked, 2, 4 and 8 ranks.
class GateTorture : public ::testing::TestWithParam<int> {};

TEST_P(GateTorture, GatesOpenedInRandomOrdersPerRank) {
  using namespace torture;
  const int nRanks = GetParam();
  const int iters = nRanks == 8 ? 15 : 40;
  PendingTracker tracker(nRanks);
  CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(nRanks, test::testConfig(), &first), occlSuccess) << occlGetLastError(nullptr);
  auto plans = singleCommPlans(comms, first, nRanks, geometricCounts(6, 64, 256 << 10));
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = iters;
  o.gates = true;
  o.seed = 11 + static_cast<uint64_t>(nRanks);
  o.iterTimeout = 30s;
  auto results = runRankThreads(plans, o, tracker, comms);
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_FALSE(results[r].timedOut) << "rank " << r << " hung (pending collectives are printed above)";
    EXPECT_EQ(results[r].itersDone, iters) << "rank " << r;
    EXPECT_EQ(results[r].wrong, 0u) << results[r].firstWrong;
  }
  EXPECT_EQ(tracker.failedCallbacks(), 0u) << tracker.firstFailure();
}

INSTANTIATE_TEST_SUITE_P(Ranks, GateTorture, ::testing::Values(2, 4, 8),
                         [](const ::testing::TestParamInfo<int>& i) { return std::to_string(i.param) + "ranks"; });

// The GPU's stream torture (gpu_streams_test) with threads for streams: four ranks, eight
// collectives of both dtype classes, one float in place among them, each rank with four "streams"
// (threads). Stream k carries collectives k and k + 4; the rank submits all eight gated at once, in
// an order of its own, as occlSubmitOnStream does when the host enqueues; each stream then, per
// collective, holds 0-8 ms, poisons the buffers, writes the input, opens the gate, waits for that
// submission's completion and copies the result out, as the stream's download does. A rank checks
// its copies once its own streams are done, and starts its next iteration at once, while its
// peers may still run theirs; the live buffers are checked again after the last iteration. Its
// shape on the host and simt daemons (on an H200 the stream version first failed through a check
// of its own that read freed memory: bench/results/gpu-2026-11-30.md).
TEST(GateTest, StreamShapedTortureChecksEachRankAsItsStreamsEnd) {
  constexpr int kRanks = 4, kColls = 8, kStreams = 4, kIterations = 6;
  constexpr size_t kCounts[kColls] = {1, 1000, 4099, 65536, 100003, 262147, 5, 33};
  CommGroup g(kRanks);
  std::vector<test::Spec> specs(kColls);
  std::vector<uint64_t> ids(kColls);
  for (int c = 0; c < kColls; ++c) {
    specs[c].count = kCounts[c];
    specs[c].dtype = c % 2 == 0 ? occlFloat32 : occlInt32;
    specs[c].inPlace = c % 3 == 0;
    ids[c] = test::nextCollId();
    for (int r = 0; r < kRanks; ++r) {
      const occlCollDesc_t d = test::descFor(specs[c], r);
      expectOk(occlCollRegister(g[r], ids[c], &d), g[r], "occlCollRegister");
    }
  }
  // live[c][r]: the buffers the daemon reads and writes; inputs[c][r]: what is written before a gate opens.
  std::vector<std::vector<test::RankIo>> live(kColls), inputs(kColls);
  for (int c = 0; c < kColls; ++c) {
    inputs[c] = test::prepare(specs[c], kRanks);
    live[c] = inputs[c];  // a RankIo's copy points into its own buffers
  }
  // One completion flag per (collective, rank), set by that submission's callback.
  struct Done {
    std::atomic<int> fired{0};
    std::atomic<int> status{occlSuccess};
  };
  std::vector<std::vector<Done>> done(kColls);
  for (auto& row : done) row = std::vector<Done>(kRanks);
  const occlCallback_t mark = [](uint64_t, occlResult_t status, void* arg) {
    auto* d = static_cast<Done*>(arg);
    d->status.store(status, std::memory_order_relaxed);
    d->fired.fetch_add(1, std::memory_order_release);
  };
  test::runRanks(kRanks, [&](int r) {
    const auto i = static_cast<size_t>(r);
    std::mt19937 rng(static_cast<unsigned>(r * 7919 + 17));
    for (int iter = 0; iter < kIterations; ++iter) {
      std::vector<int> turns;
      for (int k = 0; k < kStreams; ++k) turns.insert(turns.end(), {k, k});
      std::shuffle(turns.begin(), turns.end(), rng);
      std::vector<occlGate_t> gates(kColls);
      std::vector<int> holdMs(kColls);
      int enqueued[kStreams] = {};
      for (int k : turns) {
        const int c = k + kStreams * enqueued[k]++;
        holdMs[c] = std::uniform_int_distribution<int>(0, 8)(rng);
        test::RankIo& io = live[c][i];
        expectOk(occlSubmitGated(g[r], ids[c], io.send, io.recv, mark, &done[c][i], &gates[c]), g[r], "occlSubmitGated");
      }
      std::vector<test::RankIo> copies(kColls);
      std::vector<std::thread> streams;
      for (int k = 0; k < kStreams; ++k) {
        streams.emplace_back([&, k] {
          for (int c : {k, k + kStreams}) {
            std::this_thread::sleep_for(std::chrono::milliseconds(holdMs[c]));
            test::RankIo& io = live[c][i];
            std::fill(io.first.begin(), io.first.end(), std::byte{0xff});
            std::fill(io.second.begin(), io.second.end(), std::byte{0xff});
            std::copy(inputs[c][i].first.begin(), inputs[c][i].first.end(), io.first.begin());
            std::copy(inputs[c][i].second.begin(), inputs[c][i].second.end(), io.second.begin());
            expectOk(occlGateOpen(g[r], gates[c]), g[r], "occlGateOpen");
            const auto deadline = std::chrono::steady_clock::now() + 60s;
            while (done[c][i].fired.load(std::memory_order_acquire) <= iter) {
              if (std::chrono::steady_clock::now() > deadline) return;  // the check below reports it
              std::this_thread::sleep_for(100us);
            }
            copies[c] = io;
          }
        });
      }
      for (auto& t : streams) t.join();
      for (int c = 0; c < kColls; ++c) {
        if (done[c][i].fired.load(std::memory_order_acquire) <= iter)
          throw std::runtime_error("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " " +
                                   test::describe(specs[c]) + ": no completion within 60 s");
        if (done[c][i].status.load(std::memory_order_relaxed) != occlSuccess)
          throw std::runtime_error(test::describe(specs[c]) + " failed on rank " + std::to_string(r));
        const std::string bad = test::mismatch(specs[c], r, copies[c]);
        if (!bad.empty())
          throw std::runtime_error("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " " + bad);
      }
    }
  });
  for (int c = 0; c < kColls; ++c)
    for (int r = 0; r < kRanks; ++r)
      EXPECT_EQ(test::mismatch(specs[c], r, live[c][static_cast<size_t>(r)]), "") << "after the last iteration";
  for (int c = 0; c < kColls; ++c)
    for (int r = 0; r < kRanks; ++r) expectOk(occlCollDeregister(g[r], ids[c]), g[r], "occlCollDeregister");
}

// Gates over several communicators: ranks 0..3 in two pairs and one group of all four, each rank
// submitting to its communicators in its own order and opening in another.
TEST(GateTest, GatesAcrossSeveralCommunicators) {
  using namespace torture;
  constexpr int kRanks = 4, kIters = 20;
  const std::vector<std::vector<int>> groups = {{0, 1}, {2, 3}, {0, 1, 2, 3}};
  PendingTracker tracker(kRanks);
  CommSet comms;
  std::vector<std::vector<CollPlan>> plans(kRanks);
  for (size_t g = 0; g < groups.size(); ++g) {
    size_t first = 0;
    const int n = static_cast<int>(groups[g].size());
    ASSERT_EQ(comms.initAll(n, test::testConfig(), &first), occlSuccess) << occlGetLastError(nullptr);
    for (int c = 0; c < 2; ++c)
      for (int m = 0; m < n; ++m) {
        CollPlan p;
        p.comm = comms[first + static_cast<size_t>(m)];
        p.collId = (g << 8) | static_cast<uint64_t>(c);
        p.count = c == 0 ? 33 : 20000 + 1000 * g;
        p.members = groups[g];
        plans[static_cast<size_t>(groups[g][static_cast<size_t>(m)])].push_back(p);
      }
  }
  std::string error;
  for (const auto& p : plans) ASSERT_EQ(registerAll(p, &error), occlSuccess) << error;
  RunOptions o;
  o.iters = kIters;
  o.gates = true;
  o.seed = 5;
  o.iterTimeout = 30s;
  auto results = runRankThreads(plans, o, tracker, comms);
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_FALSE(results[r].timedOut) << "rank " << r;
    EXPECT_EQ(results[r].itersDone, kIters) << "rank " << r;
    EXPECT_EQ(results[r].wrong, 0u) << results[r].firstWrong;
  }
  EXPECT_EQ(tracker.failedCallbacks(), 0u) << tracker.firstFailure();
}

}  // namespace
}  // namespace occl
