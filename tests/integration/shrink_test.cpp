// occlCommRevoke and occlCommShrink after a rank is lost in the middle of a stream of AllReduces
// submitted in random orders: SIGKILLed (dead: the bootstrap reports it) or SIGSTOPed (hung: only
// the collective timeout shows it), the bootstrap root or another rank, 4 and 8 processes. The
// survivors shrink with OCCL_SHRINK_ABORT, go on with occlSubmit alone on the same collIds (the
// shrunk communicator kept the AllReduces), and check every byte of 1,000 more AllReduces against
// the sum over the survivors; /dev/shm holds nothing of either communicator afterwards.
// Also: what revoke does to a healthy communicator, and every bad argument named.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "support/dev_shm.hpp"
#include "support/process_job.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

using namespace std::chrono_literals;

constexpr int kColls = 4;
constexpr uint64_t kFirstId = 0x40;
constexpr size_t kCounts[kColls] = {1, 1000, 4099, 65536};
constexpr int kItersBefore = 3;      // complete iterations before the loss
constexpr int kItersAfter = 250;     // x kColls = 1,000 AllReduces on the shrunk communicator
constexpr int64_t kCollTimeoutMs = 2000;

struct Param {
  int ranks;
  int victim;
  bool hang;  // SIGSTOP instead of SIGKILL
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.ranks << " ranks, rank " << p.victim << (p.hang ? " stopped" : " killed");
}

// ---- child side ----

occlConfig_t childConfig() {
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = kCollTimeoutMs;
  cfg.initTimeoutMs = 20000;
  return cfg;
}

// Rank `worldRank`'s buffers of one iteration, filled with its input.
std::vector<std::vector<float>> inputs(int worldRank) {
  std::vector<std::vector<float>> bufs;
  for (size_t count : kCounts) {
    bufs.emplace_back(count);
    for (size_t i = 0; i < count; ++i) bufs.back()[i] = inputValue(worldRank, i);
  }
  return bufs;
}

// This rank's submission order at iteration `iter`.
std::vector<int> order(int rank, int iter) {
  std::vector<int> o(kColls);
  for (int k = 0; k < kColls; ++k) o[static_cast<size_t>(k)] = k;
  std::shuffle(o.begin(), o.end(), std::mt19937(static_cast<unsigned>(rank * 7919 + iter * 104729 + 1)));
  return o;
}

// Each collective's result against the sum over `members` (world ranks).
void expectSums(const std::vector<std::vector<float>>& bufs, const std::vector<int>& members, const std::string& what) {
  for (int k = 0; k < kColls; ++k)
    for (size_t i = 0; i < kCounts[k]; ++i) {
      float want = 0;
      for (int m : members) want += inputValue(m, i);
      ASSERT_EQ(std::memcmp(&bufs[static_cast<size_t>(k)][i], &want, sizeof(float)), 0)
          << what << " collId " << kFirstId + k << " element " << i << ": " << bufs[static_cast<size_t>(k)][i]
          << ", expected " << want;
    }
}

// One iteration on `comm`: every collective in this rank's order, in place; waits for the callbacks.
void iterate(occlComm_t comm, int rank, int iter, std::vector<std::vector<float>>& bufs, CallbackCounter& done) {
  for (int k : order(rank, iter))
    expectOk(occlSubmit(comm, kFirstId + k, bufs[static_cast<size_t>(k)].data(), bufs[static_cast<size_t>(k)].data(),
                        &CallbackCounter::callback, done.arg()),
             comm, "occlSubmit");
}

void reportNonces(const std::string& dir, int rank) {
  std::ofstream out(dir + "/nonces." + std::to_string(rank));
  for (const std::string& n : mappedJobNonces()) out << n << "\n";
}

// One in-place run of collId kFirstId (kCounts[1] elements) on `comm`, checked against the sum
// over `members` (world ranks).
void allReduceOnce(occlComm_t comm, int rank, const std::vector<int>& members, const std::string& what) {
  std::vector<float> buf = inputs(rank)[1];
  CallbackCounter done;
  expectOk(occlSubmit(comm, kFirstId, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), comm,
           "occlSubmit on " + what);
  ASSERT_TRUE(done.waitFor(1, 30s)) << what;
  ASSERT_EQ(done.fired()[0].second, occlSuccess) << what << ": " << occlGetLastError(comm);
  for (size_t i = 0; i < buf.size(); ++i) {
    float want = 0;
    for (int m : members) want += inputValue(m, i);
    ASSERT_EQ(buf[i], want) << what << " element " << i;
  }
}

// OCCL_SHRINK_DEFAULT on a healthy world of 3 processes, rank 2 left out but alive: a pending
// submission makes it refuse (naming why); then ranks 0 and 1 shrink, and both the child (on the
// carried collId) and the untouched parent (all three ranks) run exactly.
void healthyShrink(int rank, const std::string& dir) {
  occlComm_t world = proc::initRank(rank, 3, childConfig());
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = kCounts[1];
  expectOk(occlCollRegister(world, kFirstId, &d), world, "occlCollRegister");
  std::vector<std::vector<float>> first = inputs(rank);
  CallbackCounter done;
  if (rank != 0) {
    ASSERT_TRUE(proc::waitForFile(dir + "/refused", 30s));
  }
  expectOk(occlSubmit(world, kFirstId, first[1].data(), first[1].data(), &CallbackCounter::callback, done.arg()), world,
           "occlSubmit");
  const int leftOut[] = {2};
  occlComm_t child = nullptr;
  if (rank == 0) {
    EXPECT_EQ(occlCommShrink(world, leftOut, 1, &child, nullptr, OCCL_SHRINK_DEFAULT), occlInvalidUsage);
    EXPECT_NE(std::string(occlGetLastError(world)).find("1 submission(s) are pending"), std::string::npos)
        << occlGetLastError(world);
    proc::touch(dir + "/refused");
  }
  ASSERT_TRUE(done.waitFor(1, 30s));
  ASSERT_EQ(done.fired()[0].second, occlSuccess);
  if (rank != 2) {
    expectOk(occlCommShrink(world, leftOut, 1, &child, nullptr, OCCL_SHRINK_DEFAULT), world, "occlCommShrink");
    allReduceOnce(child, rank, {0, 1}, "the child");
  }
  allReduceOnce(world, rank, {0, 1, 2}, "the parent after the shrink");
  if (child != nullptr) {
    EXPECT_EQ(occlCommFinalize(child), occlSuccess) << occlGetLastError(child);
    occlCommDestroy(child);
  }
  EXPECT_EQ(occlCommFinalize(world), occlSuccess) << occlGetLastError(world);
  occlCommDestroy(world);
  proc::touch(dir + "/done." + std::to_string(rank));
}

TEST(ShrinkChild, DISABLED_Entry) {
  const int rank = proc::envInt("OCCL_MP_RANK", -1), n = proc::envInt("OCCL_MP_NRANKS", 0);
  if (std::string(std::getenv("OCCL_MP_SCENARIO")) == "healthy") {
    healthyShrink(rank, std::getenv("OCCL_MP_DIR"));
    return;
  }
  const int victim = proc::envInt("OCCL_MP_VICTIM", -1);
  const bool hang = proc::envInt("OCCL_MP_HANG", 0) != 0;
  const std::string dir = std::getenv("OCCL_MP_DIR");
  occlComm_t world = proc::initRank(rank, n, childConfig());
  occlCollDesc_t d;
  occlCollDescInit(&d);
  for (int k = 0; k < kColls; ++k) {
    d.count = kCounts[k];
    expectOk(occlCollRegister(world, kFirstId + k, &d), world, "occlCollRegister");
  }
  std::vector<int> everyone(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) everyone[static_cast<size_t>(r)] = r;
  for (int iter = 0; iter < kItersBefore; ++iter) {
    std::vector<std::vector<float>> bufs = inputs(rank);
    CallbackCounter done;
    iterate(world, rank, iter, bufs, done);
    ASSERT_TRUE(done.waitFor(kColls, 30s));
    for (const auto& [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << id;
    expectSums(bufs, everyone, "before the loss, iteration " + std::to_string(iter));
  }
  reportNonces(dir, rank);
  // The victim dies only once every rank's callbacks of the iterations before have fired: a
  // death noticed earlier would fail a rank's last submission whose data had all arrived.
  proc::touch(dir + "/before." + std::to_string(rank));

  // The loss: the victim submits half of an iteration and is gone; the others submit all of it.
  std::vector<std::vector<float>> lost = inputs(rank);
  CallbackCounter lostDone;
  if (rank == victim) {
    for (int r = 0; r < n; ++r) ASSERT_TRUE(proc::waitForFile(dir + "/before." + std::to_string(r), 60s)) << r;
    const std::vector<int> mine = order(rank, kItersBefore);
    for (int i = 0; i < kColls / 2; ++i) {
      const int k = mine[static_cast<size_t>(i)];
      expectOk(occlSubmit(world, kFirstId + k, lost[static_cast<size_t>(k)].data(), lost[static_cast<size_t>(k)].data(),
                          &CallbackCounter::callback, lostDone.arg()),
               world, "occlSubmit");
    }
    std::this_thread::sleep_for(20ms);
    raise(hang ? SIGSTOP : SIGKILL);
    std::this_thread::sleep_for(120s);  // stopped: the parent kills it at the end
    return;
  }
  // A submission made after the death is known is refused at once (occlRemoteError); the others
  // end, failed or (where the victim had done its part) complete: a dead peer is reported by the
  // bootstrap, a hung one by the collective timeout.
  size_t accepted = 0;
  int failed = 0;
  for (int k : order(rank, kItersBefore)) {
    const occlResult_t r = occlSubmit(world, kFirstId + k, lost[static_cast<size_t>(k)].data(),
                                      lost[static_cast<size_t>(k)].data(), &CallbackCounter::callback, lostDone.arg());
    if (r == occlSuccess) {
      ++accepted;
      continue;
    }
    EXPECT_TRUE(!hang && r == occlRemoteError) << "collId " << kFirstId + k << ": " << occlGetLastError(world);
    ++failed;
  }
  ASSERT_TRUE(lostDone.waitFor(accepted, std::chrono::milliseconds(kCollTimeoutMs) + 20s)) << "a submission never ended";
  for (const auto& [id, status] : lostDone.fired()) failed += status != occlSuccess ? 1 : 0;
  EXPECT_GE(failed, kColls / 2) << "the collectives the victim never submitted cannot have completed";
  if (!hang) {
    EXPECT_EQ(awaitAsyncError(world, 10s), occlRemoteError);
    const std::string why = occlGetLastError(world);
    EXPECT_NE(why.find("rank " + std::to_string(victim) + " failed"), std::string::npos) << why;
  }

  // Shrink: the same list on every survivor; the parent is revoked on the way.
  occlComm_t shrunk = nullptr;
  const int excluded[] = {victim};
  expectOk(occlCommShrink(world, excluded, 1, &shrunk, nullptr, OCCL_SHRINK_ABORT), world, "occlCommShrink");
  int size = 0, newRank = -1;
  expectOk(occlCommCount(shrunk, &size), shrunk, "occlCommCount");
  expectOk(occlCommUserRank(shrunk, &newRank), shrunk, "occlCommUserRank");
  EXPECT_EQ(size, n - 1);
  EXPECT_EQ(newRank, rank < victim ? rank : rank - 1);
  std::vector<float> x(4, 1.0f);
  EXPECT_EQ(occlSubmit(world, kFirstId, x.data(), x.data(), nullptr, nullptr), occlInvalidUsage);
  EXPECT_NE(std::string(occlGetLastError(world)).find("revoked"), std::string::npos) << occlGetLastError(world);

  // The training loop goes on with occlSubmit alone: same collIds, no registration.
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (r != victim) survivors.push_back(r);
  for (int iter = 0; iter < kItersAfter; ++iter) {
    std::vector<std::vector<float>> bufs = inputs(rank);
    CallbackCounter done;
    iterate(shrunk, rank, kItersBefore + 1 + iter, bufs, done);
    ASSERT_TRUE(done.waitFor(kColls, 30s)) << "iteration " << iter << " after the shrink hung";
    for (const auto& [id, status] : done.fired())
      ASSERT_EQ(status, occlSuccess) << "collId " << id << ": " << occlGetLastError(shrunk);
    expectSums(bufs, survivors, "after the shrink, iteration " + std::to_string(iter));
  }
  reportNonces(dir, rank);
  EXPECT_EQ(occlCommFinalize(shrunk), occlSuccess) << occlGetLastError(shrunk);
  expectOk(occlCommDestroy(shrunk), nullptr, "occlCommDestroy(shrunk)");
  expectOk(occlCommDestroy(world), nullptr, "occlCommDestroy(world)");
  proc::touch(dir + "/done." + std::to_string(rank));
}

// ---- parent side ----

class ShrinkTest : public ::testing::TestWithParam<Param> {};

TEST_P(ShrinkTest, SurvivorsShrinkAndGoOnExactly) {
  const Param p = GetParam();
  proc::TempDir dir;
  const std::vector<pid_t> pids = proc::spawnWithUniqueId(
      "ShrinkChild.DISABLED_Entry", "shrink", p.ranks,
      {{"OCCL_MP_VICTIM", std::to_string(p.victim)}, {"OCCL_MP_HANG", p.hang ? "1" : "0"}, {"OCCL_MP_DIR", dir.path()}});
  ASSERT_EQ(pids.size(), static_cast<size_t>(p.ranks));
  std::vector<pid_t> survivors;
  for (int r = 0; r < p.ranks; ++r)
    if (r != p.victim) survivors.push_back(pids[static_cast<size_t>(r)]);
  const std::vector<int> codes = proc::reap(survivors, std::chrono::seconds(150));
  // The victim: dead already, or stopped until now.
  const pid_t victim = pids[static_cast<size_t>(p.victim)];
  kill(victim, SIGKILL);
  waitpid(victim, nullptr, 0);
  for (size_t i = 0; i < survivors.size(); ++i) EXPECT_EQ(codes[i], 0) << "survivor " << i << " (its output is above)";
  for (int r = 0; r < p.ranks; ++r) {
    if (r == p.victim) continue;
    EXPECT_TRUE(std::filesystem::exists(dir.path() + "/done." + std::to_string(r))) << "rank " << r << " did not finish";
  }
  std::vector<std::string> nonces;
  for (int r = 0; r < p.ranks; ++r) {
    std::ifstream in(dir.path() + "/nonces." + std::to_string(r));
    for (std::string nonce; in >> nonce;)
      if (std::find(nonces.begin(), nonces.end(), nonce) == nonces.end()) nonces.push_back(nonce);
  }
  EXPECT_GE(nonces.size(), 2u) << "the ranks reported the segments of neither or only one communicator";
  for (const std::string& nonce : nonces) {
    const std::vector<std::string> left = jobShmNames(nonce);
    EXPECT_TRUE(left.empty()) << left.size() << " segment(s) outlived the job, e.g. " << left.front();
  }
}

TEST(ShrinkDefaultTest, AHealthyParentStaysUsableAndPendingWorkIsRefused) {
  proc::TempDir dir;
  const std::vector<pid_t> pids =
      proc::spawnWithUniqueId("ShrinkChild.DISABLED_Entry", "healthy", 3, {{"OCCL_MP_DIR", dir.path()}});
  ASSERT_EQ(pids.size(), 3u);
  const std::vector<int> codes = proc::reap(pids, std::chrono::seconds(120));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " (its output is above)";
    EXPECT_TRUE(std::filesystem::exists(dir.path() + "/done." + std::to_string(r))) << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Losses, ShrinkTest,
                         ::testing::Values(Param{4, 0, false}, Param{4, 2, false}, Param{4, 0, true}, Param{4, 2, true},
                                           Param{8, 5, false}, Param{8, 0, true}),
                         [](const ::testing::TestParamInfo<Param>& i) {
                           return std::to_string(i.param.ranks) + "ranks_victim" + std::to_string(i.param.victim) +
                                  (i.param.hang ? "_stopped" : "_killed");
                         });

// ---- Revoke and bad arguments, ranks as threads ----

// Revoke fails what is pending at once (not at the timeout), refuses later work naming the
// revocation, and a second revoke is refused; destroy still works.
TEST(RevokeTest, FailsWhatIsPendingAndRefusesLaterWork) {
  CommGroup comms(2);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 1000;
  for (int r = 0; r < 2; ++r) expectOk(occlCollRegister(comms[r], 0x9, &d), comms[r], "occlCollRegister");
  std::vector<float> buf(1000, 1.0f);
  CallbackCounter done;
  expectOk(occlSubmit(comms[0], 0x9, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), comms[0],
           "occlSubmit");  // rank 1 never submits
  EXPECT_EQ(occlCommRevoke(comms[0], 1), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("revokeFlags = 1"), std::string::npos);
  expectOk(occlCommRevoke(comms[0], OCCL_REVOKE_DEFAULT), comms[0], "occlCommRevoke");
  ASSERT_TRUE(done.waitFor(1, 10s));
  EXPECT_EQ(done.fired()[0].second, occlAborted);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("revoked"), std::string::npos) << occlGetLastError(comms[0]);
  EXPECT_EQ(occlSubmit(comms[0], 0x9, buf.data(), buf.data(), nullptr, nullptr), occlInvalidUsage);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("revoked: shrink it or destroy it"), std::string::npos);
  EXPECT_EQ(occlCommRevoke(comms[0], OCCL_REVOKE_DEFAULT), occlInvalidUsage);
  // The peer's submission fails through the poison, long before its timeout.
  CallbackCounter peer;
  expectOk(occlSubmit(comms[1], 0x9, buf.data(), buf.data(), &CallbackCounter::callback, peer.arg()), comms[1],
           "occlSubmit");
  ASSERT_TRUE(peer.waitFor(1, 10s));
  EXPECT_EQ(peer.fired()[0].second, occlRemoteError);
  EXPECT_EQ(occlCommFinalize(comms[0]), occlSuccess) << "nothing is left to wait for: finalize returns at once";
}

TEST(ShrinkArgsTest, EachBadArgumentIsNamed) {
  CommGroup comms(3);
  occlComm_t out = nullptr;
  auto expectNamed = [&](occlResult_t got, occlResult_t want, const std::string& text) {
    EXPECT_EQ(got, want) << text;
    EXPECT_NE(std::string(occlGetLastError(comms[0])).find(text), std::string::npos) << occlGetLastError(comms[0]);
  };
  const int two[] = {2}, self[] = {0}, twice[] = {2, 2}, outside[] = {3};
  expectNamed(occlCommShrink(comms[0], two, 1, &out, nullptr, 7), occlInvalidArgument, "shrinkFlags = 7");
  expectNamed(occlCommShrink(comms[0], two, 3, &out, nullptr, 0), occlInvalidArgument, "excludeRanksCount = 3");
  expectNamed(occlCommShrink(comms[0], nullptr, 1, &out, nullptr, 0), occlInvalidArgument, "excludeRanksList is NULL");
  expectNamed(occlCommShrink(comms[0], self, 1, &out, nullptr, 0), occlInvalidArgument, "is this rank");
  expectNamed(occlCommShrink(comms[0], twice, 2, &out, nullptr, 0), occlInvalidArgument, "names rank 2 twice");
  expectNamed(occlCommShrink(comms[0], outside, 1, &out, nullptr, 0), occlInvalidArgument,
              "excludeRanksList[0] = 3: expected a rank 0..2");
  EXPECT_EQ(occlCommShrink(comms[0], two, 1, nullptr, nullptr, 0), occlInvalidArgument);
  EXPECT_EQ(out, nullptr);
}

}  // namespace
}  // namespace occl::test
