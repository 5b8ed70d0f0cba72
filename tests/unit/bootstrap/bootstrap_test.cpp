// Bootstrap rendezvous and its collectives, ranks as threads: every size, late and missing ranks,
// strangers on the root's port, bounded timeouts, mismatched collectives, the unique id.
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
#include "support/bootstrap_ranks.hpp"

namespace occl::bootstrap {
namespace {

using namespace std::chrono_literals;
using namespace ranks;

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
    if (rank == 3) strangers.waitUntilStaleRankRefused();  // the root meets it before the job is whole
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

}  // namespace
}  // namespace occl::bootstrap
