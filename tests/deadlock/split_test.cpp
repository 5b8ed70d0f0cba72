// occlCommSplit: children ranked by key, NOCOLOR, bad arguments that fail every rank, inherited
// config, a child that outlives its parent; the shrink of thread ranks (a split of the
// survivors); and the torture over a parent and its children at once (halves, pairs and a reversed copy of the world), each rank submitting across all of them
// in an order of its own, every byte checked, with ranks as threads and as processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "occl/occl.hpp"
#include "support/process_job.hpp"
#include "support/ranks.hpp"
#include "torture/torture.hpp"

namespace occl {
namespace {

using namespace std::chrono_literals;
using test::expectOk;
using test::inputValue;

// One way to split a world of n ranks: each rank's color and key, by its rank.
struct Split {
  const char* name;
  std::function<int(int rank, int n)> color;
  std::function<int(int rank, int n)> key;

  // The world ranks of `rank`'s child in their new order (by key, then by world rank), as
  // occlCommSplit must order them.
  std::vector<int> membersWith(int rank, int n) const {
    std::vector<int> members;
    for (int r = 0; r < n; ++r)
      if (color(r, n) == color(rank, n)) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return key(a, n) < key(b, n); });
    return members;
  }
};

// Halves in world order, pairs reversed within each pair, and the whole world reversed.
std::vector<Split> worldSplits() {
  return {
      {"halves", [](int r, int n) { return r < n / 2 ? 0 : 1; }, [](int r, int) { return r; }},
      {"pairs", [](int r, int) { return r / 2; }, [](int r, int) { return -r; }},
      {"reversed copy", [](int, int) { return 0; }, [](int r, int n) { return n - r; }},
  };
}

// Each rank's plan: three AllReduces (4 to 64 KiB) on the parent (world order) and three on each child, collIds
// 0x100 apart per communicator.
std::vector<torture::CollPlan> planFor(int rank, int n, occlComm_t parent, const std::vector<occlComm_t>& children) {
  const std::vector<Split> splits = worldSplits();
  const std::vector<size_t> counts = torture::geometricCounts(3, 4096, 1 << 20);
  std::vector<torture::CollPlan> plan;
  auto add = [&](occlComm_t comm, uint64_t base, const std::vector<int>& members) {
    for (size_t c = 0; c < counts.size(); ++c) {
      torture::CollPlan p;
      p.comm = comm;
      p.collId = base + c;
      p.count = counts[c] + c * 3;
      p.members = members;
      plan.push_back(p);
    }
  };
  std::vector<int> world(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) world[static_cast<size_t>(r)] = r;
  add(parent, 0x100, world);
  for (size_t k = 0; k < splits.size(); ++k) add(children[k], 0x200 + 0x100 * k, splits[k].membersWith(rank, n));
  return plan;
}

// Rank `rank`'s children, one per split of worldSplits(), checked for size and rank.
std::vector<occlComm_t> splitAll(occlComm_t parent, int rank, int n) {
  std::vector<occlComm_t> children;
  for (const Split& s : worldSplits()) {
    occlComm_t child = nullptr;
    expectOk(occlCommSplit(parent, s.color(rank, n), s.key(rank, n), &child, nullptr), parent,
             std::string("occlCommSplit(") + s.name + ")");
    children.push_back(child);
    const std::vector<int> members = s.membersWith(rank, n);
    int size = 0, childRank = -1;
    expectOk(occlCommCount(child, &size), child, "occlCommCount");
    expectOk(occlCommUserRank(child, &childRank), child, "occlCommUserRank");
    const auto at = std::find(members.begin(), members.end(), rank) - members.begin();
    if (size != static_cast<int>(members.size()) || childRank != static_cast<int>(at))
      throw std::runtime_error(std::string(s.name) + ": world rank " + std::to_string(rank) + " became rank " +
                               std::to_string(childRank) + " of " + std::to_string(size) + ", expected " +
                               std::to_string(at) + " of " + std::to_string(members.size()));
  }
  return children;
}

void expectExact(const std::vector<torture::RankResult>& results, const torture::PendingTracker& tracker, int iters) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_FALSE(results[r].timedOut) << "rank " << r;
    EXPECT_EQ(results[r].wrong, 0u) << "rank " << r << ": " << results[r].firstWrong;
    EXPECT_EQ(results[r].itersDone, iters) << "rank " << r;
  }
  EXPECT_EQ(tracker.failedCallbacks(), 0u) << tracker.firstFailure();
}

// The parent and its three children of n thread ranks, submitted across in random orders.
void tortureThreads(int n, int iters) {
  torture::CommSet comms;
  size_t first = 0;
  ASSERT_EQ(comms.initAll(n, test::testConfig(), &first), occlSuccess) << occlGetLastError(nullptr);
  std::vector<std::vector<occlComm_t>> children(static_cast<size_t>(n));
  test::runRanks(n, [&](int r) { children[static_cast<size_t>(r)] = splitAll(comms[first + r], r, n); });
  for (const auto& mine : children)
    for (occlComm_t c : mine) comms.adopt(c);
  std::vector<std::vector<torture::CollPlan>> plans;
  for (int r = 0; r < n; ++r) plans.push_back(planFor(r, n, comms[first + r], children[static_cast<size_t>(r)]));
  std::string error;
  for (const auto& plan : plans) ASSERT_EQ(torture::registerAll(plan, &error), occlSuccess) << error;
  torture::PendingTracker tracker(n);
  torture::RunOptions o;
  o.iters = iters;
  o.iterTimeout = 30s;
  expectExact(torture::runRankThreads(plans, o, tracker, comms), tracker, iters);
}

TEST(SplitTest, ParentAndChildrenInRandomOrdersFourRanks) { tortureThreads(4, 30); }
TEST(SplitTest, ParentAndChildrenInRandomOrdersEightRanks) { tortureThreads(8, 10); }

// Rank r's AllReduce of inputValue(worldOf[r]) on `comms` (one per rank; NULL ranks sit out),
// checked against the sum over the ranks that take part.
void allReduceOn(const std::vector<occlComm_t>& comms, const std::vector<int>& worldOf, uint64_t collId) {
  constexpr size_t kCount = 1000;
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<float>> bufs(comms.size(), std::vector<float>(kCount));
  test::runRanks(n, [&](int r) {
    occlComm_t comm = comms[static_cast<size_t>(r)];
    if (comm == nullptr) return;
    std::vector<float>& buf = bufs[static_cast<size_t>(r)];
    for (size_t i = 0; i < kCount; ++i) buf[i] = inputValue(worldOf[static_cast<size_t>(r)], i);
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kCount;
    expectOk(occlCollRegister(comm, collId, &d), comm, "occlCollRegister");
    expectOk(occlSubmit(comm, collId, buf.data(), buf.data(), nullptr, nullptr), comm, "occlSubmit");
    expectOk(occlCommWaitAll(comm, 30000), comm, "occlCommWaitAll");
  });
  for (int r = 0; r < n; ++r) {
    if (comms[static_cast<size_t>(r)] == nullptr) continue;
    for (size_t i = 0; i < kCount; ++i) {
      float want = 0;
      for (int q = 0; q < n; ++q)
        if (comms[static_cast<size_t>(q)] != nullptr) want += inputValue(worldOf[static_cast<size_t>(q)], i);
      ASSERT_EQ(bufs[static_cast<size_t>(r)][i], want) << "rank " << r << " element " << i;
    }
  }
}

// Splits `comms` with color(r), key(r) on every rank at once; returns each rank's result and child.
struct SplitOutcome {
  std::vector<occlResult_t> results;
  std::vector<occlComm_t> children;
  std::vector<std::string> errors;
};
SplitOutcome splitEach(const test::CommGroup& comms, const std::function<int(int)>& color,
                       const std::function<int(int)>& key, const std::function<const occlConfig_t*(int)>& config) {
  const int n = comms.size();
  SplitOutcome out{std::vector<occlResult_t>(static_cast<size_t>(n)), std::vector<occlComm_t>(static_cast<size_t>(n)),
                   std::vector<std::string>(static_cast<size_t>(n))};
  test::runRanks(n, [&](int r) {
    const auto i = static_cast<size_t>(r);
    out.results[i] = occlCommSplit(comms[r], color(r), key(r), &out.children[i], config(r));
    out.errors[i] = occlGetLastError(comms[r]);
  });
  return out;
}

std::function<const occlConfig_t*(int)> inherit() {
  return [](int) -> const occlConfig_t* { return nullptr; };
}

void destroyAll(const std::vector<occlComm_t>& comms) {
  for (occlComm_t c : comms)
    if (c != nullptr) occlCommDestroy(c);
}

TEST(SplitTest, KeyOrdersRanksThenTheParentsOrder) {
  test::CommGroup world(4);
  // Colors 0 and 1 alternate; keys put the upper two ranks first.
  SplitOutcome s = splitEach(world, [](int r) { return r % 2; }, [](int r) { return r < 2 ? 5 : 1; }, inherit());
  const int expected[4] = {1, 1, 0, 0};
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(s.results[static_cast<size_t>(r)], occlSuccess) << s.errors[static_cast<size_t>(r)];
    int rank = -1, size = 0;
    expectOk(occlCommUserRank(s.children[static_cast<size_t>(r)], &rank), nullptr, "occlCommUserRank");
    expectOk(occlCommCount(s.children[static_cast<size_t>(r)], &size), nullptr, "occlCommCount");
    EXPECT_EQ(rank, expected[r]) << "world rank " << r;
    EXPECT_EQ(size, 2);
  }
  destroyAll(s.children);
  // Equal keys: the parent's order.
  s = splitEach(world, [](int) { return 7; }, [](int) { return 0; }, inherit());
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(s.results[static_cast<size_t>(r)], occlSuccess) << s.errors[static_cast<size_t>(r)];
    int rank = -1;
    expectOk(occlCommUserRank(s.children[static_cast<size_t>(r)], &rank), nullptr, "occlCommUserRank");
    EXPECT_EQ(rank, r);
  }
  allReduceOn(s.children, {0, 1, 2, 3}, 0x11);
  destroyAll(s.children);
}

TEST(SplitTest, NoColorTakesPartAndGetsNull) {
  test::CommGroup world(4);
  SplitOutcome s = splitEach(
      world, [](int r) { return r == 1 ? OCCL_SPLIT_NOCOLOR : 3; }, [](int) { return 0; }, inherit());
  for (int r = 0; r < 4; ++r) ASSERT_EQ(s.results[static_cast<size_t>(r)], occlSuccess) << s.errors[static_cast<size_t>(r)];
  EXPECT_EQ(s.children[1], nullptr);
  int size = 0;
  expectOk(occlCommCount(s.children[0], &size), nullptr, "occlCommCount");
  EXPECT_EQ(size, 3);
  allReduceOn(s.children, {0, 1, 2, 3}, 0x12);
  destroyAll(s.children);
}

// One rank's bad argument fails the call on every rank (none waits for a child that will not
// form), names the argument on that rank and the rank on the others, and loses nothing: the
// parent still runs collectives.
TEST(SplitTest, ABadArgumentOnOneRankFailsEveryRankAndNamesIt) {
  test::CommGroup world(4);
  SplitOutcome s = splitEach(world, [](int r) { return r == 2 ? -3 : 0; }, [](int) { return 0; }, inherit());
  for (int r = 0; r < 4; ++r) {
    const auto i = static_cast<size_t>(r);
    EXPECT_EQ(s.results[i], occlInvalidArgument) << "rank " << r;
    EXPECT_EQ(s.children[i], nullptr);
    const std::string want = r == 2 ? "color = -3: expected >= 0, or OCCL_SPLIT_NOCOLOR" : "rank 2 passed an invalid argument";
    EXPECT_NE(s.errors[i].find(want), std::string::npos) << "rank " << r << ": " << s.errors[i];
  }
  // A config that would move the child to another backend.
  occlConfig_t simt = test::testConfig();
  simt.backend = occlBackendSimt;
  s = splitEach(world, [](int) { return 0; }, [](int) { return 0; },
                [&](int r) -> const occlConfig_t* { return r == 0 ? &simt : nullptr; });
  const char* parentKind = std::getenv("OCCL_BACKEND") != nullptr && std::string(std::getenv("OCCL_BACKEND")) == "simt"
                               ? nullptr
                               : "config.backend = simt, but the parent's ranks run on host";
  for (int r = 0; r < 4; ++r) {
    const auto i = static_cast<size_t>(r);
    if (parentKind == nullptr) {  // simt parents: the same backend, so the split goes through
      EXPECT_EQ(s.results[i], occlSuccess) << s.errors[i];
      continue;
    }
    EXPECT_EQ(s.results[i], occlInvalidArgument) << "rank " << r;
    if (r == 0) {
      EXPECT_NE(s.errors[i].find(parentKind), std::string::npos) << s.errors[i];
    }
  }
  destroyAll(s.children);
  std::vector<occlComm_t> parent;
  for (int r = 0; r < 4; ++r) parent.push_back(world[r]);
  allReduceOn(parent, {0, 1, 2, 3}, 0x13);
  occlComm_t out = nullptr;
  EXPECT_EQ(occlCommSplit(world[0], 0, 0, nullptr, nullptr), occlInvalidArgument);
  EXPECT_EQ(occlCommSplit(nullptr, 0, 0, &out, nullptr), occlInvalidArgument);
}

// NULL config inherits what the parent was given; a config of its own is the child's.
TEST(SplitTest, ConfigIsInheritedOrTheChildsOwn) {
  occlConfig_t parentConfig = test::testConfig();
  parentConfig.collTimeoutMs = 45678;
  test::CommGroup world(2, parentConfig);
  SplitOutcome s = splitEach(world, [](int) { return 0; }, [](int) { return 0; }, inherit());
  occlConfig_t got;
  for (occlComm_t c : s.children) {
    expectOk(occlCommGetConfig(c, &got), c, "occlCommGetConfig");
    EXPECT_EQ(got.collTimeoutMs, 45678);
  }
  destroyAll(s.children);
  occlConfig_t own = test::testConfig();
  own.collTimeoutMs = 23456;
  s = splitEach(world, [](int) { return 0; }, [](int) { return 0; }, [&](int) { return &own; });
  for (occlComm_t c : s.children) {
    expectOk(occlCommGetConfig(c, &got), c, "occlCommGetConfig");
    EXPECT_EQ(got.collTimeoutMs, 23456);
  }
  destroyAll(s.children);
}

// A child is a communicator of its own: destroying the parent first leaves it working.
TEST(SplitTest, AChildOutlivesItsParent) {
  std::vector<occlComm_t> children;
  {
    test::CommGroup world(3);
    SplitOutcome s = splitEach(world, [](int) { return 0; }, [](int r) { return -r; }, inherit());
    for (int r = 0; r < 3; ++r) ASSERT_EQ(s.results[static_cast<size_t>(r)], occlSuccess) << s.errors[static_cast<size_t>(r)];
    children = s.children;
  }
  allReduceOn(children, {0, 1, 2}, 0x14);
  destroyAll(children);
}

// The C++ wrapper: split returns a Comm, an empty one for NOCOLOR; a bad argument throws.
TEST(SplitTest, CppWrapperSplitsAndThrows) {
  const occlConfig_t cfg = test::testConfig();
  std::vector<occl::Comm> world = occl::Comm::all(3, &cfg);
  std::vector<occl::Comm> children(3);
  test::runRanks(3, [&](int r) {
    children[static_cast<size_t>(r)] = world[static_cast<size_t>(r)].split(r == 2 ? OCCL_SPLIT_NOCOLOR : 0, -r);
  });
  EXPECT_FALSE(children[2]);
  ASSERT_TRUE(children[0] && children[1]);
  EXPECT_EQ(children[0].rank(), 1);
  EXPECT_EQ(children[1].rank(), 0);
  EXPECT_EQ(children[0].size(), 2);
  std::vector<occlResult_t> codes(3, occlSuccess);
  test::runRanks(3, [&](int r) {
    try {
      (void)world[static_cast<size_t>(r)].split(r == 0 ? -2 : 0, 0);
    } catch (const occl::Error& e) {
      codes[static_cast<size_t>(r)] = e.code();
    }
  });
  for (occlResult_t c : codes) EXPECT_EQ(c, occlInvalidArgument);
}

// ---- The shrink of thread ranks: a split of the survivors ----

// Four thread ranks; rank 3 stops taking part (a hung thread) in the middle of an iteration of
// three AllReduces in random orders. The others revoke by shrinking with OCCL_SHRINK_ABORT, each
// from its own thread, and run 100 more iterations on the same collIds, exact against the sum over
// ranks 0-2. TSan and simt cover the subgroup's meeting.
TEST(ThreadShrinkTest, SurvivorsOfAHungThreadShrinkAndGoOn) {
  constexpr int kRanks = 4, kHung = 3, kIters = 100;
  constexpr size_t kCounts[3] = {7, 1000, 40000};
  // Before the communicators, so that they outlive them: the hung rank's submission stays in
  // flight (reading its buffer, its callback to come) until `world` is destroyed.
  test::CallbackCounter lost;
  std::vector<std::vector<std::vector<float>>> bufs(kRanks);
  test::CommGroup world(kRanks);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  for (int r = 0; r < kRanks; ++r)
    for (uint64_t c = 0; c < 3; ++c) {
      d.count = kCounts[c];
      expectOk(occlCollRegister(world[r], 0x70 + c, &d), world[r], "occlCollRegister");
    }
  std::vector<occlComm_t> shrunk(kRanks, nullptr);
  test::runRanks(kRanks, [&](int r) {
    auto& mine = bufs[static_cast<size_t>(r)];
    for (size_t count : kCounts) mine.emplace_back(count, 1.0f);
    // The hung rank submits one collective and nothing more.
    for (uint64_t c = 0; c < (r == kHung ? 1u : 3u); ++c)
      expectOk(occlSubmit(world[r], 0x70 + c, mine[c].data(), mine[c].data(), &test::CallbackCounter::callback,
                          lost.arg()),
               world[r], "occlSubmit");
    if (r == kHung) return;
    const int excluded[] = {kHung};
    expectOk(occlCommShrink(world[r], excluded, 1, &shrunk[static_cast<size_t>(r)], nullptr, OCCL_SHRINK_ABORT),
             world[r], "occlCommShrink");
  });
  for (int r = 0; r < kHung; ++r) {
    int rank = -1, size = 0;
    expectOk(occlCommUserRank(shrunk[static_cast<size_t>(r)], &rank), nullptr, "occlCommUserRank");
    expectOk(occlCommCount(shrunk[static_cast<size_t>(r)], &size), nullptr, "occlCommCount");
    EXPECT_EQ(rank, r);
    EXPECT_EQ(size, kHung);
  }
  for (int iter = 0; iter < kIters; ++iter) {
    test::CallbackCounter done;
    test::runRanks(kHung, [&](int r) {
      auto& mine = bufs[static_cast<size_t>(r)];
      for (uint64_t c = 0; c < 3; ++c)
        for (size_t i = 0; i < kCounts[c]; ++i) mine[c][i] = inputValue(r, i);
      std::vector<uint64_t> order = {0, 1, 2};
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(iter * 31 + r)));
      for (uint64_t c : order)
        expectOk(occlSubmit(shrunk[static_cast<size_t>(r)], 0x70 + c, mine[c].data(), mine[c].data(),
                            &test::CallbackCounter::callback, done.arg()),
                 shrunk[static_cast<size_t>(r)], "occlSubmit(shrunk)");
    });
    ASSERT_TRUE(done.waitFor(3 * kHung, 60s)) << "iteration " << iter;
    for (const auto& [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << id;
    for (int r = 0; r < kHung; ++r)
      for (uint64_t c = 0; c < 3; ++c)
        for (size_t i = 0; i < kCounts[c]; ++i)
          ASSERT_EQ(bufs[static_cast<size_t>(r)][c][i], inputValue(0, i) + inputValue(1, i) + inputValue(2, i))
              << "iteration " << iter << " rank " << r << " collId " << 0x70 + c << " element " << i;
  }
  destroyAll(shrunk);
}

// ---- Ranks as processes ----

constexpr int kProcessIters = 15;

// OCCL_SHRINK_DEFAULT refuses a parent with pending submissions, and one whose callback has run is
// not pending: a rank that learns of a completion in its callback and shrinks at once is not
// refused while that callback is still returning (here it takes 200 ms to return).
TEST(ThreadShrinkTest, ASubmissionWhoseCallbackRanIsNotPendingForTheDefaultShrink) {
  struct SlowCallback {
    std::atomic<int> ran{0};
    static void callback(uint64_t, occlResult_t, void* arg) {
      static_cast<SlowCallback*>(arg)->ran.store(1, std::memory_order_release);
      std::this_thread::sleep_for(200ms);
    }
  };
  constexpr int kRanks = 2;
  SlowCallback slow[kRanks];
  std::vector<std::vector<float>> bufs(kRanks, std::vector<float>(8, 1.0f));
  test::CommGroup world(kRanks);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 8;
  for (int r = 0; r < kRanks; ++r) expectOk(occlCollRegister(world[r], 0x90, &d), world[r], "occlCollRegister");
  std::vector<occlComm_t> copies(kRanks, nullptr);
  test::runRanks(kRanks, [&](int r) {
    expectOk(occlSubmit(world[r], 0x90, bufs[r].data(), bufs[r].data(), &SlowCallback::callback, &slow[r]), world[r],
             "occlSubmit");
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (slow[r].ran.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
    ASSERT_EQ(slow[r].ran.load(), 1) << "rank " << r << ": the callback never ran";
    expectOk(occlCommShrink(world[r], nullptr, 0, &copies[static_cast<size_t>(r)], nullptr, OCCL_SHRINK_DEFAULT),
             world[r], "occlCommShrink(OCCL_SHRINK_DEFAULT) right after the callback ran");
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(bufs[r][0], 2.0f) << "rank " << r;
  destroyAll(copies);
}

// A child process: one rank of the world, its three children, the torture across all four.
TEST(SplitProcessChild, DISABLED_Entry) {
  const int rank = test::proc::envInt("OCCL_MP_RANK", -1), n = test::proc::envInt("OCCL_MP_NRANKS", 0);
  occlComm_t world = test::proc::initRank(rank, n, test::testConfig());
  std::vector<occlComm_t> children = splitAll(world, rank, n);
  const std::vector<torture::CollPlan> plan = planFor(rank, n, world, children);
  std::string error;
  ASSERT_EQ(torture::registerAll(plan, &error), occlSuccess) << error;
  torture::PendingTracker tracker(n);
  torture::RunOptions o;
  o.iters = kProcessIters;
  o.iterTimeout = 30s;
  torture::RankBuffers buffers;
  const torture::RankResult result = torture::runRank(rank, plan, o, tracker, buffers);
  expectExact({result}, tracker, kProcessIters);
  for (occlComm_t c : children) {
    EXPECT_EQ(occlCommFinalize(c), occlSuccess) << occlGetLastError(c);
    occlCommDestroy(c);
  }
  EXPECT_EQ(occlCommFinalize(world), occlSuccess) << occlGetLastError(world);
  occlCommDestroy(world);
}

TEST(SplitProcessTest, ParentAndChildrenInRandomOrdersFourProcesses) {
  constexpr int kRanks = 4;
  const std::vector<pid_t> pids = test::proc::spawnWithUniqueId("SplitProcessChild.DISABLED_Entry", "split", kRanks);
  const std::vector<int> codes = test::proc::reap(pids, std::chrono::seconds(150));
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " (its output is above)";
}

}  // namespace
}  // namespace occl
