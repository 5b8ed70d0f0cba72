// The paper's disorder test with ranks as processes: the test forks 8 children before any occl
// thread exists; child 0 creates the unique id and hands it to the others through pipes; each
// child runs its rank (occlCommInitRank, shared-memory connectors) with its own submission
// order, checks every result, and exits with a status the parent collects. The parent kills
// every child still running after its deadline.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <thread>

#include "torture/torture.hpp"
#include "support/ranks.hpp"

namespace occl::torture {
namespace {

using namespace std::chrono_literals;

enum ChildExit { kOk = 0, kWrong = 1, kHang = 2, kInit = 3 };

bool readAll(int fd, void* data, size_t bytes, int timeoutMs) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeoutMs) <= 0) return false;
    ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool writeAll(int fd, const void* data, size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = write(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Rank 0 makes the id and writes it into every other rank's pipe; the others read their own.
bool exchangeId(int rank, int nRanks, const std::vector<std::array<int, 2>>& pipes, occlUniqueId& id) {
  if (rank != 0) return readAll(pipes[static_cast<size_t>(rank)][0], &id, sizeof(id), 30000);
  if (occlGetUniqueId(&id) != occlSuccess) return false;
  for (int r = 1; r < nRanks; ++r)
    if (!writeAll(pipes[static_cast<size_t>(r)][1], &id, sizeof(id))) return false;
  return true;
}

int runChild(int rank, int nRanks, int iters, bool gates, const std::vector<std::array<int, 2>>& pipes) {
  occlUniqueId id{};
  if (!exchangeId(rank, nRanks, pipes, id)) {
    std::fprintf(stderr, "[torture] rank %d: unique id exchange failed\n", rank);
    return kInit;
  }
  occlConfig_t config = test::testConfig();
  occlComm_t comm = nullptr;
  if (occlCommInitRank(&comm, nRanks, id, rank, &config) != occlSuccess) {
    std::fprintf(stderr, "[torture] rank %d: occlCommInitRank: %s\n", rank, occlGetLastError(nullptr));
    return kInit;
  }
  std::vector<CollPlan> plan;
  std::vector<size_t> counts = geometricCounts(8, 256, 1 << 20);
  for (size_t c = 0; c < counts.size(); ++c) {
    CollPlan p;
    p.comm = comm;
    p.collId = 0x100 + c;
    p.count = counts[c];
    for (int m = 0; m < nRanks; ++m) p.members.push_back(m);
    plan.push_back(p);
  }
  std::string error;
  if (registerAll(plan, &error) != occlSuccess) {
    std::fprintf(stderr, "[torture] rank %d: register: %s\n", rank, error.c_str());
    occlCommAbort(comm);
    return kInit;
  }
  PendingTracker tracker(nRanks);
  RunOptions o;
  o.iters = iters;
  o.gates = gates;
  o.iterTimeout = 30s;
  RankBuffers buffers;  // outlives the abort below
  RankResult result = runRank(rank, plan, o, tracker, buffers);
  if (result.timedOut) {
    occlCommAbort(comm);  // the pending collectives were printed by runRank
    return kHang;
  }
  occlCollStats_t stats = sumStats({{comm, 0x100}});
  for (size_t c = 1; c < plan.size(); ++c) stats.preemptions += sumStats({{comm, 0x100 + c}}).preemptions;
  const bool finalized = occlCommFinalize(comm) == occlSuccess;
  occlCommDestroy(comm);
  if (result.wrong != 0 || tracker.failedCallbacks() != 0 || !finalized) {
    std::fprintf(stderr, "[torture] rank %d: %llu wrong (%s), %llu failed callbacks (%s)\n", rank,
                 static_cast<unsigned long long>(result.wrong), result.firstWrong.c_str(),
                 static_cast<unsigned long long>(tracker.failedCallbacks()), tracker.firstFailure().c_str());
    return kWrong;
  }
  std::printf("[torture] rank %d (pid %d): %d iterations bit-exact, %llu preemptions\n", rank, getpid(), iters,
              static_cast<unsigned long long>(stats.preemptions));
  return kOk;
}

// Waits for every child until `deadline`, then SIGKILLs what is left. Returns exit codes
// (-1 = killed or crashed).
std::vector<int> reap(const std::vector<pid_t>& pids, std::chrono::steady_clock::time_point deadline) {
  std::vector<int> codes(pids.size(), -2);  // -2 = still running
  size_t left = pids.size();
  while (left > 0 && std::chrono::steady_clock::now() < deadline) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (codes[r] != -2 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      --left;
    }
    std::this_thread::sleep_for(20ms);
  }
  for (size_t r = 0; r < pids.size(); ++r) {
    if (codes[r] != -2) continue;
    std::fprintf(stderr, "[torture] rank %zu (pid %d) still running at the deadline: killed\n", r, pids[r]);
    kill(pids[r], SIGKILL);
    waitpid(pids[r], nullptr, 0);
    codes[r] = -1;
  }
  return codes;
}

// Forks `kRanks` children that each run runChild, and expects every one to exit kOk.
void runProcesses(int kRanks, int kIters, bool gates) {
  std::vector<std::array<int, 2>> pipes(static_cast<size_t>(kRanks));
  for (auto& p : pipes) ASSERT_EQ(pipe(p.data()), 0);
  std::fflush(stdout);
  std::fflush(stderr);
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0) << "fork failed";
    if (pid == 0) {
      int code = runChild(r, kRanks, kIters, gates, pipes);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(code);  // no gtest teardown or static destructors in the child
    }
    pids.push_back(pid);
  }
  for (auto& p : pipes) {
    close(p[0]);
    close(p[1]);
  }
  auto started = std::chrono::steady_clock::now();
  std::vector<int> codes = reap(pids, started + 150s);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
  std::printf("[torture] %d processes x 8 allreduces x %d iterations%s: %lld ms\n", kRanks, kIters,
              gates ? " gated" : "", static_cast<long long>(ms));
  for (int r = 0; r < kRanks; ++r)
    EXPECT_EQ(codes[static_cast<size_t>(r)], kOk)
        << "rank " << r << ": 1 = wrong data, 2 = hang (its pending collectives are printed above), 3 = init, "
        << "-1 = killed or crashed";
}

TEST(DisorderProcessTest, PaperWorkloadWithEightProcesses) { runProcesses(8, 200, /*gates=*/false); }

// Gated submission across processes (gate_test.cpp has the threads): each rank submits before its
// inputs exist and a thread of its own opens the gates in another order.
TEST(DisorderProcessTest, GatedWorkloadWithFourProcesses) { runProcesses(4, 40, /*gates=*/true); }

}  // namespace
}  // namespace occl::torture
