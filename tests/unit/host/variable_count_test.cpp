// A count per submission (desc.variableCount, occlSubmitCount): collectives of every type
// registered once with a maximum count, then submitted with random counts up to it (0 and the
// maximum among them) in a different random order on every rank, every receive buffer checked
// against nccl-tests' exact values; buffers sized for each submission's count alone, so a rank
// that reached past them shows under AddressSanitizer. Ranks that pass different counts for the
// same submission fail it on every rank with both counts named. Bad counts are refused by name.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "occl/occl.h"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr int kRanks = 4;
constexpr size_t kMaxCount = 2000;

// The collectives, each registered with kMaxCount: every type (the Send/Recv pair aside), several
// dtypes and ops, the ring on two blocks, roots other than 0.
std::vector<Spec> collectives() {
  std::vector<Spec> out;
  auto add = [&](int type, int dtype, int op, int root, const char* algorithm = nullptr, int nBlocks = 0) {
    Spec s;
    s.type = type;
    s.dtype = dtype;
    s.op = op;
    s.count = kMaxCount;
    s.root = root;
    s.algorithm = algorithm;
    s.nBlocks = nBlocks;
    out.push_back(s);
  };
  add(occlCollAllReduce, occlFloat32, occlSum, 0);
  add(occlCollAllReduce, occlInt32, occlMax, 0, "ring", 2);
  add(occlCollAllReduce, occlBfloat16, occlAvg, 0, "ring");
  add(occlCollBroadcast, occlFloat16, occlSum, 1);
  add(occlCollReduce, occlFloat64, occlSum, 2);
  add(occlCollAllGather, occlInt8, occlSum, 0);
  add(occlCollReduceScatter, occlFloat32, occlMin, 0);
  add(occlCollAllToAll, occlUint8, occlSum, 0);
  add(occlCollGather, occlInt64, occlSum, 3);
  add(occlCollScatter, occlUint32, occlSum, 1);
  return out;
}

occlCollDesc_t variableDesc(const Spec& s, int rank) {
  occlCollDesc_t d = descFor(s, rank);
  d.variableCount = 1;
  return d;
}

// Submission k of collective c: its count and placement, the same on every rank (drawn from a
// seed of (c, k)); 0 and the maximum come up often.
Spec submissionSpec(const Spec& registered, int c, int k) {
  std::mt19937_64 rng(static_cast<uint64_t>(c) * 100003u + static_cast<uint64_t>(k));
  Spec s = registered;
  const uint64_t pick = rng() % 16;
  s.count = pick == 0 ? 0 : pick == 1 ? kMaxCount : static_cast<size_t>(rng() % (kMaxCount + 1));
  s.inPlace = hasInPlace(s.type) && rng() % 3 == 0;
  return s;
}

// Rounds of `perColl` submissions of every collective per rank, in an order of its own on each
// rank (a collective's k-th still before its (k+1)-th), each with its own count; every receive
// buffer is checked. Returns the submissions made per rank.
int runRandomCounts(int total, uint32_t seed) {
  const std::vector<Spec> colls = collectives();
  const int nColls = static_cast<int>(colls.size());
  constexpr int kPerColl = 3;
  const int rounds = (total + nColls * kPerColl - 1) / (nColls * kPerColl);
  CallbackCounter done[kRanks];  // before the communicators: a failed wait must not free what is in flight
  std::vector<std::vector<RankIo>> io(static_cast<size_t>(nColls * kPerColl));  // one round's, [run][rank]
  occlConfig_t config = testConfig();
  config.daemonBlocks = 2;  // the ring of two blocks
  CommGroup comms(kRanks, config);
  for (int r = 0; r < kRanks; ++r)
    for (int c = 0; c < nColls; ++c) {
      const occlCollDesc_t d = variableDesc(colls[static_cast<size_t>(c)], r);
      expectOk(occlCollRegister(comms[r], 0x900u + static_cast<uint64_t>(c), &d), comms[r], "register");
    }
  int submitted = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Spec> specs;
    for (int c = 0; c < nColls; ++c)
      for (int j = 0; j < kPerColl; ++j) {
        specs.push_back(submissionSpec(colls[static_cast<size_t>(c)], c, round * kPerColl + j));
        io[static_cast<size_t>(c * kPerColl + j)] = prepare(specs.back(), kRanks);
      }
    runRanks(kRanks, [&](int r) {
      std::mt19937 rng(seed + static_cast<uint32_t>(round * kRanks + r));
      std::vector<int> order;
      for (int c = 0; c < nColls; ++c) order.insert(order.end(), kPerColl, c);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<int> next(static_cast<size_t>(nColls), 0);
      for (int c : order) {
        const int run = c * kPerColl + next[static_cast<size_t>(c)]++;
        RankIo& mine = io[static_cast<size_t>(run)][static_cast<size_t>(r)];
        expectOk(occlSubmitCount(comms[r], 0x900u + static_cast<uint64_t>(c), specs[static_cast<size_t>(run)].count,
                                 mine.send, mine.recv, &CallbackCounter::callback, done[r].arg()),
                 comms[r], "occlSubmitCount " + describe(specs[static_cast<size_t>(run)]));
      }
      expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll");
    });
    submitted += nColls * kPerColl;
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_TRUE(done[r].waitFor(static_cast<size_t>(submitted), std::chrono::seconds(60)));
      for (auto [id, status] : done[r].fired())
        EXPECT_EQ(status, occlSuccess) << "rank " << r << " collId 0x" << std::hex << id << ": " << occlGetLastError(comms[r]);
    }
    for (size_t run = 0; run < specs.size(); ++run)
      for (int r = 0; r < kRanks; ++r) {
        const std::string bad = mismatch(specs[run], r, io[run][static_cast<size_t>(r)]);
        EXPECT_TRUE(bad.empty()) << "round " << round << ": " << bad;
        if (!bad.empty()) return submitted;
      }
  }
  return submitted;
}

TEST(VariableCountTest, RandomCountsInRandomOrdersOnEveryTypeAreExact) {
  // 1,020 submissions per rank on the host; the simt runs (three lane counts, ThreadSanitizer) 210.
  const int made = runRandomCounts(onSimt() ? 200 : 1000, 0x5eed);
  EXPECT_GE(made, onSimt() ? 200 : 1000);
}

// Rank 2 submits another count than the others for the second submission of an AllReduce: every
// rank fails it with occlInvalidUsage, none completes it with data from the other count, the
// ranks that received from rank 2 name both counts, and the collective stays failed.
void expectMismatchFailsEverywhere(const char* algorithm, uint64_t collId) {
  constexpr size_t kMax = 4096;
  CallbackCounter done[kRanks];
  std::vector<float> send[kRanks], recv[kRanks];
  CommGroup comms(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kMax;
    d.variableCount = 1;
    d.algorithm = algorithm;
    expectOk(occlCollRegister(comms[r], collId, &d), comms[r], "register");
    send[r].assign(kMax, static_cast<float>(r + 1));
    recv[r].assign(kMax, -1.0f);
  }
  runRanks(kRanks, [&](int r) {
    // The first submission agrees (1,000 on every rank); the second does not.
    expectOk(occlSubmitCount(comms[r], collId, 1000, send[r].data(), recv[r].data(), &CallbackCounter::callback,
                             done[r].arg()),
             comms[r], "the agreeing submission");
    const size_t count = r == 2 ? 3000 : 2000;
    expectOk(occlSubmitCount(comms[r], collId, count, send[r].data(), recv[r].data(), &CallbackCounter::callback,
                             done[r].arg()),
             comms[r], "the disagreeing submission");
  });
  int named = 0;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(done[r].waitFor(2, std::chrono::seconds(60))) << "rank " << r;
    const auto fired = done[r].fired();
    EXPECT_EQ(fired[0].second, occlSuccess) << "rank " << r << ": the agreeing submission";
    EXPECT_EQ(fired[1].second, occlInvalidUsage) << "rank " << r << ": the disagreeing submission";
    const std::string why = occlGetLastError(comms[r]);
    const std::string mine = absl::StrFormat("this rank submitted count %d", r == 2 ? 3000 : 2000);
    if (why.find(mine) != std::string::npos) {
      ++named;
      EXPECT_NE(why.find(absl::StrFormat(" count %d (the collective stays failed", r == 2 ? 2000 : 3000)),
                std::string::npos)
          << why;
    }
  }
  // Rank 2 and each rank that received from it see the mismatch, unless a poison from another of
  // them reached it first: then its message names the rank that failed the collective.
  EXPECT_GE(named, 1) << "a rank that received from another count names both";
  // Later submissions of the collective fail too, with the first failure's cause.
  runRanks(kRanks, [&](int r) {
    expectOk(occlSubmitCount(comms[r], collId, 10, send[r].data(), recv[r].data(), &CallbackCounter::callback,
                             done[r].arg()),
             comms[r], "a later submission");
  });
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(done[r].waitFor(3, std::chrono::seconds(60))) << "rank " << r;
    EXPECT_EQ(done[r].fired()[2].second, occlInvalidUsage) << "rank " << r;
  }
}

TEST(VariableCountTest, AMismatchFailsOnEveryRankNamingBothCountsRing) { expectMismatchFailsEverywhere("ring", 0xA1); }

// The built-in choice: on thread ranks the peer program, whose fold would read past a shorter
// peer buffer: its notices are checked before any is used.
TEST(VariableCountTest, AMismatchFailsOnEveryRankNamingBothCountsBuiltIn) { expectMismatchFailsEverywhere(nullptr, 0xA2); }

// A count of 0 on every rank completes at once and touches nothing.
TEST(VariableCountTest, ZeroCountsCompleteAndTouchNothing) {
  CallbackCounter done[2];
  std::vector<float> buf[2];
  CommGroup comms(2);
  for (int r = 0; r < 2; ++r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = occlCollAllGather;
    d.count = 64;
    d.variableCount = 1;
    expectOk(occlCollRegister(comms[r], 0xB1, &d), comms[r], "register");
    buf[r].assign(128, 7.0f);
  }
  runRanks(2, [&](int r) {
    for (int k = 0; k < 5; ++k)
      expectOk(occlSubmitCount(comms[r], 0xB1, 0, nullptr, nullptr, &CallbackCounter::callback, done[r].arg()),
               comms[r], "count 0");
    expectOk(occlSubmitCount(comms[r], 0xB1, 3, buf[r].data() + r * 3, buf[r].data(), &CallbackCounter::callback,
                             done[r].arg()),
             comms[r], "count 3 in place");
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(done[r].waitFor(6, std::chrono::seconds(60)));
    for (auto [id, status] : done[r].fired()) EXPECT_EQ(status, occlSuccess);
    for (size_t i = 6; i < buf[r].size(); ++i) ASSERT_EQ(buf[r][i], 7.0f) << "rank " << r << " element " << i;
  }
}

TEST(VariableCountTest, BadCountsAreRefusedByName) {
  CommGroup comms(1);
  std::vector<float> buf(64);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 32;
  d.variableCount = 2;
  EXPECT_EQ(occlCollRegister(comms[0], 0xC1, &d), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("desc.variableCount = 2: expected 0 or 1"), std::string::npos);
  d.variableCount = 1;
  d.count = size_t{1} << 50;
  EXPECT_EQ(occlCollRegister(comms[0], 0xC1, &d), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("with desc.variableCount the count is at most"),
            std::string::npos)
      << occlGetLastError(comms[0]);
  d.count = 32;
  expectOk(occlCollRegister(comms[0], 0xC1, &d), comms[0], "register");
  EXPECT_EQ(occlSubmitCount(comms[0], 0xC1, 33, buf.data(), buf.data(), nullptr, nullptr), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("count = 33: collId 0xc1 takes at most the count it was "
                                                         "registered with, 32"),
            std::string::npos)
      << occlGetLastError(comms[0]);
  d.variableCount = 0;
  expectOk(occlCollRegister(comms[0], 0xC2, &d), comms[0], "register a fixed count");
  EXPECT_EQ(occlSubmitCount(comms[0], 0xC2, 16, buf.data(), buf.data(), nullptr, nullptr), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("count = 16: collId 0xc2 was registered with count 32 and no "
                                                         "desc.variableCount"),
            std::string::npos)
      << occlGetLastError(comms[0]);
  // Its registered count, named or not, goes through.
  expectOk(occlSubmitCount(comms[0], 0xC2, 32, buf.data(), buf.data(), nullptr, nullptr), comms[0], "the registered count");
  expectOk(occlSubmitCount(comms[0], 0xC2, OCCL_COUNT_REGISTERED, buf.data(), buf.data(), nullptr, nullptr), comms[0],
           "OCCL_COUNT_REGISTERED");
  expectOk(occlSubmitCount(comms[0], 0xC1, 5, buf.data(), buf.data(), nullptr, nullptr), comms[0], "a smaller count");
  expectOk(occlCommWaitAll(comms[0], 60000), comms[0], "wait");
}

}  // namespace
}  // namespace occl::test
