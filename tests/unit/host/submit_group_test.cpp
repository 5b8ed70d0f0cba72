// occlSubmitGroup on ranks as threads: groups of many collectives (a collId several times in one
// group) in a different order on every rank, mixed with single submissions, every element
// checked; a bad entry submits nothing and says which entry; the arguments' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "occl/occl.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr auto kWait = std::chrono::seconds(60);
constexpr int kRanks = 4;

void registerAllReduce(occlComm_t comm, uint64_t collId, size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = count;
  expectOk(occlCollRegister(comm, collId, &d), comm, "register");
}

// The k-th submission of collective `c` on `rank`: element i is (rank + 1) * (k + 1) * (i % 5 + 1)
// + c, so a sum over ranks is exact in any order and tells which submission it came from.
float input(int rank, int c, int k, size_t i) {
  return static_cast<float>((rank + 1) * (k + 1) * static_cast<int>(i % 5 + 1) + c);
}
float expectedSum(int c, int k, size_t i) {
  float s = 0;
  for (int r = 0; r < kRanks; ++r) s += input(r, c, k, i);
  return s;
}

// `rounds` rounds of groups: each round every rank submits `perColl` runs of each of `colls`
// AllReduces as one group, in its own random order of the entries (the k-th run of a collective
// still before its (k+1)-th: one collId's submissions run in submission order), then a single
// occlSubmit of each collective after the group. Every element of every run is checked.
void groupsInRandomOrders(const occlConfig_t& config, int kRounds) {
  constexpr int kColls = 8, kPerColl = 4;
  constexpr int kRunsPerRound = kColls * (kPerColl + 1);  // run c * (kPerColl + 1) + k; k == kPerColl the single
  auto count = [](int c) { return static_cast<size_t>(1 + 9 * c); };
  // Before the communicators, as the callbacks: a failed wait must not free what is in flight.
  CallbackCounter done[kRanks];
  std::vector<std::vector<float>> sendBufs[kRanks], recvBufs[kRanks];  // [rank][round * kRunsPerRound + run]
  for (int r = 0; r < kRanks; ++r) {
    sendBufs[r].resize(kRounds * kRunsPerRound);
    recvBufs[r].resize(kRounds * kRunsPerRound);
  }
  CommGroup comms(kRanks, config);
  for (int r = 0; r < kRanks; ++r)
    for (int c = 0; c < kColls; ++c) registerAllReduce(comms[r], 0x600 + c, count(c));
  std::vector<std::string> wrong[kRanks];
  runRanks(kRanks, [&](int r) {
    std::mt19937 rng(1234 + r);
    for (int round = 0; round < kRounds; ++round) {
      std::vector<float>* send = &sendBufs[r][round * kRunsPerRound];
      std::vector<float>* recv = &recvBufs[r][round * kRunsPerRound];
      for (int c = 0; c < kColls; ++c)
        for (int k = 0; k <= kPerColl; ++k) {
          const int run = c * (kPerColl + 1) + k;
          send[run].resize(count(c));
          recv[run].assign(count(c), -1.0f);
          for (size_t i = 0; i < count(c); ++i) send[run][i] = input(r, c, round * (kPerColl + 1) + k, i);
        }
      // A random interleaving of the collectives, each one's runs in order.
      std::vector<int> order;
      for (int c = 0; c < kColls; ++c) order.insert(order.end(), kPerColl, c);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<int> next(kColls, 0);
      std::vector<occlSubmission_t> group;
      for (int c : order) {
        const int run = c * (kPerColl + 1) + next[c]++;
        group.push_back(
            {0x600u + c, send[run].data(), recv[run].data(), &CallbackCounter::callback, done[r].arg(), count(c)});
      }
      int submitted = -1;
      expectOk(occlSubmitGroup(comms[r], group.data(), static_cast<int>(group.size()), &submitted), comms[r],
               "occlSubmitGroup");
      EXPECT_EQ(submitted, static_cast<int>(group.size()));
      for (int c = 0; c < kColls; ++c) {
        const int run = c * (kPerColl + 1) + kPerColl;
        expectOk(occlSubmit(comms[r], 0x600 + c, send[run].data(), recv[run].data(), &CallbackCounter::callback,
                            done[r].arg()),
                 comms[r], "occlSubmit after the group");
      }
      expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll");
      for (int c = 0; c < kColls; ++c)
        for (int k = 0; k <= kPerColl; ++k)
          for (size_t i = 0; i < count(c); ++i)
            if (recv[c * (kPerColl + 1) + k][i] != expectedSum(c, round * (kPerColl + 1) + k, i)) {
              wrong[r].push_back("round " + std::to_string(round) + " coll " + std::to_string(c) + " run " +
                                 std::to_string(k) + " element " + std::to_string(i));
              break;
            }
    }
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_TRUE(wrong[r].empty()) << "rank " << r << ": " << wrong[r].size() << " wrong, first " << wrong[r][0];
    ASSERT_TRUE(done[r].waitFor(kRounds * kColls * (kPerColl + 1), kWait));
    for (auto [id, status] : done[r].fired()) EXPECT_EQ(status, occlSuccess) << "collId 0x" << std::hex << id;
  }
}

TEST(SubmitGroupTest, GroupsInADifferentOrderOnEveryRankAreExact) { groupsInRandomOrders(testConfig(), 20); }

// An SQ of 4 entries: each group of 32 goes in 16 parts of 2, most of them waiting for the daemon
// to take the part before (Comm::waitForSqRoom), every entry still exact and completed once.
TEST(SubmitGroupTest, AGroupLongerThanTheSqGoesInPartByPart) {
  occlConfig_t config = testConfig();
  config.sqDepth = 4;
  groupsInRandomOrders(config, 5);
}

// A group whose entry 2 is not registered: nothing of it is submitted (no callback fires, the
// valid entries' collectives have nothing in flight), the error names the entry; the same
// submissions then go through as a group without the bad entry.
TEST(SubmitGroupTest, ABadEntrySubmitsNothingAndIsNamed) {
  CallbackCounter done[2];
  std::vector<float> buf[2][3];
  CommGroup comms(2);
  for (int r = 0; r < 2; ++r) {
    registerAllReduce(comms[r], 0x71, 16);
    registerAllReduce(comms[r], 0x72, 16);
    for (auto& b : buf[r]) b.assign(16, static_cast<float>(r + 1));
  }
  constexpr size_t kAsRegistered = OCCL_COUNT_REGISTERED;
  occlSubmission_t bad[3] = {
      {0x71, buf[0][0].data(), buf[0][0].data(), &CallbackCounter::callback, done[0].arg(), kAsRegistered},
      {0x72, buf[0][1].data(), buf[0][1].data(), &CallbackCounter::callback, done[0].arg(), kAsRegistered},
      {0x73, buf[0][2].data(), buf[0][2].data(), &CallbackCounter::callback, nullptr, kAsRegistered}};
  int submitted = -1;
  EXPECT_EQ(occlSubmitGroup(comms[0], bad, 3, &submitted), occlInvalidArgument);
  EXPECT_EQ(submitted, 0);
  std::string why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("subs[2] of 3"), std::string::npos) << why;
  EXPECT_NE(why.find("collId 0x73 is not registered"), std::string::npos) << why;
  // A count other than the registered one, for a collective without desc.variableCount.
  bad[2] = bad[1];
  bad[2].count = 8;
  EXPECT_EQ(occlSubmitGroup(comms[0], bad, 3, &submitted), occlInvalidArgument);
  EXPECT_EQ(submitted, 0);
  why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("subs[2] of 3: count = 8: collId 0x72 was registered with count 16 and no desc.variableCount"),
            std::string::npos)
      << why;
  occlCollStats_t stats;
  for (uint64_t id : {0x71, 0x72}) {
    expectOk(occlCollGetStats(comms[0], id, &stats), comms[0], "stats");
    EXPECT_EQ(stats.submissions, 0u) << "collId 0x" << std::hex << id << " was submitted by a failed group";
  }
  // Entries 0 and 1 again, now on both ranks; rank 0 reuses its callback arguments (armed above).
  runRanks(2, [&](int r) {
    occlSubmission_t good[2] = {
        {0x71, buf[r][0].data(), buf[r][0].data(), &CallbackCounter::callback, r == 0 ? bad[0].arg : done[1].arg(),
         16},
        {0x72, buf[r][1].data(), buf[r][1].data(), &CallbackCounter::callback, r == 0 ? bad[1].arg : done[1].arg(),
         kAsRegistered}};
    expectOk(occlSubmitGroup(comms[r], good, 2, nullptr), comms[r], "the group without its bad entry");
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(done[r].waitFor(2, kWait));
    EXPECT_EQ(done[r].fired().size(), 2u) << "rank " << r;
    for (int b = 0; b < 2; ++b) EXPECT_EQ(buf[r][b], std::vector<float>(16, 3.0f)) << "rank " << r << " entry " << b;
  }
}

// One collId listed more often than its window has room for: refused whole, naming the window.
TEST(SubmitGroupTest, ACollIdBeyondItsWindowInOneGroupIsRefused) {
  occlConfig_t config = testConfig();
  config.maxInflightPerColl = 2;
  std::vector<float> buf(8, 1.0f);
  CommGroup comms(1, config);
  registerAllReduce(comms[0], 0x81, 8);
  std::vector<occlSubmission_t> group(3, occlSubmission_t{0x81, buf.data(), buf.data(), nullptr, nullptr, OCCL_COUNT_REGISTERED});
  int submitted = -1;
  EXPECT_EQ(occlSubmitGroup(comms[0], group.data(), 3, &submitted), occlInProgress);
  EXPECT_EQ(submitted, 0);
  const std::string why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("subs[2] of 3"), std::string::npos) << why;
  EXPECT_NE(why.find("2 earlier in this group, its window is 2"), std::string::npos) << why;
  // Two fit: the window is counted from zero again after the refused group.
  expectOk(occlSubmitGroup(comms[0], group.data(), 2, &submitted), comms[0], "a group that fits its window");
  EXPECT_EQ(submitted, 2);
  expectOk(occlCommWaitAll(comms[0], 60000), comms[0], "occlCommWaitAll");
}

// The C++ wrapper: std::function callbacks, each fired once; a bad entry throws occl::Error and
// fires nothing (the callbacks of a refused group are freed, not called).
TEST(SubmitGroupTest, TheWrapperFiresEachCallbackOnceAndNoneOfARefusedGroup) {
  std::atomic<int> fired[2] = {0, 0};
  std::vector<float> buf[2][2];
  for (int r = 0; r < 2; ++r)
    for (auto& b : buf[r]) b.assign(32, static_cast<float>(r + 1));
  occlConfig_t config = testConfig();
  std::vector<occl::Comm> comms = occl::Comm::all(2, &config);
  for (auto& c : comms)
    for (uint64_t id : {0x91, 0x92}) {
      occlCollDesc_t d;
      occlCollDescInit(&d);
      d.count = 32;
      c.registerCollective(id, d);
    }
  auto count = [&fired](int r) { return [&fired, r](uint64_t, occlResult_t s) { fired[r] += s == occlSuccess ? 1 : 100; }; };
  EXPECT_THROW(comms[0].submitGroup({{0x91, buf[0][0].data(), buf[0][0].data(), count(0)},
                                     {0x99, buf[0][1].data(), buf[0][1].data(), count(0)}}),
               occl::Error);
  runRanks(2, [&](int r) {
    comms[r].submitGroup({{0x91, buf[r][0].data(), buf[r][0].data(), count(r)},
                          {0x92, buf[r][1].data(), buf[r][1].data(), count(r)}});
    comms[r].waitAll(60000);
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(fired[r].load(), 2) << "rank " << r;
    for (auto& b : buf[r]) EXPECT_EQ(b, std::vector<float>(32, 3.0f)) << "rank " << r;
  }
}

TEST(SubmitGroupTest, BadArgumentsAreNamed) {
  CommGroup comms(1);
  int submitted = -1;
  EXPECT_EQ(occlSubmitGroup(comms[0], nullptr, 2, &submitted), occlInvalidArgument);
  EXPECT_EQ(submitted, 0);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("subs is NULL with count 2"), std::string::npos);
  occlSubmission_t one{};
  EXPECT_EQ(occlSubmitGroup(comms[0], &one, -1, nullptr), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("count is -1"), std::string::npos);
  EXPECT_EQ(occlSubmitGroup(comms[0], nullptr, 0, &submitted), occlSuccess);  // an empty group
  EXPECT_EQ(submitted, 0);
  EXPECT_EQ(occlSubmitGroup(nullptr, &one, 1, &submitted), occlInvalidArgument);
}

}  // namespace
}  // namespace occl::test
