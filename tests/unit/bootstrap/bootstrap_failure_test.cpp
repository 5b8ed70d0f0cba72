// The bootstrap's failure detection: a rank that exits, is killed (a forked process) or aborts is
// reported to every other rank with why; an orderly close is not a failure.
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

}  // namespace
}  // namespace occl::bootstrap
