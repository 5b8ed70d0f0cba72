// Ranks as processes: occlCommInitRank with a unique id, occlCommInitFromEnv with torchrun's
// variables, AllReduce over shared memory, and fail-fast when a peer process dies.
//
// Children are this test binary re-executed (support/processes.hpp) with OCCL_MP_* variables
// naming the scenario and rank.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_join.h"
#include "bootstrap/bootstrap.hpp"
#include "memory/shared_buffers.hpp"
#include "support/process_job.hpp"
#include "support/processes.hpp"
#include "support/ranks.hpp"
#include "support/strangers.hpp"

namespace occl::test {
namespace {

using Clock = std::chrono::steady_clock;

// ---- parent side ----

using proc::Env;
using proc::envInt;
using proc::initRank;
using proc::waitForFile;

// `prefix`: what the child starts behind (namespacePrefix), nothing by default.
pid_t spawnChild(const Env& extra, const std::vector<std::string>& prefix = {}) {
  return proc::spawn("MultiProcessChild.DISABLED_Entry", extra, prefix);
}

std::vector<int> reapChildren(const std::vector<pid_t>& pids, std::chrono::seconds timeout) {
  return proc::reap(pids, timeout);
}

// Rank 0's child creates the id; the parent hands it to the others (process_job.hpp).
std::vector<pid_t> spawnWithUniqueId(const std::string& scenario, int nRanks, Env extra = {},
                                     const std::vector<std::string>& prefix = {}) {
  return proc::spawnWithUniqueId("MultiProcessChild.DISABLED_Entry", scenario, nRanks, std::move(extra), nullptr,
                                 prefix);
}

int freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

void expectAllSucceeded(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " failed (exit code)";
}

TEST(MultiProcessTest, AllReduceFourProcessesInitRank) {
  std::vector<pid_t> pids = spawnWithUniqueId("allreduce", 4);
  ASSERT_EQ(pids.size(), 4u);
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
}

TEST(MultiProcessTest, AllReduceFourProcessesInitFromEnv) {
  int port = freeLoopbackPort();
  ASSERT_GT(port, 0);
  std::vector<pid_t> pids;
  for (int r = 0; r < 4; ++r)
    pids.push_back(spawnChild({{"OCCL_MP_SCENARIO", "fromenv"},
                               {"RANK", std::to_string(r)},
                               {"WORLD_SIZE", "4"},
                               {"MASTER_ADDR", "127.0.0.1"},
                               {"MASTER_PORT", std::to_string(port)}}));
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
}

// One of three processes _exits right after init; the survivors' pending AllReduce must fail
// with occlRemoteError within seconds (the bootstrap notices the dead socket), not time out.
class PeerDeathTest : public ::testing::TestWithParam<int> {};

TEST_P(PeerDeathTest, SurvivorsFailWithRemoteError) {
  const int victim = GetParam();
  std::vector<pid_t> pids = spawnWithUniqueId("fault", 3, {{"OCCL_MP_VICTIM", std::to_string(victim)}});
  ASSERT_EQ(pids.size(), 3u);
  std::vector<int> codes = reapChildren(pids, std::chrono::seconds(60));
  for (int r = 0; r < 3; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(codes[r], 0) << "survivor rank " << r << " failed (exit code)";
  }
}

INSTANTIATE_TEST_SUITE_P(Victims, PeerDeathTest, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int>& i) { return "rank" + std::to_string(i.param); });

// Buffers from occlMemAlloc (desc.sharedBuffers): four processes run the peer AllReduce on each
// other's buffers, bit-exact, and a buffer from elsewhere is refused at submission; a variable
// count's small submissions run direct on the peer program's connectors.
TEST(MultiProcessTest, AllReduceFourProcessesOnSharedBuffersRunsPeer) {
  std::vector<pid_t> pids = spawnWithUniqueId("shared", 4);
  ASSERT_EQ(pids.size(), 4u);
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
}

// The prefix that starts a child in namespaces of its own: `unshare unshareArgs...`, then, where
// `setup` is not empty, `sh -c '<setup> && exec "$0" "$@"'`. Empty, with `whyNot`, where this
// machine lacks unshare or sh, or does not let this user make the namespaces (CAP_SYS_ADMIN):
// `true` runs behind the prefix first.
std::vector<std::string> namespacePrefix(const std::vector<std::string>& unshareArgs, const std::string& setup,
                                         std::string& whyNot) {
  const std::string unshare = proc::findProgram("unshare"), sh = proc::findProgram("sh");
  const std::string trueProgram = proc::findProgram("true");
  if (unshare.empty() || sh.empty() || trueProgram.empty()) {
    whyNot = "no unshare (util-linux), sh or true on PATH";
    return {};
  }
  std::vector<std::string> prefix{unshare};
  prefix.insert(prefix.end(), unshareArgs.begin(), unshareArgs.end());
  if (!setup.empty()) {
    prefix.push_back(sh);
    prefix.push_back("-c");
    prefix.push_back(setup + " && exec \"$0\" \"$@\"");
  }
  std::vector<std::string> probe = prefix;
  probe.push_back(trueProgram);
  if (proc::reap({proc::spawnProgram(probe, {}, "/dev/null")}, std::chrono::seconds(30))[0] != 0) {
    whyNot = "unshare " + absl::StrJoin(unshareArgs, " ") + (setup.empty() ? "" : " with `" + setup + "`") +
             " is not permitted here";
    return {};
  }
  return prefix;
}

// Two ranks, each pid 1 of a pid namespace of its own (`unshare --pid`), as ranks in containers
// that share the host's network and /dev/shm: one host, two processes with equal pids. They must
// be told apart (shm, not in-process: each would take the other's addresses for its own), and
// neither can reach the other's occlMemAlloc buffers through /proc, so a sharedBuffers AllReduce
// past the direct bound runs the ring, bit-exact.
TEST(MultiProcessTest, RanksThatArePidOneOfTheirOwnPidNamespacesAreTwoProcessesAndRunTheRing) {
  std::string whyNot;
  const std::vector<std::string> prefix = namespacePrefix({"--pid", "--kill-child"}, "", whyNot);
  if (prefix.empty()) GTEST_SKIP() << whyNot;
  std::vector<pid_t> pids = spawnWithUniqueId("pidns", 2, {}, prefix);
  ASSERT_EQ(pids.size(), 2u);
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
}

// Two ranks on the host's network, each with a /dev/shm of its own (a mount namespace with a
// fresh tmpfs there, as containers get), where shm connectors are made by name: each rank would
// make its own segment and wait for a peer that never writes there (both hung silently until
// killed). They take the network instead, and their AllReduces are exact; a build without UCX
// fails their init instead, naming the two /dev/shm.
TEST(MultiProcessTest, RanksWithADevShmEachTakeTheNetwork) {
  std::string whyNot;
  const std::vector<std::string> prefix =
      namespacePrefix({"--mount", "--propagation", "private"}, "mount -t tmpfs occl-test-shm /dev/shm", whyNot);
  if (prefix.empty()) GTEST_SKIP() << whyNot;
  std::vector<pid_t> pids = spawnWithUniqueId("ownshm", 2, {}, prefix);
  ASSERT_EQ(pids.size(), 2u);
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
}

// The ranks' /dev/shm holds 512 KiB (Docker's holds 64 MiB unless --shm-size says more), less than
// one connector of an AllReduce of 4 MiB: its registration fails on every rank with
// occlSystemError naming /dev/shm, where a first touch of the missing pages used to kill the
// process with SIGBUS; a small AllReduce registered before it still runs, exact. A launcher child
// mounts the small tmpfs in a mount namespace of its own and starts the ranks there.
TEST(MultiProcessTest, ADevShmTooSmallFailsTheRegistrationNotTheProcess) {
  std::string whyNot;
  const std::vector<std::string> prefix = namespacePrefix(
      {"--mount", "--propagation", "private"}, "mount -t tmpfs -o size=512k occl-test-shm /dev/shm", whyNot);
  if (prefix.empty()) GTEST_SKIP() << whyNot;
  const pid_t launcher = spawnChild({{"OCCL_MP_SCENARIO", "smallshm-launcher"}}, prefix);
  EXPECT_EQ(reapChildren({launcher}, std::chrono::seconds(120))[0], 0) << "the launcher or a rank failed";
}

// The peer program between processes fails fast too when a peer dies.
TEST(MultiProcessTest, PeerDeathFailsTheSharedBuffersPeerAllReduce) {
  std::vector<pid_t> pids = spawnWithUniqueId("fault", 3, {{"OCCL_MP_VICTIM", "1"}, {"OCCL_MP_SHARED", "1"}});
  ASSERT_EQ(pids.size(), 3u);
  std::vector<int> codes = reapChildren(pids, std::chrono::seconds(60));
  EXPECT_EQ(codes[0], 0) << "survivor rank 0 failed (exit code)";
  EXPECT_EQ(codes[2], 0) << "survivor rank 2 failed (exit code)";
}

// A peer process stopped inside the peer AllReduce, then killed: rank 1 posts its buffers and
// stops; the others map them, fold their slices and wait for rank 1's second notice, which never
// comes. Its death fails their submission with occlRemoteError, and the failure lets go of the
// mappings it pinned, since PeerRelease never runs (each survivor checks).
TEST(MultiProcessTest, PeerKilledInsideThePeerAllReduceFailsItAndUnpinsItsBuffers) {
  proc::TempDir dir;
  std::vector<pid_t> pids = spawnWithUniqueId("stalled", 3, {{"OCCL_MP_VICTIM", "1"}, {"OCCL_MP_DIR", dir.path()}});
  ASSERT_EQ(pids.size(), 3u);
  for (int r : {0, 2}) {
    EXPECT_TRUE(waitForFile(dir.path() + "/pinned." + std::to_string(r), std::chrono::seconds(30)))
        << "rank " << r << " never mapped its peers' buffers";
  }
  kill(pids[1], SIGKILL);
  std::vector<int> codes = reapChildren(pids, std::chrono::seconds(60));
  EXPECT_EQ(codes[0], 0) << "survivor rank 0 failed (exit code)";
  EXPECT_EQ(codes[2], 0) << "survivor rank 2 failed (exit code)";
}

// A hung peer: rank 1 completes one AllReduce with the others, then stops itself (SIGSTOP: its
// sockets and shared memory stay open, so nothing looks dead). The others' next AllReduce must
// fail with occlTimeout within collTimeoutMs + kHangSlack, its callback fired once; once the peer
// is continued (SIGCONT), every rank aborts its communicator and exits cleanly.
constexpr int64_t kHangTimeoutMs = 1500;
constexpr auto kHangSlack = std::chrono::milliseconds(1500);

TEST(MultiProcessTest, HungPeerTimesTheOthersOutThenEveryoneAborts) {
  char dirTemplate[] = "/tmp/occl-hung-XXXXXX";
  ASSERT_NE(mkdtemp(dirTemplate), nullptr) << std::strerror(errno);
  const std::string dir = dirTemplate;
  std::vector<pid_t> pids = spawnWithUniqueId("hung", 3, {{"OCCL_MP_VICTIM", "1"}, {"OCCL_MP_DIR", dir}});
  ASSERT_EQ(pids.size(), 3u);
  bool stopped = false;
  for (auto deadline = Clock::now() + std::chrono::seconds(60); !stopped && Clock::now() < deadline;) {
    int status = 0;
    const pid_t got = waitpid(pids[1], &status, WNOHANG | WUNTRACED);
    if (got == pids[1]) {
      ASSERT_TRUE(WIFSTOPPED(status)) << "rank 1 ended instead of stopping";
      stopped = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(stopped) << "rank 1 never stopped";
  // The survivors report their timeouts while the peer is still stopped.
  for (int r : {0, 2}) {
    EXPECT_TRUE(waitForFile(dir + "/timedout." + std::to_string(r), std::chrono::seconds(30)))
        << "rank " << r << " never reported its timeout";
  }
  kill(pids[1], SIGCONT);
  { std::ofstream(dir + "/continued") << "1"; }
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(60)));
  std::filesystem::remove_all(dir);
}

// Strangers at the root's bootstrap port of a job of processes, before its ranks arrive: one
// sends garbage, one speaks occl with another job's id, one sends part of a hello and then
// nothing (slowloris), one sends part of a hello and hangs up. Each is refused alone and named in
// rank 0's log; the job meets and its AllReduces (every count, both placements) are exact.
TEST(MultiProcessTest, StrangersOnTheBootstrapPortAreRefusedAndTheJobsAllReducesAreExact) {
  proc::TempDir dir;
  occlUniqueId id{};
  std::vector<pid_t> pids = proc::spawnWithUniqueId("MultiProcessChild.DISABLED_Entry", "strangers", 3,
                                                    {{"OCCL_MP_DIR", dir.path()}}, &id);
  ASSERT_EQ(pids.size(), 3u);
  Result<bootstrap::UniqueIdData> data = bootstrap::unpackUniqueId(id);
  ASSERT_TRUE(data.ok()) << data.status().message;
  Strangers strangers(*data, 3);
  proc::touch(dir.path() + "/strangers-at-the-door");
  // Ranks 0 and 1 are meeting; the root cannot finish before rank 2 comes, so it reads the stale
  // rank first.
  strangers.waitUntilStaleRankRefused();
  proc::touch(dir.path() + "/stale-rank-refused");
  expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
  std::ifstream in(dir.path() + "/stderr.0");
  strangers.expectRefusedAndNamed(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
}

// ---- child side ----

// Every count of the acceptance list, in place and out of place, all in flight at once.
void runAllReduces(occlComm_t comm, int rank, int nRanks) {
  const size_t counts[] = {0, 1, 7, 1023, (size_t{1} << 20) + 3};
  std::vector<std::vector<float>> send, recv;
  CallbackCounter done;
  for (size_t c = 0; c < std::size(counts); ++c) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = counts[c];
    expectOk(occlCollRegister(comm, 0x100 + c, &d), comm, "register");
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      send.emplace_back(counts[c]);
      recv.emplace_back(counts[c], -1.0f);
      for (size_t i = 0; i < counts[c]; ++i) send.back()[i] = inputValue(rank, i);
      float* out = inPlace ? send.back().data() : recv.back().data();
      expectOk(occlSubmit(comm, 0x100 + c, send.back().data(), out, &CallbackCounter::callback, done.arg()), comm, "submit");
    }
  }
  expectOk(occlCommWaitAll(comm, 60000), comm, "waitAll");
  for (const auto& [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << id;
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (size_t k = 0; k < send.size(); ++k) {
    const std::vector<float>& out = (k % 2 == 1) ? send[k] : recv[k];
    for (size_t i = 0; i < out.size(); ++i) {
      const float expected = ranksSum * static_cast<float>(i % 7 + 1);
      ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(float)), 0) << "buffer " << k << " element " << i;
    }
  }
}

struct MemFree {
  void operator()(float* p) const { occlMemFree(p); }
};
using SharedFloats = std::unique_ptr<float[], MemFree>;

SharedFloats sharedFloats(size_t n, float fill) {
  void* p = nullptr;
  expectOk(occlMemAlloc(&p, std::max<size_t>(n, 1) * sizeof(float)), nullptr, "occlMemAlloc");
  SharedFloats f(static_cast<float*>(p));
  std::fill_n(f.get(), n, fill);
  return f;
}

// Counts on both sides of the direct bound; the largest also at an offset into its allocation,
// out of place and in place, all in flight at once. `peersReachable`: every peer can map this
// rank's buffers (one pid namespace), so counts past the direct bound run the peer program; else
// they run the ring.
void runSharedAllReduces(occlComm_t comm, int rank, int nRanks, bool peersReachable = true) {
  const size_t counts[] = {1, 1023, (size_t{1} << 20) + 3};
  constexpr size_t kInterior = 16;  // elements into the allocation
  std::vector<SharedFloats> send, recv;
  std::vector<std::pair<float*, size_t>> outs;
  CallbackCounter done;
  for (size_t c = 0; c < std::size(counts); ++c) {
    const size_t n = counts[c];
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = n;
    d.sharedBuffers = 1;
    expectOk(occlCollRegister(comm, 0x200 + c, &d), comm, "register");
    // Direct while (n-1) x bytes is at most 32 KiB where the peer program can follow, as between
    // threads, and 192 KiB where it cannot (algorithms.cpp).
    const size_t directBound = peersReachable ? size_t{32} << 10 : size_t{192} << 10;
    const bool direct = n * sizeof(float) * static_cast<size_t>(nRanks - 1) <= directBound;
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      const char* algo = nullptr;
      expectOk(occlCollGetAlgorithm(comm, 0x200 + c, inPlace, &algo), comm, "algorithm");
      EXPECT_STREQ(algo, direct ? "direct" : peersReachable ? "peer" : "ring") << n;
    }
    for (int variant = 0; variant < 3; ++variant) {  // out of place, in place, in place at an offset
      const size_t at = variant == 2 ? kInterior : 0;
      send.push_back(sharedFloats(n + at, -2.0f));
      recv.push_back(sharedFloats(n, -1.0f));
      float* in = send.back().get() + at;
      for (size_t i = 0; i < n; ++i) in[i] = inputValue(rank, i);
      float* out = variant == 0 ? recv.back().get() : in;
      outs.emplace_back(out, n);
      expectOk(occlSubmit(comm, 0x200 + c, in, out, &CallbackCounter::callback, done.arg()), comm, "submit");
    }
  }
  // Memory from elsewhere is refused, naming the buffer, and nothing is submitted.
  std::vector<float> privateBuf(counts[2], 1.0f);
  EXPECT_EQ(occlSubmit(comm, 0x202, privateBuf.data(), privateBuf.data(), &CallbackCounter::callback, done.arg()),
            occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comm)).find("sendbuf of collId 0x202 is not memory from occlMemAlloc"),
            std::string::npos)
      << occlGetLastError(comm);
  expectOk(occlCommWaitAll(comm, 60000), comm, "waitAll");
  ASSERT_EQ(done.fired().size(), outs.size());
  for (const auto& [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << id;
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (size_t k = 0; k < outs.size(); ++k) {
    const auto [out, n] = outs[k];
    for (size_t i = 0; i < n; ++i) {
      const float expected = ranksSum * static_cast<float>(i % 7 + 1);
      ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(float)), 0) << "buffer " << k << " element " << i;
    }
  }
  ASSERT_EQ(send[8][kInterior - 1], -2.0f) << "the peers wrote before the offset buffer";
}

// A count per submission on occlMemAlloc buffers (desc.variableCount): the 256 KiB maximum runs
// the peer AllReduce where every peer can map this rank's buffers, and counts up to direct's
// bound the small-message form, direct on the peer program's connectors between processes
// (docs/design.md); where they cannot, the maximum runs the ring, and direct (its bound 192 KiB
// over the peers) fits the ring's connectors on two ranks only. Counts on both sides of the
// bound, in flight at once, bit-exact.
void runSharedVariableAllReduce(occlComm_t comm, int rank, int nRanks, bool peersReachable) {
  constexpr size_t kMax = size_t{1} << 16;
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = kMax;
  d.sharedBuffers = 1;
  d.variableCount = 1;
  expectOk(occlCollRegister(comm, 0x210, &d), comm, "register the variable count");
  uint64_t bound = 0;
  const char* small = nullptr;
  expectOk(occlCollGetSmallForm(comm, 0x210, &bound, &small), comm, "occlCollGetSmallForm");
  const size_t directBound =
      (peersReachable ? size_t{32} << 10 : size_t{192} << 10) / static_cast<size_t>(nRanks - 1) / sizeof(float);
  if (peersReachable || nRanks == 2) {
    EXPECT_STREQ(small, "direct");
    EXPECT_EQ(bound, directBound);
  } else {
    EXPECT_EQ(small, nullptr);
    EXPECT_EQ(bound, 0u);
  }
  const size_t counts[] = {5, directBound, kMax, directBound + 1, 0, 700};
  std::vector<SharedFloats> bufs;
  CallbackCounter done;
  for (size_t n : counts) {
    bufs.push_back(sharedFloats(kMax, -1.0f));
    for (size_t i = 0; i < n; ++i) bufs.back()[i] = inputValue(rank, i);
    expectOk(occlSubmitCount(comm, 0x210, n, bufs.back().get(), bufs.back().get(), &CallbackCounter::callback,
                             done.arg()),
             comm, "occlSubmitCount");
  }
  expectOk(occlCommWaitAll(comm, 60000), comm, "waitAll");
  ASSERT_EQ(done.fired().size(), std::size(counts));
  for (const auto& [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << occlGetLastError(comm);
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (size_t k = 0; k < std::size(counts); ++k)
    for (size_t i = 0; i < kMax; ++i) {
      const float expected = i < counts[k] ? ranksSum * static_cast<float>(i % 7 + 1) : -1.0f;
      ASSERT_EQ(std::memcmp(&bufs[k][i], &expected, sizeof(float)), 0) << "count " << counts[k] << " element " << i;
    }
}

// See ADevShmTooSmallFailsTheRegistrationNotTheProcess.
void registerAllReduceTooLargeForDevShm(occlComm_t comm, int rank, int nRanks) {
  occlCollDesc_t small, large;
  occlCollDescInit(&small);
  small.count = 7;
  expectOk(occlCollRegister(comm, 0x300, &small), comm, "register the small AllReduce");
  occlCollDescInit(&large);
  large.count = size_t{1} << 20;  // the ring: 4 slots of 128 KiB filled in each connector
  EXPECT_EQ(occlCollRegister(comm, 0x301, &large), occlSystemError);
  const std::string why = occlGetLastError(comm);
  EXPECT_NE(why.find("/dev/shm could not give"), std::string::npos) << why;
  std::vector<float> send(small.count), recv(small.count, -1.0f);
  for (size_t i = 0; i < small.count; ++i) send[i] = inputValue(rank, i);
  CallbackCounter done;
  expectOk(occlSubmit(comm, 0x300, send.data(), recv.data(), &CallbackCounter::callback, done.arg()), comm, "submit");
  expectOk(occlCommWaitAll(comm, 60000), comm, "waitAll");
  ASSERT_EQ(done.fired().size(), 1u);
  EXPECT_EQ(done.fired()[0].second, occlSuccess);
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (size_t i = 0; i < small.count; ++i) EXPECT_EQ(recv[i], ranksSum * static_cast<float>(i % 7 + 1)) << i;
  // Both ranks are past their failed registration now (the AllReduce needed both): what it took of
  // /dev/shm is back (ConnectorMemory::discard), all but its headers' pages.
  struct statvfs fs {};
  ASSERT_EQ(statvfs("/dev/shm", &fs), 0);
  EXPECT_GE(fs.f_bavail * 2, fs.f_blocks) << "a failed registration kept /dev/shm full: " << fs.f_bavail << " of "
                                           << fs.f_blocks << " blocks free";
}

void finish(occlComm_t comm) {
  expectOk(occlCommFinalize(comm), comm, "finalize");
  expectOk(occlCommDestroy(comm), nullptr, "destroy");
}

// shared: buffers from occlMemAlloc and a count that runs the peer AllReduce.
void survivePeerDeath(occlComm_t comm, bool shared) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = shared ? size_t{1} << 18 : 4096;
  d.sharedBuffers = shared ? 1 : 0;
  expectOk(occlCollRegister(comm, 0xFA, &d), comm, "register");
  if (shared) {
    const char* algo = nullptr;
    expectOk(occlCollGetAlgorithm(comm, 0xFA, 1, &algo), comm, "algorithm");
    EXPECT_STREQ(algo, "peer");
  }
  SharedFloats buf = sharedFloats(d.count, 1.0f);
  CallbackCounter done;
  const auto start = Clock::now();
  occlResult_t submitted = occlSubmit(comm, 0xFA, buf.get(), buf.get(), &CallbackCounter::callback, done.arg());
  if (submitted == occlSuccess) {
    ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(10))) << "the pending submission never completed";
    EXPECT_EQ(done.fired()[0].second, occlRemoteError);
  } else {
    EXPECT_EQ(submitted, occlRemoteError) << occlGetLastError(comm);  // the death was already known
  }
  // The pending submission may fail first through a connector the other survivor poisoned.
  EXPECT_EQ(awaitAsyncError(comm, std::chrono::seconds(10)), occlRemoteError);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
  // Once the death is known, a new submission is refused with the peer's failure.
  EXPECT_EQ(occlSubmit(comm, 0xFA, buf.get(), buf.get(), &CallbackCounter::callback, done.arg()), occlRemoteError);
  EXPECT_NE(std::string(occlGetLastError(comm)).find("failed"), std::string::npos) << occlGetLastError(comm);
  finish(comm);  // nothing pending: finalize stops without waiting for the dead peer
}

// Rank OCCL_MP_VICTIM submits first and stops once its daemon has posted its notices; the parent
// kills it once the others report their pins (PeerKilledInsideThePeerAllReduce...).
void stallInsidePeerAllReduce(occlComm_t comm, int rank) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = size_t{1} << 18;  // runs the peer program between processes
  d.sharedBuffers = 1;
  expectOk(occlCollRegister(comm, 0xFB, &d), comm, "register");
  SharedFloats buf = sharedFloats(d.count, 1.0f);
  CallbackCounter done;
  if (rank == envInt("OCCL_MP_VICTIM", -1)) {
    expectOk(occlSubmit(comm, 0xFB, buf.get(), buf.get(), &CallbackCounter::callback, done.arg()), comm, "submit");
    // Its daemon posts the notices, then waits for the others' and is preempted: a saved
    // context says the posting try moved (a fixed sleep could miss it on a loaded machine).
    occlCollStats_t stats{};
    for (const auto until = Clock::now() + std::chrono::seconds(20); Clock::now() < until;) {
      expectOk(occlCollGetStats(comm, 0xFB, &stats), comm, "stats");
      if (stats.contextSaves > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(stats.contextSaves, 0u) << "the victim's daemon never posted its notices";
    raise(SIGSTOP);
    _exit(3);  // never reached: the parent kills it while stopped
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the victim posts first, as a rule
  expectOk(occlSubmit(comm, 0xFB, buf.get(), buf.get(), &CallbackCounter::callback, done.arg()), comm, "submit");
  const auto until = Clock::now() + std::chrono::seconds(20);
  while (memory::pins() == 0 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GT(memory::pins(), 0u) << "the fold never mapped the peers' buffers";
  { std::ofstream(std::string(std::getenv("OCCL_MP_DIR")) + "/pinned." + std::to_string(rank)) << "1"; }
  ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(20))) << "the pending submission never completed";
  EXPECT_EQ(done.fired()[0].second, occlRemoteError);
  EXPECT_EQ(memory::pins(), 0u) << "the failed peer AllReduce left its pins";
  expectOk(occlCommAbort(comm), nullptr, "abort");
}

void hangOrTimeOut(occlComm_t comm, int rank) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 1024;
  expectOk(occlCollRegister(comm, 0xA, &d), comm, "register A");
  expectOk(occlCollRegister(comm, 0xB, &d), comm, "register B");
  std::vector<float> a(1024, 1.0f), b(1024, 1.0f);
  CallbackCounter done;
  expectOk(occlSubmit(comm, 0xA, a.data(), a.data(), &CallbackCounter::callback, done.arg()), comm, "submit A");
  ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(30))) << "A never completed";
  ASSERT_EQ(done.fired()[0].second, occlSuccess) << "A";
  ASSERT_EQ(a[0], 3.0f);
  const std::string dir = std::getenv("OCCL_MP_DIR");
  if (rank == envInt("OCCL_MP_VICTIM", -1)) {
    raise(SIGSTOP);  // the parent continues it once the others have timed out
  } else {
    const auto submitted = Clock::now();
    expectOk(occlSubmit(comm, 0xB, b.data(), b.data(), &CallbackCounter::callback, done.arg()), comm, "submit B");
    ASSERT_TRUE(done.waitFor(2, std::chrono::milliseconds(kHangTimeoutMs) + kHangSlack))
        << "B did not fail within collTimeoutMs + slack";
    const auto took = Clock::now() - submitted;
    EXPECT_GE(took, std::chrono::milliseconds(kHangTimeoutMs) - std::chrono::milliseconds(50)) << "failed before its time";
    EXPECT_EQ(done.fired()[1].first, 0xBu);
    EXPECT_EQ(done.fired()[1].second, occlTimeout);
    EXPECT_NE(std::string(occlGetLastError(comm)).find("collTimeoutMs"), std::string::npos) << occlGetLastError(comm);
    { std::ofstream(dir + "/timedout." + std::to_string(rank)) << "1"; }
    ASSERT_TRUE(waitForFile(dir + "/continued", std::chrono::seconds(60)));
  }
  expectOk(occlCommAbort(comm), nullptr, "abort");
  std::vector<std::pair<uint64_t, occlResult_t>> fired = done.fired();
  EXPECT_EQ(fired.size(), rank == envInt("OCCL_MP_VICTIM", -1) ? 1u : 2u) << "a callback fired twice, or not at all";
}

TEST(MultiProcessChild, DISABLED_Entry) {
  const char* scenario = std::getenv("OCCL_MP_SCENARIO");
  ASSERT_NE(scenario, nullptr) << "run only as a child of MultiProcessTest";
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = 30000;  // far above the few seconds the fault test allows
  const std::string s = scenario;
  if (s == "fromenv") {
    // Host ranks, also on a machine with a GPU (auto would make them CUDA ranks, which the plain
    // host buffers below do not suit).
    if (cfg.backend == occlBackendAuto) cfg.backend = occlBackendHost;
    occlComm_t comm = nullptr;
    expectOk(occlCommInitFromEnv(&comm, &cfg), nullptr, "occlCommInitFromEnv");
    int rank = -1, size = -1;
    expectOk(occlCommUserRank(comm, &rank), comm, "rank");
    expectOk(occlCommCount(comm, &size), comm, "count");
    ASSERT_EQ(rank, envInt("RANK", -2));
    ASSERT_EQ(size, 4);
    const char* forced = std::getenv("OCCL_TRANSPORT");
    const bool netForced = forced != nullptr && std::string(forced) == "net";
    for (int peer = 0; peer < size; ++peer) {  // one host: shared memory, unless NET is forced
      const char* t = nullptr;
      expectOk(occlCommPeerTransport(comm, peer, &t), comm, "occlCommPeerTransport");
      EXPECT_STREQ(t, netForced && peer != rank ? "net" : "shm") << peer;
    }
    if (cfg.connectorSlotBytes == 0) {  // auto: the NET size when NET is forced, the one-host size else
      occlConfig_t resolved{};
      expectOk(occlCommGetConfig(comm, &resolved), comm, "occlCommGetConfig");
      EXPECT_EQ(resolved.connectorSlotBytes, netForced ? size_t{1} << 20 : size_t{128} << 10);
    }
    runAllReduces(comm, rank, size);
    finish(comm);
    return;
  }
  if (s == "smallshm-launcher") {  // in the mount namespace with the small /dev/shm: start the ranks there
    std::vector<pid_t> pids = spawnWithUniqueId("smallshm", 2);
    ASSERT_EQ(pids.size(), 2u);
    expectAllSucceeded(reapChildren(pids, std::chrono::seconds(90)));
    return;
  }
  const int rank = envInt("OCCL_MP_RANK", -1), nRanks = envInt("OCCL_MP_NRANKS", 0);
#if !OCCL_HAVE_UCX
  if (s == "ownshm") {  // no NET connector in this build: both inits fail, saying why
    occlComm_t comm = nullptr;
    const occlUniqueId id = proc::idFromEnvironment();
    EXPECT_EQ(occlCommInitRank(&comm, nRanks, id, rank, &cfg), occlInvalidUsage);
    const std::string why = occlGetLastError(nullptr);
    EXPECT_NE(why.find("with a /dev/shm each"), std::string::npos) << why;
    EXPECT_NE(why.find("no UCX"), std::string::npos) << why;
    return;
  }
#endif
  if (s == "hung") {
    cfg.collTimeoutMs = kHangTimeoutMs;
    hangOrTimeOut(initRank(rank, nRanks, cfg), rank);
    return;
  }
  if (s == "strangers") {
    const occlUniqueId id = proc::idFromEnvironment();  // rank 0 creates it: its port is open from now
    const std::string dir = std::getenv("OCCL_MP_DIR");
    // Rank 0's log names the strangers: the parent reads it.
    if (rank == 0 && std::freopen((dir + "/stderr.0").c_str(), "w", stderr) == nullptr) FAIL() << "stderr.0";
    ASSERT_TRUE(waitForFile(dir + "/strangers-at-the-door", std::chrono::seconds(30)));
    // The last rank holds the rendezvous open until the root has refused the stale rank.
    if (rank == nRanks - 1) {
      ASSERT_TRUE(waitForFile(dir + "/stale-rank-refused", std::chrono::seconds(30)));
    }
    occlComm_t comm = nullptr;
    expectOk(occlCommInitRank(&comm, nRanks, id, rank, &cfg), nullptr, "occlCommInitRank");
    runAllReduces(comm, rank, nRanks);
    finish(comm);
    return;
  }
  occlComm_t comm = initRank(rank, nRanks, cfg);
  if (s == "allreduce") {
    runAllReduces(comm, rank, nRanks);
    finish(comm);
  } else if (s == "shared") {
    runSharedAllReduces(comm, rank, nRanks);
    runSharedVariableAllReduce(comm, rank, nRanks, /*peersReachable=*/true);
    finish(comm);
  } else if (s == "smallshm") {
    registerAllReduceTooLargeForDevShm(comm, rank, nRanks);
    finish(comm);
  } else if (s == "ownshm") {
    for (int peer = 0; peer < nRanks; ++peer) {
      const char* t = nullptr;
      expectOk(occlCommPeerTransport(comm, peer, &t), comm, "occlCommPeerTransport");
      if (peer != rank) {
        EXPECT_STREQ(t, "net") << peer;
      }
    }
    runAllReduces(comm, rank, nRanks);
    finish(comm);
  } else if (s == "pidns") {
    EXPECT_EQ(getpid(), 1) << "not pid 1 of a pid namespace of its own: no equal pids to tell apart";
    for (int peer = 0; peer < nRanks; ++peer) {
      const char* t = nullptr;
      expectOk(occlCommPeerTransport(comm, peer, &t), comm, "occlCommPeerTransport");
      if (peer != rank) {
        EXPECT_STREQ(t, "shm") << peer;
      }
    }
    runSharedAllReduces(comm, rank, nRanks, /*peersReachable=*/false);
    runSharedVariableAllReduce(comm, rank, nRanks, /*peersReachable=*/false);
    finish(comm);
  } else if (s == "fault") {
    if (rank == envInt("OCCL_MP_VICTIM", -1)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the survivors submit meanwhile
      _exit(0);
    }
    survivePeerDeath(comm, envInt("OCCL_MP_SHARED", 0) == 1);
  } else if (s == "stalled") {
    stallInsidePeerAllReduce(comm, rank);
  } else {
    FAIL() << "unknown scenario " << s;
  }
}

}  // namespace
}  // namespace occl::test
