// A count per submission (desc.variableCount, occlSubmitCount): collectives of every type
// registered once with a maximum count, then submitted with random counts up to it (0 and the
// maximum among them) in a different random order on every rank, every receive buffer checked
// against nccl-tests' exact values; buffers sized for each submission's count alone, so a rank
// that reached past them shows under AddressSanitizer. Ranks that pass different counts for the
// same submission fail it on every rank with both counts named. Bad counts are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
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

// The collectives, each registered with `maxCount`: every type (the Send/Recv pair aside), several
// dtypes and ops, the ring on two blocks (at most `daemonBlocks`), roots other than 0.
std::vector<Spec> collectives(size_t maxCount, int daemonBlocks) {
  std::vector<Spec> out;
  auto add = [&](int type, int dtype, int op, int root, const char* algorithm = nullptr, int nBlocks = 0) {
    Spec s;
    s.type = type;
    s.dtype = dtype;
    s.op = op;
    s.count = maxCount;
    s.root = root;
    s.algorithm = algorithm;
    s.nBlocks = std::min(nBlocks, daemonBlocks);
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
// seed of (c, k)); 0 and the maximum come up often. `spread`: counts of every magnitude alike
// (below 2^j for a random j), so both sides of a small form's bound come up; else uniform.
Spec submissionSpec(const Spec& registered, int c, int k, bool spread) {
  std::mt19937_64 rng(static_cast<uint64_t>(c) * 100003u + static_cast<uint64_t>(k));
  Spec s = registered;
  const uint64_t max = registered.count;
  const uint64_t pick = rng() % 16;
  const uint64_t below = spread ? std::min<uint64_t>(uint64_t{1} << (rng() % 64 % (std::bit_width(max) + 1)), max + 1)
                                : max + 1;
  s.count = pick == 0 ? 0 : pick == 1 ? max : static_cast<size_t>(rng() % below);
  s.inPlace = hasInPlace(s.type) && rng() % 3 == 0;
  return s;
}

struct RandomCounts {
  int total;
  uint32_t seed;
  size_t maxCount = kMaxCount;
  int daemonBlocks = 2;  // the ring of two blocks
  bool spread = false;   // submissionSpec
};

// Rounds of `perColl` submissions of every collective per rank, in an order of its own on each
// rank (a collective's k-th still before its (k+1)-th), each with its own count; every receive
// buffer is checked. Returns the submissions made per rank; `smallForms`, how many of the
// collectives have a small-message form (occlCollGetSmallForm).
int runRandomCounts(const RandomCounts& run, int* smallForms = nullptr) {
  const std::vector<Spec> colls = collectives(run.maxCount, run.daemonBlocks);
  const int nColls = static_cast<int>(colls.size());
  constexpr int kPerColl = 3;
  const int rounds = (run.total + nColls * kPerColl - 1) / (nColls * kPerColl);
  CallbackCounter done[kRanks];  // before the communicators: a failed wait must not free what is in flight
  std::vector<std::vector<RankIo>> io(static_cast<size_t>(nColls * kPerColl));  // one round's, [run][rank]
  occlConfig_t config = testConfig();
  config.daemonBlocks = run.daemonBlocks;
  CommGroup comms(kRanks, config);
  for (int r = 0; r < kRanks; ++r)
    for (int c = 0; c < nColls; ++c) {
      const occlCollDesc_t d = variableDesc(colls[static_cast<size_t>(c)], r);
      expectOk(occlCollRegister(comms[r], 0x900u + static_cast<uint64_t>(c), &d), comms[r], "register");
    }
  if (smallForms != nullptr) {
    *smallForms = 0;
    for (int c = 0; c < nColls; ++c) {
      uint64_t bound = 0;
      const char* algorithm = nullptr;
      expectOk(occlCollGetSmallForm(comms[0], 0x900u + static_cast<uint64_t>(c), &bound, &algorithm), comms[0],
               "occlCollGetSmallForm");
      EXPECT_EQ(bound == 0, algorithm == nullptr);
      EXPECT_LT(bound, run.maxCount);
      if (bound != 0) ++*smallForms;
    }
  }
  int submitted = 0;
  const uint32_t seed = run.seed;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Spec> specs;
    for (int c = 0; c < nColls; ++c)
      for (int j = 0; j < kPerColl; ++j) {
        specs.push_back(submissionSpec(colls[static_cast<size_t>(c)], c, round * kPerColl + j, run.spread));
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
  const int made = runRandomCounts({onSimt() ? 200 : 1000, 0x5eed});
  EXPECT_GE(made, onSimt() ? 200 : 1000);
}

// A maximum large enough that small counts take the small-message form (docs/design.md): on the
// host's thread ranks (one daemon block) the AllReduce's "direct" under its "peer"; on simt (a
// kernel backend: parts by size, two daemon blocks) one part where the maximum has two. Counts of
// every magnitude, so submissions on both sides of each bound interleave on every rank in
// random orders.
TEST(VariableCountTest, RandomCountsAcrossTheSmallFormsBoundAreExact) {
  int smallForms = 0;
  const int made = runRandomCounts({onSimt() ? 120 : 600, 0xb0b, size_t{1} << 14, onSimt() ? 2 : 1, true}, &smallForms);
  EXPECT_GE(made, onSimt() ? 120 : 600);
  EXPECT_GE(smallForms, 1) << "no collective took a small form: the test runs none";
}

// Which parts a submission runs: a small one its form's one, a large one every part of the
// maximum's. Each finished task counts one context load and no preemption (occlCollStats_t), so
// over a run of small and large submissions the loads that are not preemptions are
// small + large x parts. On simt (a kernel backend: parts by size) a ring of two parts with a small
// form of one; on the host (a part per daemon block, one here) peer with direct under it, one part
// each.
// kRanks ranks with one float AllReduce of at most kMax registered with desc.variableCount (on
// simt the ring on two daemon blocks, whose small form has one part; on the host the built-in
// choice on one block, peer with direct under it), its small form's bound and algorithm.
class SmallFormRig {
 public:
  static constexpr size_t kMax = size_t{1} << 14;
  const bool kernel = onSimt();
  CommGroup comms{kRanks, configFor(kernel)};
  CallbackCounter done[kRanks];
  uint64_t bound = 0;
  const char* algorithm = nullptr;

  explicit SmallFormRig(uint64_t collId) : collId_(collId) {
    for (int r = 0; r < kRanks; ++r) {
      occlCollDesc_t d;
      occlCollDescInit(&d);
      d.count = kMax;
      d.variableCount = 1;
      d.algorithm = kernel ? "ring" : nullptr;
      expectOk(occlCollRegister(comms[r], collId_, &d), comms[r], "register");
    }
    expectOk(occlCollGetSmallForm(comms[0], collId_, &bound, &algorithm), comms[0], "occlCollGetSmallForm");
  }
  // Every rank submits `counts` in order, all in flight, from send[r] into recv[r], and waits.
  void submitAll(const std::vector<size_t>& counts, std::vector<float>* send, std::vector<float>* recv) {
    runRanks(kRanks, [&](int r) {
      for (size_t count : counts)
        expectOk(occlSubmitCount(comms[r], collId_, count, send[r].data(), recv[r].data(), &CallbackCounter::callback,
                                 done[r].arg()),
                 comms[r], "occlSubmitCount");
      expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll");
    });
  }
  // Rank r's `n` callbacks fired, each with success.
  void expectSucceeded(int r, size_t n) {
    ASSERT_TRUE(done[r].waitFor(n, std::chrono::seconds(60)));
    for (auto [id, status] : done[r].fired()) EXPECT_EQ(status, occlSuccess) << occlGetLastError(comms[r]);
  }

 private:
  static occlConfig_t configFor(bool kernel) {
    occlConfig_t config = testConfig();
    config.daemonBlocks = kernel ? 2 : 1;
    return config;
  }
  uint64_t collId_;
};

TEST(VariableCountTest, SmallSubmissionsRunTheSmallFormsParts) {
  SmallFormRig rig(0xB1);
  constexpr size_t kMax = SmallFormRig::kMax;
  std::vector<float> send[kRanks], recv[kRanks];
  for (int r = 0; r < kRanks; ++r) {
    send[r].assign(kMax, static_cast<float>(r + 1));
    recv[r].assign(kMax, -1.0f);
  }
  const uint64_t bound = rig.bound;
  ASSERT_GT(bound, 0u);
  ASSERT_LT(bound, kMax);
  EXPECT_STREQ(rig.algorithm, rig.kernel ? "ring" : "direct");
  const std::vector<size_t> counts = {1, kMax, bound, bound + 1, 7, kMax - 3, 0, bound / 2};
  rig.submitAll(counts, send, recv);
  size_t small = 0;
  for (size_t count : counts) small += count <= bound ? 1 : 0;
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NO_FATAL_FAILURE(rig.expectSucceeded(r, counts.size()));
    occlCollStats_t st;
    expectOk(occlCollGetStats(rig.comms[r], 0xB1, &st), rig.comms[r], "occlCollGetStats");
    EXPECT_EQ(st.parts, rig.kernel ? 2u : 1u);
    EXPECT_EQ(st.contextLoads - st.preemptions, small + (counts.size() - small) * st.parts) << "rank " << r;
    // Every element was last written by some submission's sum (one had the maximum): 1 + 2 + 3 + 4.
    for (size_t i = 0; i < kMax; ++i)
      if (recv[r][i] != 10.0f) {
        ADD_FAILURE() << "rank " << r << " element " << i << " = " << recv[r][i];
        break;
      }
  }
}

// In-place AllReduces of one buffer chained without waiting, their counts alternating between the
// small form and the maximum's: each submission must see the whole of the one before it, though
// the small form's part covers the buffer where the maximum's parts cover pieces of it (a change
// of form waits for the earlier submissions: kSqeBarrier). Rank r starts at r + 1, so an element
// that k submissions reduced holds 10 * 4^(k-1), exact in any order.
TEST(VariableCountTest, ChainedInPlaceCountsAcrossTheSmallFormsBoundAreExact) {
  SmallFormRig rig(0xB3);
  constexpr size_t kMax = SmallFormRig::kMax;
  std::vector<float> buf[kRanks];
  for (int r = 0; r < kRanks; ++r) buf[r].assign(kMax, static_cast<float>(r + 1));
  const uint64_t bound = rig.bound;
  ASSERT_GT(bound, 1u);
  ASSERT_LT(bound, kMax);
  const std::vector<size_t> counts = {kMax, bound, kMax - 5, 1, kMax, bound / 2, bound + 1, bound, kMax};
  rig.submitAll(counts, buf, buf);
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_NO_FATAL_FAILURE(rig.expectSucceeded(r, counts.size()));
    for (size_t i = 0; i < kMax; ++i) {
      int reduced = 0;
      for (size_t count : counts) reduced += i < count ? 1 : 0;
      const float want = reduced == 0 ? static_cast<float>(r + 1) : 10.0f * static_cast<float>(1u << (2 * (reduced - 1)));
      if (buf[r][i] != want) {
        ADD_FAILURE() << "rank " << r << " element " << i << " = " << buf[r][i] << ", want " << want;
        break;
      }
    }
  }
}

// Rank 2 submits another count than the others for the second submission of an AllReduce: every
// rank fails it with occlInvalidUsage, none completes it with data from the other count, the
// ranks that received from rank 2 name both counts, and the collective stays failed.
struct Disagreement {
  size_t maxCount = 4096;
  size_t others = 2000, rank2 = 3000;  // the second submission's counts
  int daemonBlocks = 0;                // 0: the backend's
};

void expectMismatchFailsEverywhere(const char* algorithm, uint64_t collId, const Disagreement& how = {}) {
  const size_t kMax = how.maxCount;
  CallbackCounter done[kRanks];
  std::vector<float> send[kRanks], recv[kRanks];
  occlConfig_t config = testConfig();
  config.daemonBlocks = how.daemonBlocks;
  CommGroup comms(kRanks, config);
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
    const size_t count = r == 2 ? how.rank2 : how.others;
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
    const std::string mine = absl::StrFormat("this rank submitted count %d", r == 2 ? how.rank2 : how.others);
    if (why.find(mine) != std::string::npos) {
      ++named;
      EXPECT_NE(why.find(absl::StrFormat(" count %d (the collective stays failed", r == 2 ? how.others : how.rank2)),
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
// Rank 2's count runs the maximum's form and the others' the small-message form (their bound
// between the two): they meet only on the forms' shared connectors, and still fail everywhere. On
// the host's thread ranks "peer" against "direct"; on simt a ring of two parts against one.
TEST(VariableCountTest, AMismatchAcrossTheSmallFormsBoundFailsOnEveryRank) {
  const Disagreement how = onSimt() ? Disagreement{size_t{1} << 14, 2000, 12000, 2} : Disagreement{4096, 2000, 3000, 1};
  {
    occlConfig_t config = testConfig();
    config.daemonBlocks = how.daemonBlocks;
    CommGroup comms(kRanks, config);
    for (int r = 0; r < kRanks; ++r) {
      occlCollDesc_t d;
      occlCollDescInit(&d);
      d.count = how.maxCount;
      d.variableCount = 1;
      expectOk(occlCollRegister(comms[r], 0xA4, &d), comms[r], "register");
    }
    uint64_t bound = 0;
    const char* algorithm = nullptr;
    expectOk(occlCollGetSmallForm(comms[0], 0xA4, &bound, &algorithm), comms[0], "occlCollGetSmallForm");
    ASSERT_GE(bound, how.others);
    ASSERT_LT(bound, how.rank2);
  }
  expectMismatchFailsEverywhere(nullptr, 0xA3, how);
}

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
