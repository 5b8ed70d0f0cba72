// occlCommGetTimeline (daemon/timeline.hpp): every part of every submission leaves one record
// whose stamps are in order, one part per submission says it completed it, a ring keeps its
// newest records, and bad arguments are named. On the host backend and (occl_add_simt_runs) on
// simt, where the records are the CUDA daemon's own code.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr int kRanks = 2;
constexpr int kSubmissions = 10;

occlConfig_t timelineConfig(int depth) {
  occlConfig_t c = testConfig();
  c.daemonBlocks = 2;
  c.timelineDepth = depth;
  return c;
}

// Registers `id` (an AllReduce of `count` floats in `parts` parts) on every rank and submits it
// kSubmissions times, waiting for all.
void runAllReduces(const CommGroup& comms, uint64_t id, size_t count, int parts) {
  runRanks(kRanks, [&](int r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = count;
    d.nBlocks = parts;
    expectOk(occlCollRegister(comms[r], id, &d), comms[r], "register");
    std::vector<float> buf(count, 1.0f);
    for (int i = 0; i < kSubmissions; ++i) {
      expectOk(occlSubmit(comms[r], id, buf.data(), buf.data(), nullptr, nullptr), comms[r], "submit");
      expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
    }
    if (buf[0] != static_cast<float>(1 << kSubmissions)) throw std::runtime_error("wrong sum");
  });
}

std::vector<occlTimelineEntry_t> timelineOf(occlComm_t comm) {
  int n = -1;
  expectOk(occlCommGetTimeline(comm, nullptr, 0, &n), comm, "count the timeline");
  std::vector<occlTimelineEntry_t> out(static_cast<size_t>(n));
  int got = -1;
  expectOk(occlCommGetTimeline(comm, out.data(), n, &got), comm, "read the timeline");
  out.resize(static_cast<size_t>(got));
  return out;
}

// The timeline once `done` says it holds what the test waits for: a part writes its record just
// after it finished, so the last records may trail the last callback (occl.h). Bounded.
template <typename Done>
std::vector<occlTimelineEntry_t> timelineWhen(occlComm_t comm, Done done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<occlTimelineEntry_t> t = timelineOf(comm);
  while (!done(t) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    t = timelineOf(comm);
  }
  return t;
}

// Whether every (collId, seq) of the two collectives has all its parts' records.
bool allRecorded(const std::vector<occlTimelineEntry_t>& t) {
  std::map<std::pair<uint64_t, uint64_t>, int> parts;
  for (const occlTimelineEntry_t& e : t) parts[{e.collId, e.seq}] += 1;
  if (parts.size() != 2u * kSubmissions) return false;
  for (const auto& [key, n] : parts)
    if (n != (key.first == 1 ? 1 : 2)) return false;
  return true;
}

TEST(Timeline, EveryPartOfEverySubmissionIsStampedInOrder) {
  CommGroup comms(kRanks, timelineConfig(256));
  runAllReduces(comms, 1, 1000, 1);
  runAllReduces(comms, 2, 5000, 2);
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<occlTimelineEntry_t> t = timelineWhen(comms[r], allRecorded);
    std::map<std::pair<uint64_t, uint64_t>, std::pair<int, int>> perSubmission;  // (id, seq) -> parts, completed
    for (const occlTimelineEntry_t& e : t) {
      SCOPED_TRACE(testing::Message() << "rank " << r << " collId " << e.collId << " seq " << e.seq << " part " << e.part);
      ASSERT_TRUE(e.collId == 1 || e.collId == 2);
      EXPECT_LT(e.seq, static_cast<uint64_t>(kSubmissions));
      EXPECT_LT(e.part, e.collId == 1 ? 1u : 2u);
      EXPECT_NE(e.firstDataNs, 0u) << "every part of an AllReduce on 2 ranks moves data";
      // One clock reading may serve a pass's take and its first try, so take and start are
      // each before the first data, not ordered between them.
      EXPECT_LE(e.takenNs, e.firstDataNs);
      EXPECT_LE(e.startedNs, e.firstDataNs);
      EXPECT_LE(e.firstDataNs, e.lastDataNs);
      EXPECT_LE(e.lastDataNs, e.doneNs);
      auto& [parts, completed] = perSubmission[{e.collId, e.seq}];
      parts += 1;
      completed += e.completed;
    }
    EXPECT_EQ(perSubmission.size(), 2u * kSubmissions) << "rank " << r;
    for (const auto& [key, counts] : perSubmission) {
      EXPECT_EQ(counts.first, key.first == 1 ? 1 : 2) << "rank " << r << " collId " << key.first << " seq " << key.second;
      EXPECT_EQ(counts.second, 1) << "one part completes a submission";
    }
  }
}

TEST(Timeline, ARingKeepsItsNewestRecords) {
  constexpr int kDepth = 4;
  CommGroup comms(kRanks, timelineConfig(kDepth));
  runAllReduces(comms, 7, 100, 1);  // one part: block 0's ring only
  for (int r = 0; r < kRanks; ++r) {
    const std::vector<occlTimelineEntry_t> t = timelineWhen(comms[r], [](const std::vector<occlTimelineEntry_t>& got) {
      return !got.empty() && got.back().seq == static_cast<uint64_t>(kSubmissions - 1);
    });
    ASSERT_EQ(t.size(), static_cast<size_t>(kDepth)) << "rank " << r << ": a quiet ring gives back all it keeps";
    EXPECT_EQ(t.back().seq, static_cast<uint64_t>(kSubmissions - 1)) << "rank " << r;
    for (size_t i = 1; i < t.size(); ++i) EXPECT_EQ(t[i].seq, t[i - 1].seq + 1) << "oldest first";
    // A capacity below the count copies that many.
    occlTimelineEntry_t two[2];
    int got = -1;
    expectOk(occlCommGetTimeline(comms[r], two, 2, &got), comms[r], "read two");
    EXPECT_EQ(got, 2);
  }
}

void expectError(occlResult_t got, occlResult_t want, occlComm_t comm, const std::string& words) {
  EXPECT_EQ(got, want) << words;
  const std::string message = occlGetLastError(comm);
  EXPECT_NE(message.find(words), std::string::npos) << "\"" << message << "\" does not say \"" << words << "\"";
}

TEST(Timeline, BadArgumentsAndAnAbsentTimelineAreNamed) {
  CommGroup comms(kRanks, timelineConfig(0));
  int n = 0;
  occlTimelineEntry_t e[1];
  expectError(occlCommGetTimeline(comms[0], nullptr, 0, &n), occlInvalidUsage, comms[0],
                    "config.timelineDepth = 0: this communicator keeps no timeline");
  expectError(occlCommGetTimeline(comms[0], e, 1, nullptr), occlInvalidArgument, comms[0], "count is NULL");
  expectError(occlCommGetTimeline(comms[0], e, -1, &n), occlInvalidArgument, comms[0], "capacity = -1");
  expectError(occlCommGetTimeline(comms[0], nullptr, 3, &n), occlInvalidArgument, comms[0],
                    "entries is NULL with capacity = 3");
}

}  // namespace
}  // namespace occl::test
