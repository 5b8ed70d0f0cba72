// Device memory shared between processes (transport/ipc/): the descriptor exchange, the simt
// emulation's exported and imported memory, and simt ranks as 2 and 4 processes whose connectors
// are `simt-ipc`: every collective bit-exact in any order per rank, a peer's abort and a peer's
// SIGKILL failing the survivors, and nothing left behind (descriptors, mappings, /dev/shm names).
// The same protocol runs on GPUs as `cuda-ipc` (ipc_device.hpp); docs/design.md says what only a
// GPU shows.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "device/compat.hpp"
#include "device/simt_memory.hpp"
#include "support/collective_cases.hpp"
#include "support/dev_shm.hpp"
#include "support/process_job.hpp"
#include "support/ranks.hpp"
#include "transport/ipc/fd_exchange.hpp"
#include "transport/ipc/ipc_device.hpp"

namespace occl::test {
namespace {

using namespace std::chrono_literals;
using transport::ipc::PoolFd;

// This process's open descriptors, as what each names.
std::multiset<std::string> openFds() {
  std::multiset<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    out.insert(std::filesystem::read_symlink(e.path(), ec).string());
  }
  return out;
}

// How many mappings of this process name `what` (/proc/self/maps).
size_t mappingsOf(const std::string& what) {
  std::ifstream maps("/proc/self/maps");
  size_t n = 0;
  for (std::string line; std::getline(maps, line);) n += line.find(what) != std::string::npos ? 1 : 0;
  return n;
}

int memfdWith(const std::string& text) {
  const int fd = memfd_create("ipc-test", MFD_CLOEXEC);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  return fd;
}

std::string contentsOf(int fd) {
  char buf[64] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf), 0);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// Four ranks as threads exchange two descriptors each with every other: each receives its
// peers' files (read back by their contents) and the exchange leaves no descriptor behind.
TEST(FdExchangeTest, EachRankReceivesItsPeersDescriptors) {
  constexpr int kRanks = 4;
  const auto before = openFds();
  const uint64_t nonce = 0x1bc0000000000000ull | static_cast<uint64_t>(getpid());
  std::barrier sync(kRanks);
  std::vector<std::map<int, std::vector<PoolFd>>> got(kRanks);
  std::vector<std::string> errors(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      std::vector<int> peers;
      for (int p = 0; p < kRanks; ++p)
        if (p != r) peers.push_back(p);
      auto result = transport::ipc::exchangeFds(
          nonce, r, peers,
          [&](int peer) -> Result<std::vector<PoolFd>> {
            std::vector<PoolFd> out;
            for (uint32_t pool : {7u, 9u}) {
              out.push_back({pool, memfdWith(absl::StrFormat("%d->%d pool %d", r, peer, pool))});
            }
            return out;
          },
          [&] {
            sync.arrive_and_wait();
            return Status::success();
          },
          10000);
      if (result.ok()) {
        got[r] = result.value();
      } else {
        errors[r] = result.status().message;
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_EQ(errors[r], "") << "rank " << r;
    ASSERT_EQ(got[r].size(), size_t{kRanks - 1}) << "rank " << r;
    for (auto& [peer, fds] : got[r]) {
      ASSERT_EQ(fds.size(), 2u);
      EXPECT_EQ(fds[0].pool, 7u);
      EXPECT_EQ(fds[1].pool, 9u);
      for (const PoolFd& f : fds) {
        EXPECT_EQ(contentsOf(f.fd), absl::StrFormat("%d->%d pool %d", peer, r, f.pool));
        close(f.fd);
      }
    }
  }
  EXPECT_EQ(openFds(), before) << "the exchange left descriptors open";
}

// A connection from a rank that is not an expected peer is refused (its descriptors closed), and
// a peer that never sends fails the exchange within its timeout, naming the peer.
TEST(FdExchangeTest, AStrangersConnectionIsRefused) {
  const uint64_t nonce = 0x3bc0000000000000ull | static_cast<uint64_t>(getpid());
  std::barrier sync(3);
  Result<std::map<int, std::vector<PoolFd>>> listener = Status::error(occlInternalError, "rank 1 never ran");
  // Rank 0 listens (so rank 1's send reaches it) but sends only after rank 1 has given up.
  std::thread rank0([&] {
    (void)transport::ipc::exchangeFds(
        nonce, 0, {1},
        [](int) -> Result<std::vector<PoolFd>> {
          std::this_thread::sleep_for(1500ms);
          return std::vector<PoolFd>{};
        },
        [&] {
          sync.arrive_and_wait();
          return Status::success();
        },
        100);
  });
  std::thread rank1([&] {
    listener = transport::ipc::exchangeFds(
        nonce, 1, {0}, [](int) -> Result<std::vector<PoolFd>> { return std::vector<PoolFd>{}; },
        [&] {
          sync.arrive_and_wait();
          return Status::success();
        },
        500);
  });
  sync.arrive_and_wait();
  // A stranger (rank 9) connects first; then nobody else: rank 1 must not take rank 9 for rank 0.
  auto stranger = transport::ipc::exchangeFds(
      nonce, 9, {1}, [](int) -> Result<std::vector<PoolFd>> { return std::vector<PoolFd>{{0, memfdWith("x")}}; },
      [] { return Status::success(); }, 100);
  EXPECT_FALSE(stranger.ok()) << "rank 1 never sends to the stranger";
  rank1.join();
  rank0.join();
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code, occlTimeout);
  EXPECT_NE(listener.status().message.find("rank(s) 0 never sent"), std::string::npos) << listener.status().message;
}

// Two ranks' simt IPC memory in one process: memory allocated by rank 0 on rank 1's GPU is a peer
// GPU's memory where rank 0 maps it and rank 1's own where rank 1 imports it; both see the same
// bytes, the host only through copies, and a freed FIFO reads as zeroes.
TEST(SimtIpcDeviceTest, MemoryLiesOnTheReceiversGpuWhoeverAllocatesIt) {
  auto zero = transport::ipc::makeSimtIpcDevice(0, size_t{1} << 24);
  auto one = transport::ipc::makeSimtIpcDevice(1, size_t{1} << 24);
  ASSERT_TRUE(zero.ok() && one.ok());
  auto exported = zero.value()->exportPools(1);
  ASSERT_TRUE(exported.ok());
  ASSERT_TRUE(one.value()->importPools(0, exported.value()).ok());
  auto made = zero.value()->allocate(10000, /*lieOn=*/1);
  ASSERT_TRUE(made.ok()) << made.status().message;
  void* atZero = made.value().first;
  EXPECT_EQ(made.value().second.bytes, 12288u) << "whole pages";
  EXPECT_TRUE(exec::simt::isPeerMemory(atZero));
  EXPECT_FALSE(exec::simt::isDeviceMemory(atZero));
  auto imported = one.value()->importPointer(0, made.value().second, /*lieOn=*/1);
  ASSERT_TRUE(imported.ok()) << imported.status().message;
  void* atOne = imported.value();
  EXPECT_NE(atOne, atZero) << "a mapping of its own";
  EXPECT_TRUE(exec::simt::isDeviceMemory(atOne));
  EXPECT_FALSE(exec::simt::isPeerMemory(atOne));
  const uint64_t word = 0x0123456789abcdefull;
  ASSERT_TRUE(zero.value()->copyIn(static_cast<char*>(atZero) + 4096, &word, sizeof(word)).ok());
  uint64_t seen = 0;
  ASSERT_TRUE(one.value()->copyOut(&seen, static_cast<char*>(atOne) + 4096, sizeof(seen)).ok());
  EXPECT_EQ(seen, word);
  if (exec::simt::deviceMemoryProtected()) {
    EXPECT_DEATH((void)*static_cast<volatile uint64_t*>(atOne), "") << "the host read device memory directly";
  }
  one.value()->closeImport(atOne);
  EXPECT_FALSE(exec::simt::isDeviceMemory(atOne));
  zero.value()->free(atZero);
  EXPECT_FALSE(exec::simt::isPeerMemory(atZero));
  auto again = zero.value()->allocate(4096, /*lieOn=*/0);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again.value().first, atZero) << "the freed range is handed out again";
  EXPECT_TRUE(exec::simt::isDeviceMemory(again.value().first));
  ASSERT_TRUE(zero.value()->copyOut(&seen, static_cast<char*>(again.value().first), sizeof(seen)).ok());
  EXPECT_EQ(seen, 0u);
  zero.value()->free(again.value().first);
}

// A lane's read-modify-write or device-scoped access on a peer GPU's memory aborts, naming it, as
// on host-mapped memory: PCIe gives no native atomics across, and device scope does not order
// with another GPU.
TEST(SimtIpcDeviceTest, AnAtomicOnAPeerGpusMemoryAborts) {
  auto zero = transport::ipc::makeSimtIpcDevice(0, size_t{1} << 20);
  ASSERT_TRUE(zero.ok());
  auto made = zero.value()->allocate(4096, /*lieOn=*/1);
  ASSERT_TRUE(made.ok());
  EXPECT_DEATH(exec::simt::checkAtomicTarget(made.value().first, exec::simt::DeviceOnly::ReadModifyWrite),
               "a peer GPU's memory");
  EXPECT_DEATH(exec::simt::checkAtomicTarget(made.value().first, exec::simt::DeviceOnly::DeviceScope),
               "a peer GPU's memory");
  zero.value()->free(made.value().first);
}

// ---- simt ranks as processes ----

struct Job {
  std::string scenario;
  int ranks;
};

void PrintTo(const Job& j, std::ostream* os) { *os << j.scenario << " on " << j.ranks << " processes"; }

class SimtIpcProcessTest : public ::testing::TestWithParam<Job> {};

TEST_P(SimtIpcProcessTest, RunsAndLeavesNothingBehind) {
  const Job job = GetParam();
  proc::TempDir dir;
  std::vector<pid_t> pids = proc::spawnWithUniqueId("SimtIpcChild.DISABLED_Entry", job.scenario, job.ranks,
                                                    {{"OCCL_BACKEND", "simt"}, {"OCCL_MP_DIR", dir.path()}});
  ASSERT_EQ(pids.size(), static_cast<size_t>(job.ranks));
  const std::vector<int> codes = proc::reap(pids, std::chrono::seconds(240));
  const int victim = job.scenario == "collectives" ? -1 : job.ranks - 1;
  std::string nonce;
  for (int r = 0; r < job.ranks; ++r) {
    if (r == victim) continue;
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "rank " << r << " failed (exit code)";
    EXPECT_TRUE(std::filesystem::exists(dir.path() + "/done." + std::to_string(r))) << "rank " << r << " did not finish";
    std::ifstream in(dir.path() + "/nonce." + std::to_string(r));
    if (nonce.empty()) in >> nonce;
  }
  ASSERT_FALSE(nonce.empty()) << "no rank reported the job's segments";
  const std::vector<std::string> left = jobShmNames(nonce);
  EXPECT_TRUE(left.empty()) << left.size() << " segment(s) of the job outlived it, e.g. " << left.front();
}

INSTANTIATE_TEST_SUITE_P(Jobs, SimtIpcProcessTest,
                         ::testing::Values(Job{"collectives", 2}, Job{"collectives", 4}, Job{"abort", 2},
                                           Job{"abort", 4}, Job{"kill", 2}, Job{"kill", 4}),
                         [](const ::testing::TestParamInfo<Job>& i) {
                           return i.param.scenario + "_" + std::to_string(i.param.ranks);
                         });

// Every collective type, in and out of place, the ring and direct AllReduce: the same cases (and
// collIds) in every process, registered and submitted in an order of each rank's own.
std::vector<Case> jobCases(int nRanks) {
  std::vector<Spec> specs;
  for (int type : caseTypes()) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !hasInPlace(type)) continue;
      Spec s;
      s.type = type;
      s.count = 4099;
      s.inPlace = inPlace;
      s.root = nRanks - 1;
      s.peer = 0;
      specs.push_back(s);
    }
  }
  Spec ring;
  ring.count = 70001;
  ring.algorithm = "ring";
  specs.push_back(ring);
  Spec direct;
  direct.count = 7;
  specs.push_back(direct);
  std::vector<Case> cases;
  for (const Spec& s : specs) cases.push_back(makeCase(s, nRanks));
  return cases;
}

// The nonce of the job's segments: the part after "occl-" of a /dev/shm mapping of this process.
void reportNonce(const std::string& dir, int rank) {
  if (const std::string nonce = mappedJobNonce(); !nonce.empty()) proc::touch(dir + "/nonce." + std::to_string(rank), nonce);
}

void expectEveryPeerIsSimtIpc(occlComm_t comm, int rank, int nRanks) {
  for (int peer = 0; peer < nRanks; ++peer) {
    const char* t = nullptr;
    expectOk(occlCommPeerTransport(comm, peer, &t), comm, "occlCommPeerTransport");
    if (peer != rank) {
      EXPECT_STREQ(t, "simt-ipc") << "peer " << peer;
    }
  }
}

// One AllReduce that needs every rank; the victim (the last rank) aborts or dies instead.
void failThePeers(occlComm_t comm, int rank, int nRanks, bool kill, const std::string& dir) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 1 << 16;
  d.algorithm = "ring";  // every rank depends on every other
  expectOk(occlCollRegister(comm, 0xAB, &d), comm, "register");
  reportNonce(dir, rank);
  std::vector<float> buf(d.count, 1.0f);
  CallbackCounter done;
  if (rank == nRanks - 1) {
    // The others have submitted and wait on this rank's connectors.
    for (int r = 0; r + 1 < nRanks; ++r)
      ASSERT_TRUE(proc::waitForFile(dir + "/submitted." + std::to_string(r), 60s));
    if (kill) raise(SIGKILL);
    expectOk(occlCommAbort(comm), nullptr, "abort");
    return;
  }
  expectOk(occlSubmit(comm, 0xAB, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), comm, "submit");
  proc::touch(dir + "/submitted." + std::to_string(rank));
  ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(30))) << "the AllReduce never failed";
  // The poison the aborted rank left in its connectors, or the bootstrap's word of a dead peer.
  EXPECT_EQ(done.fired()[0].second, occlRemoteError);
  if (kill) {
    EXPECT_EQ(awaitAsyncError(comm, 10s), occlRemoteError);
  }
  expectOk(occlCommAbort(comm), nullptr, "abort");
  EXPECT_EQ(done.fired().size(), 1u) << "a callback fired twice";
}

TEST(SimtIpcChild, DISABLED_Entry) {
  const char* scenario = std::getenv("OCCL_MP_SCENARIO");
  ASSERT_NE(scenario, nullptr) << "run only as a child of SimtIpcProcessTest";
  const std::string s = scenario, dir = std::getenv("OCCL_MP_DIR");
  const int rank = proc::envInt("OCCL_MP_RANK", -1), nRanks = proc::envInt("OCCL_MP_NRANKS", 0);
  auto fdsBefore = openFds();
  if (const char* idFd = std::getenv("OCCL_MP_ID_FD"))  // rank 0 closes the id's pipe in initRank
    fdsBefore.erase(fdsBefore.find(std::filesystem::read_symlink("/proc/self/fd/" + std::string(idFd)).string()));
  occlConfig_t cfg = testConfig();
  ASSERT_EQ(cfg.backend, occlBackendSimt);
  cfg.collTimeoutMs = 60000;
  occlComm_t comm = proc::initRank(rank, nRanks, cfg);
  ASSERT_NE(comm, nullptr);
  expectEveryPeerIsSimtIpc(comm, rank, nRanks);
  if (s == "collectives") {
    std::vector<Case> cases = jobCases(nRanks);
    std::vector<size_t> order(cases.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(rank) * 7919u + 1));
    runRank(comm, rank, cases, order);
    reportNonce(dir, rank);
    for (const Case& c : cases) {
      if (!participates(c.spec, rank)) continue;
      const std::string bad = mismatch(c.spec, rank, c.io[static_cast<size_t>(rank)]);
      EXPECT_TRUE(bad.empty()) << bad;
    }
    expectOk(occlCommFinalize(comm), comm, "finalize");
    expectOk(occlCommDestroy(comm), nullptr, "destroy");
  } else {
    failThePeers(comm, rank, nRanks, s == "kill", dir);
  }
  // Nothing of the IPC connector stays: its arena and the peers' (mappings), the descriptors.
  EXPECT_EQ(mappingsOf("occl-simt-device"), 0u) << "an IPC arena is still mapped";
  EXPECT_EQ(mappingsOf("/dev/shm/occl-"), 0u) << "the job's pool is still mapped";
  EXPECT_EQ(openFds(), fdsBefore) << "descriptors left open (or closed)";
  proc::touch(dir + "/done." + std::to_string(rank));
}

}  // namespace
}  // namespace occl::test
