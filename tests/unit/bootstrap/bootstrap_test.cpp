// Bootstrap rendezvous, init collectives and failure detection, with ranks as threads (and as
// forked processes where a rank has to die); plus launcher environment parsing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <latch>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher_env.hpp"
#include "support/strangers.hpp"

namespace occl::bootstrap {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using BootstrapPtr = std::unique_ptr<Bootstrap>;

int64_t msSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Runs fn(rank) on one thread per rank and returns each rank's Status; an exception thrown on a
// rank thread is rethrown here.
template <class Fn>
std::vector<Status> runRanks(int n, Fn fn) {
  std::vector<Status> out(n);
  std::exception_ptr first;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        out[r] = fn(r);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
  return out;
}

void expectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message;
}

// A port nobody listens on right now.
int freePort(const char* host = "127.0.0.1") {
  auto addr = SockAddr::resolve(host, 0);
  auto s = Socket::listen(*addr);
  return s.ok() ? s->localAddress()->port() : 0;
}

UniqueIdData newId() {
  auto id = createUniqueId();
  EXPECT_TRUE(id.ok()) << id.status().message;
  return *id;
}

struct FailureRecorder {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  int rank = -2;
  std::string why;

  FailureCallback callback() {
    return [this](int r, const std::string& w) {
      std::lock_guard lk(mu);
      ++calls;
      rank = r;
      why = w;
      cv.notify_all();
    };
  }
  bool waitFor(std::chrono::milliseconds d) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, d, [&] { return calls > 0; });
  }
};

Status checkGathered(const std::vector<char>& buf, int n, size_t bytes, int round) {
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < bytes; ++i) {
      if (buf[r * bytes + i] != static_cast<char>(r * 31 + i + round)) {
        return Status::error(occlInternalError, "wrong byte in slot of rank " + std::to_string(r));
      }
    }
  }
  return Status::success();
}

class BootstrapSizes : public ::testing::TestWithParam<int> {};

TEST_P(BootstrapSizes, AllGatherAndBarrier) {
  const int n = GetParam();
  UniqueIdData id = newId();
  auto results = runRanks(n, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, n, 20000);
    if (!bs.ok()) return bs.status();
    if ((*bs)->rank() != rank || (*bs)->size() != n || (*bs)->nonce() != id.nonce) {
      return Status::error(occlInternalError, "wrong rank, size or nonce");
    }
    int round = 0;
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{8}, size_t{4096}, size_t{70001}}) {
      std::vector<char> buf(bytes * n, 0);
      for (size_t i = 0; i < bytes; ++i) buf[rank * bytes + i] = static_cast<char>(rank * 31 + i + round);
      if (auto st = (*bs)->allGather(buf.data(), bytes); !st.ok()) return st;
      if (auto st = checkGathered(buf, n, bytes, round); !st.ok()) return st;
      if (auto st = (*bs)->barrier(); !st.ok()) return st;
      ++round;
    }
    return (*bs)->close();
  });
  expectAllOk(results);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BootstrapSizes, ::testing::Range(1, 9));

TEST(Bootstrap, LateRankStillJoins) {
  UniqueIdData id = newId();
  expectAllOk(runRanks(4, [&](int rank) -> Status {
    if (rank == 2) std::this_thread::sleep_for(300ms);
    auto bs = Bootstrap::connect(id, rank, 4, 10000);
    return bs.ok() ? (*bs)->barrier() : bs.status();
  }));
}

TEST(Bootstrap, LateRootOfLauncherAddress) {
  auto id = uniqueIdFromAddress("127.0.0.1", freePort(), 42);
  ASSERT_TRUE(id.ok()) << id.status().message;
  std::vector<uint64_t> nonces(3);
  expectAllOk(runRanks(3, [&](int rank) -> Status {
    if (rank == 0) std::this_thread::sleep_for(300ms);  // the others are refused and retry
    auto bs = Bootstrap::connect(*id, rank, 3, 10000);
    if (!bs.ok()) return bs.status();
    nonces[rank] = (*bs)->nonce();
    return (*bs)->barrier();
  }));
  EXPECT_EQ(nonces[0], nonces[1]);
  EXPECT_EQ(nonces[0], nonces[2]);
}

TEST(Bootstrap, LoopbackIPv6) {
  int port = freePort("::1");
  if (port == 0) GTEST_SKIP() << "no IPv6 loopback";
  auto id = uniqueIdFromAddress("::1", port, 7);
  ASSERT_TRUE(id.ok()) << id.status().message;
  expectAllOk(runRanks(2, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(*id, rank, 2, 10000);
    return bs.ok() ? (*bs)->barrier() : bs.status();
  }));
}

TEST(Bootstrap, NranksMismatchFailsBothSidesQuickly) {
  UniqueIdData id = newId();
  auto start = Clock::now();
  auto results = runRanks(2, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, rank == 0 ? 2 : 3, 20000);
    return bs.status();
  });
  EXPECT_LT(msSince(start), 5000);
  for (auto& st : results) {
    EXPECT_EQ(st.code, occlInvalidUsage) << st.message;
    EXPECT_NE(st.message.find("nranks=3"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("nranks=2"), std::string::npos) << st.message;
  }
}

TEST(Bootstrap, DuplicateRankIsRejected) {
  UniqueIdData id = newId();
  auto results = runRanks(3, [&](int rank) -> Status {
    if (rank == 2) std::this_thread::sleep_for(100ms);
    return Bootstrap::connect(id, rank == 0 ? 0 : 1, 3, 20000).status();
  });
  for (auto& st : results) EXPECT_EQ(st.code, occlInvalidUsage) << st.message;
  EXPECT_NE(results[0].message.find("duplicate rank 1"), std::string::npos) << results[0].message;
}

TEST(Bootstrap, BadArguments) {
  UniqueIdData id = newId();
  EXPECT_EQ(Bootstrap::connect(id, 2, 2, 1000).status().code, occlInvalidArgument);
  EXPECT_EQ(Bootstrap::connect(id, 0, 0, 1000).status().code, occlInvalidArgument);
  UniqueIdData bad = id;
  bad.magicVersion ^= 1;
  EXPECT_EQ(Bootstrap::connect(bad, 1, 2, 1000).status().code, occlInvalidArgument);
}

// Strangers on the root's port while a 4-rank job meets there: one sends garbage, one speaks
// occl with another job's id, one sends part of a hello and then nothing (slowloris), one sends
// part of a hello and hangs up. Each is refused alone, named on stderr; the job meets and its
// collectives carry the right bytes.
TEST(Bootstrap, StrangersAreRefusedAndTheJobGoesOn) {
  UniqueIdData id = newId();
  ::testing::internal::CaptureStderr();
  test::Strangers strangers(id, 4);
  constexpr size_t kBytes = 40;
  expectAllOk(runRanks(4, [&](int rank) -> Status {
    if (rank != 0) std::this_thread::sleep_for(300ms);  // the strangers are at the root first
    auto bs = Bootstrap::connect(id, rank, 4, 20000);
    if (!bs.ok()) return bs.status();
    std::vector<char> buf(4 * kBytes);
    for (size_t i = 0; i < kBytes; ++i) buf[rank * kBytes + i] = static_cast<char>(rank * 31 + i + 1);
    if (Status st = (*bs)->allGather(buf.data(), kBytes); !st.ok()) return st;
    if (Status st = checkGathered(buf, 4, kBytes, 1); !st.ok()) return st;
    return (*bs)->barrier();
  }));
  strangers.expectRefusedAndNamed(::testing::internal::GetCapturedStderr());
}

TEST(Bootstrap, SilentOrClosedConnectionsAreIgnored) {
  UniqueIdData id = newId();
  {
    auto quitter = Socket::connect(id.rootAddress(), deadlineAfterMs(5000));
    ASSERT_TRUE(quitter.ok());
  }
  auto silent = Socket::connect(id.rootAddress(), deadlineAfterMs(5000));  // open all along
  ASSERT_TRUE(silent.ok());
  expectAllOk(runRanks(2, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, 2, 10000);
    return bs.ok() ? (*bs)->barrier() : bs.status();
  }));
}

TEST(Bootstrap, UnreachableOrHungRootTimesOutWithinBound) {
  // Nobody listening (refused, retried), and a root that listens but never answers (hung).
  auto silent = Socket::listen(*SockAddr::resolve("127.0.0.1", 0));
  ASSERT_TRUE(silent.ok());
  for (int port : {freePort(), silent->localAddress()->port()}) {
    auto id = uniqueIdFromAddress("127.0.0.1", port, 0);
    ASSERT_TRUE(id.ok());
    auto start = Clock::now();
    auto st = Bootstrap::connect(*id, 1, 2, 600).status();
    EXPECT_LT(msSince(start), 2000);
    EXPECT_EQ(st.code, occlTimeout) << st.message;
    EXPECT_NE(st.message.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << st.message;
  }
  // A non-routable address: depending on the network, silence, unreachable, or a middlebox that
  // answers; whatever it is, it fails within the bound.
  auto id = uniqueIdFromAddress("10.255.255.1", 9, 0);
  ASSERT_TRUE(id.ok());
  auto start = Clock::now();
  EXPECT_FALSE(Bootstrap::connect(*id, 1, 2, 600).ok());
  EXPECT_LT(msSince(start), 2500);
}

TEST(Bootstrap, RootReportsMissingRanks) {
  UniqueIdData id = newId();
  auto results = runRanks(2, [&](int rank) -> Status { return Bootstrap::connect(id, rank, 3, 800).status(); });
  EXPECT_EQ(results[0].code, occlTimeout) << results[0].message;
  EXPECT_NE(results[0].message.find("[2]"), std::string::npos) << results[0].message;
  EXPECT_EQ(results[1].code, occlTimeout) << results[1].message;
}

TEST(Bootstrap, CollectiveMismatchFailsEveryRank) {
  UniqueIdData id = newId();
  auto results = runRanks(3, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, 3, 10000);
    if (!bs.ok()) return bs.status();
    std::vector<char> buf(3 * 16);
    Status st = (*bs)->allGather(buf.data(), rank == 2 ? 16 : 8);
    if (st.ok()) return Status::error(occlInternalError, "size mismatch went unnoticed");
    Status again = (*bs)->barrier();  // the failure is sticky
    return again.code == st.code ? st : Status::error(occlInternalError, "not sticky: " + again.message);
  });
  for (auto& st : results) {
    EXPECT_EQ(st.code, occlInvalidUsage) << st.message;
    EXPECT_NE(st.message.find("16 bytes"), std::string::npos) << st.message;
  }
}

TEST(Bootstrap, UniqueIdRoundTripAndInterfaceChoice) {
  UniqueIdData id = newId();
  occlUniqueId packed;
  packUniqueId(id, &packed);
  auto back = unpackUniqueId(packed);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(&*back, &id, sizeof(id)), 0);
  packed.internal[0] ^= 0x5a;
  EXPECT_EQ(unpackUniqueId(packed).status().code, occlInvalidArgument);

  ::setenv("OCCL_SOCKET_IFNAME", "lo", 1);
  auto lo = createUniqueId();
  ::setenv("OCCL_SOCKET_IFNAME", "=nosuchif0", 1);
  auto none = createUniqueId();
  ::unsetenv("OCCL_SOCKET_IFNAME");
  ASSERT_TRUE(lo.ok()) << lo.status().message;
  EXPECT_TRUE(lo->rootAddress().isLoopback()) << lo->rootAddress().toString();
  EXPECT_NE(none.status().message.find("nosuchif0"), std::string::npos) << none.status().message;
}

// ---- failure detection ----

// Runs `child` as a forked process (it must not return into the test) and returns its pid.
template <class Fn>
pid_t forkRank(Fn child) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(30);  // never outlive the test
    int code = 1;
    try {
      code = child();
    } catch (...) {
    }
    ::_exit(code);
  }
  return pid;
}

enum class ChildEnd { kExit, kSigkill, kOrderlyClose };

// Ranks {0..2} minus `childRank` run as threads here; `childRank` runs in a child process
// that ends as `end` after a first barrier. Returns what each survivor's callback saw.
std::map<int, std::pair<bool, int>> runWithDyingChild(int childRank, ChildEnd end) {
  auto id = childRank == 0 ? uniqueIdFromAddress("127.0.0.1", freePort(), 5) : createUniqueId();
  EXPECT_TRUE(id.ok());
  pid_t pid = forkRank([&] {
    auto bs = Bootstrap::connect(*id, childRank, 3, 10000);
    if (!bs.ok() || !(*bs)->barrier().ok()) return 2;
    if (end == ChildEnd::kOrderlyClose) (void)(*bs)->close();
    if (end == ChildEnd::kSigkill) while (true) ::pause();
    ::_exit(0);  // no destructors: the sockets die with the process
  });
  if (pid <= 0) {  // never let kill() below see -1
    ADD_FAILURE() << "fork failed";
    return {};
  }
  std::map<int, std::pair<bool, int>> seen;
  std::mutex mu;
  auto results = runRanks(3, [&](int rank) -> Status {
    if (rank == childRank) return Status::success();
    auto bs = Bootstrap::connect(*id, rank, 3, 10000);
    if (!bs.ok()) return bs.status();
    FailureRecorder rec;
    (*bs)->setFailureCallback(rec.callback());
    if (auto st = (*bs)->barrier(); !st.ok()) return st;
    if (end == ChildEnd::kSigkill && rank == (childRank == 0 ? 1 : 0)) ::kill(pid, SIGKILL);
    bool fired = rec.waitFor(end == ChildEnd::kOrderlyClose ? 500ms : 2000ms);
    if (fired && (*bs)->barrier().code != occlRemoteError) {
      return Status::error(occlInternalError, "a barrier after a failure did not fail");
    }
    std::lock_guard lk(mu);
    seen[rank] = {fired, rec.rank};
    return Status::success();
  });
  expectAllOk(results);
  int wstatus = 0;
  ::waitpid(pid, &wstatus, 0);
  return seen;
}

TEST(BootstrapFailure, ExitedRankIsReportedToEveryone) {
  for (auto& [rank, what] : runWithDyingChild(2, ChildEnd::kExit)) {
    EXPECT_TRUE(what.first) << "rank " << rank << " was not told";
    EXPECT_EQ(what.second, 2) << "rank " << rank;
  }
}

TEST(BootstrapFailure, KilledRankIsReportedToEveryone) {
  for (auto& [rank, what] : runWithDyingChild(1, ChildEnd::kSigkill)) {
    EXPECT_TRUE(what.first) << "rank " << rank << " was not told";
    EXPECT_EQ(what.second, 1) << "rank " << rank;
  }
}

TEST(BootstrapFailure, DeadRootIsReported) {
  for (auto& [rank, what] : runWithDyingChild(0, ChildEnd::kExit)) {
    EXPECT_TRUE(what.first) << "rank " << rank << " was not told";
    EXPECT_EQ(what.second, 0) << "rank " << rank;
  }
}

TEST(BootstrapFailure, OrderlyCloseIsNotAFailure) {
  for (auto& [rank, what] : runWithDyingChild(2, ChildEnd::kOrderlyClose)) {
    EXPECT_FALSE(what.first) << "rank " << rank << " saw a failure";
  }
}

TEST(BootstrapFailure, RootClosingFirstIsNotAFailure) {
  UniqueIdData id = newId();
  auto results = runRanks(3, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, 3, 10000);
    if (!bs.ok()) return bs.status();
    FailureRecorder rec;
    (*bs)->setFailureCallback(rec.callback());
    if (auto st = (*bs)->barrier(); !st.ok()) return st;
    if (rank == 0) return (*bs)->close();
    if (rec.waitFor(400ms)) return Status::error(occlInternalError, "callback fired: " + rec.why);
    Status after = (*bs)->barrier();
    return after.code == occlRemoteError ? Status::success() : Status::error(occlInternalError, after.message);
  });
  expectAllOk(results);
}

TEST(BootstrapFailure, AbortIsReportedWithItsReason) {
  UniqueIdData id = newId();
  std::vector<FailureRecorder> recorders(3);
  // Rank 1 aborts once the others have left the barrier: an abort that reaches a rank still in
  // the barrier fails the barrier instead (under load the release can come after it).
  std::latch othersLeftBarrier(2);
  auto results = runRanks(3, [&](int rank) -> Status {
    auto bs = Bootstrap::connect(id, rank, 3, 10000);
    if (!bs.ok()) return bs.status();
    (*bs)->setFailureCallback(recorders[rank].callback());
    Status barrier = (*bs)->barrier();
    if (rank != 1) othersLeftBarrier.count_down();
    if (!barrier.ok()) return barrier;
    if (rank == 1) {
      othersLeftBarrier.wait();
      return (*bs)->abort("user asked");
    }
    if (!recorders[rank].waitFor(2000ms)) return Status::error(occlInternalError, "abort not reported");
    return Status::success();
  });
  expectAllOk(results);
  for (int r : {0, 2}) {
    EXPECT_EQ(recorders[r].rank, 1) << "rank " << r;
    EXPECT_NE(recorders[r].why.find("aborted: user asked"), std::string::npos) << recorders[r].why;
  }
  EXPECT_EQ(recorders[1].calls, 0);
}

// ---- launcher environment ----

class LauncherEnvTest : public ::testing::Test {
 protected:
  static constexpr const char* kVars[] = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                                          "OMPI_MCA_ess_base_jobid", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                                          "MASTER_ADDR", "MASTER_PORT", "OCCL_COMM_ID", "TORCHELASTIC_RUN_ID"};
  void SetUp() override {
    for (const char* v : kVars) {
      if (const char* old = std::getenv(v)) saved_[v] = old;
      ::unsetenv(v);
    }
  }
  void TearDown() override {
    for (const char* v : kVars) ::unsetenv(v);
    for (auto& [k, v] : saved_) ::setenv(k.c_str(), v.c_str(), 1);
  }
  static void set(const char* k, const char* v) { ::setenv(k, v, 1); }
  static std::string error() {
    auto e = detectLauncherEnv();
    EXPECT_FALSE(e.ok());
    EXPECT_EQ(e.status().code, occlInvalidArgument);
    return e.status().message;
  }

 private:
  std::map<std::string, std::string> saved_;
};

TEST_F(LauncherEnvTest, MpirunWithCommId) {
  set("OMPI_COMM_WORLD_RANK", "3");
  set("OMPI_COMM_WORLD_SIZE", "8");
  set("RANK", "0");  // mpirun wins over stray torchrun variables
  set("WORLD_SIZE", "2");
  set("OCCL_COMM_ID", "node7:4242");
  set("MASTER_ADDR", "ignored");
  set("MASTER_PORT", "1");
  auto e = detectLauncherEnv();
  ASSERT_TRUE(e.ok()) << e.status().message;
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->size, 8);
  EXPECT_EQ(e->source, "mpirun");
  EXPECT_EQ(e->addr, "node7");
  EXPECT_EQ(e->port, 4242);
  EXPECT_EQ(e->addrSource, "OCCL_COMM_ID");
}

TEST_F(LauncherEnvTest, TorchrunWithMasterAddrAndIPv6CommId) {
  set("RANK", "1");
  set("WORLD_SIZE", "2");
  set("MASTER_ADDR", "10.1.2.3");
  set("MASTER_PORT", "29500");
  auto e = detectLauncherEnv();
  ASSERT_TRUE(e.ok()) << e.status().message;
  EXPECT_EQ(e->source, "torchrun");
  EXPECT_EQ(e->addr, "10.1.2.3");
  EXPECT_EQ(e->port, 29500);
  set("OCCL_COMM_ID", "[fe80::1]:80");
  e = detectLauncherEnv();
  ASSERT_TRUE(e.ok()) << e.status().message;
  EXPECT_EQ(e->addr, "fe80::1");
  EXPECT_EQ(e->port, 80);
}

TEST_F(LauncherEnvTest, MpirunSingleNodePortFromJobId) {
  set("OMPI_COMM_WORLD_RANK", "0");
  set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_NE(error().find("OCCL_COMM_ID"), std::string::npos);
  set("OMPI_MCA_ess_base_jobid", "3567714305");
  auto a = detectLauncherEnv();
  ASSERT_TRUE(a.ok()) << a.status().message;
  EXPECT_EQ(a->addr, "127.0.0.1");
  EXPECT_GE(a->port, 20000);
  EXPECT_LE(a->port, 29999);
  EXPECT_NE(a->jobSeed, 0u);
  set("OMPI_COMM_WORLD_RANK", "1");
  auto b = detectLauncherEnv();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->port, b->port);
  EXPECT_EQ(a->jobSeed, b->jobSeed);
}

TEST_F(LauncherEnvTest, BadValuesNameTheVariable) {
  EXPECT_NE(error().find("OMPI_COMM_WORLD_RANK"), std::string::npos);
  set("RANK", "abc");
  set("WORLD_SIZE", "4");
  EXPECT_NE(error().find("RANK='abc'"), std::string::npos);
  set("RANK", "4");
  auto msg = error();
  EXPECT_NE(msg.find("RANK=4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("WORLD_SIZE=4"), std::string::npos) << msg;
  set("RANK", "1");
  set("WORLD_SIZE", "0");
  EXPECT_NE(error().find("WORLD_SIZE=0"), std::string::npos);
  set("WORLD_SIZE", "4");
  EXPECT_NE(error().find("MASTER_ADDR"), std::string::npos);  // torchrun without an address
  set("MASTER_ADDR", "host");
  EXPECT_NE(error().find("MASTER_PORT is not"), std::string::npos);
  for (const char* port : {"70000", "0", "x1", "12 "}) {
    set("MASTER_PORT", port);
    EXPECT_NE(error().find(std::string("MASTER_PORT='") + port + "'"), std::string::npos) << port;
  }
  for (const char* id : {"nocolon", "::1:80", "[::1", "[::1]80", ":80", "host:", "host:99999"}) {
    set("OCCL_COMM_ID", id);
    EXPECT_NE(error().find(std::string("OCCL_COMM_ID='") + id + "'"), std::string::npos) << id;
  }
  ::unsetenv("WORLD_SIZE");
  EXPECT_NE(error().find("WORLD_SIZE is not"), std::string::npos);
}

TEST_F(LauncherEnvTest, LocalRank) {
  EXPECT_EQ(localRankFromEnv(), -1);
  set("LOCAL_RANK", "3");
  EXPECT_EQ(localRankFromEnv(), 3);
  set("OMPI_COMM_WORLD_LOCAL_RANK", "5");
  EXPECT_EQ(localRankFromEnv(), 5);
  set("OMPI_COMM_WORLD_LOCAL_RANK", "x");
  EXPECT_EQ(localRankFromEnv(), -1);
}

TEST_F(LauncherEnvTest, LauncherSetsRanks) {
  EXPECT_FALSE(launcherSetsRanks());
  set("WORLD_SIZE", "");
  EXPECT_FALSE(launcherSetsRanks()) << "empty counts as unset";
  set("WORLD_SIZE", "4");
  EXPECT_TRUE(launcherSetsRanks());
  ::unsetenv("WORLD_SIZE");
  set("OMPI_COMM_WORLD_SIZE", "2");
  EXPECT_TRUE(launcherSetsRanks());
}

TEST_F(LauncherEnvTest, EnvironmentToRendezvous) {
  set("MASTER_ADDR", "127.0.0.1");
  set("MASTER_PORT", std::to_string(freePort()).c_str());
  set("TORCHELASTIC_RUN_ID", "job-1");
  set("WORLD_SIZE", "2");
  std::vector<LauncherEnv> envs;
  for (const char* r : {"0", "1"}) {
    set("RANK", r);
    auto e = detectLauncherEnv();
    ASSERT_TRUE(e.ok()) << e.status().message;
    envs.push_back(*e);
  }
  expectAllOk(runRanks(2, [&](int rank) -> Status {
    const auto& e = envs[rank];
    auto id = uniqueIdFromAddress(e.addr, e.port, e.jobSeed);
    if (!id.ok()) return id.status();
    auto bs = Bootstrap::connect(*id, e.rank, e.size, 10000);
    return bs.ok() ? (*bs)->barrier() : bs.status();
  }));
}

}  // namespace
}  // namespace occl::bootstrap
