// Ranks on two hosts, on one machine: two network namespaces joined by a veth pair, with
// addresses that exist only inside them (10.99.0.1 and 10.99.0.2), and two rank processes in
// each, started with `ip netns exec` and torchrun's variables. Between the namespaces ranks talk
// over the NET connector (UCX, forced to TCP: /dev/shm is shared between the namespaces, and UCX
// would otherwise take shared memory); inside one, over shared memory. Each scenario checks the
// data or the error every rank gets:
//   collectives  every collective type, reductions exact in any order, in and out of place
//   torture      rounds of several collectives registered and submitted in another order on
//                every rank
//   kill         a rank on the other host is SIGKILLed: every survivor's pending collective
//                fails with an error well inside its timeout, nobody hangs
//   mismatch     one rank registers a collective differently: every rank gets occlInvalidUsage
// and occl-bench and occl-torture themselves run as the 4 ranks, as the README shows.
//
// Namespaces need root (CAP_NET_ADMIN) and iproute2. Where they cannot be made the test says why
// and skips, except under CI (CI=true), where it must run and fails instead.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "support/collective_cases.hpp"
#include "support/processes.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr int kHosts = 2;
constexpr int kRanksPerHost = 2;
constexpr int kRanks = kHosts * kRanksPerHost;
constexpr const char* kAddress[kHosts] = {"10.99.0.1", "10.99.0.2"};
constexpr const char* kDevice = "occl0";  // the veth end's name inside either namespace
constexpr int kMasterPort = 29500;
constexpr int kVictim = 3;  // on host 1, while rank 0 (the bootstrap root) is on host 0

// ---- parent side ----

std::string ipTool() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (access(p, X_OK) == 0) return p;
  return "";
}

// Runs `command` (an iproute2 invocation); "" on success, else what it printed.
std::string run(const std::string& command) {
  const std::string full = command + " 2>&1";
  FILE* out = popen(full.c_str(), "r");
  if (out == nullptr) return "popen failed: " + command;
  std::string text;
  char buf[256];
  while (std::fgets(buf, sizeof(buf), out) != nullptr) text += buf;
  const int status = pclose(out);
  if (status == 0) return "";
  return command + ": " + (text.empty() ? "exit status " + std::to_string(status) : text);
}

// Two namespaces "hosts" joined by a veth pair; both are deleted (with the pair) at destruction.
class TwoHosts {
 public:
  // nullptr and `why` when namespaces cannot be made here.
  static std::unique_ptr<TwoHosts> create(std::string& why) {
    const std::string ip = ipTool();
    if (ip.empty()) {
      why = "iproute2's ip is not installed";
      return nullptr;
    }
    if (geteuid() != 0) {
      why = "network namespaces need root";
      return nullptr;
    }
    static int serial = 0;
    const std::string tag = absl::StrFormat("%d-%d", getpid(), serial++);
    std::unique_ptr<TwoHosts> h(new TwoHosts(ip, {"occl-" + tag + "-a", "occl-" + tag + "-b"}));
    // Interface names are global until moved: unique per process, renamed once inside.
    const std::string ends[kHosts] = {absl::StrFormat("oc%da", getpid() % 1000000),
                                      absl::StrFormat("oc%db", getpid() % 1000000)};
    std::vector<std::string> steps = {ip + " netns add " + h->names_[0], ip + " netns add " + h->names_[1],
                                      ip + " link add " + ends[0] + " type veth peer name " + ends[1]};
    for (int k = 0; k < kHosts; ++k) {
      const std::string in = ip + " -n " + h->names_[k];
      steps.push_back(ip + " link set " + ends[k] + " netns " + h->names_[k]);
      steps.push_back(in + " link set " + ends[k] + " name " + kDevice);
      steps.push_back(in + " addr add " + kAddress[k] + "/24 dev " + kDevice);
      steps.push_back(in + " link set " + kDevice + " up");
      steps.push_back(in + " link set lo up");
    }
    for (const std::string& step : steps) {
      why = run(step);
      if (!why.empty()) return nullptr;  // the destructor removes what was made
    }
    return h;
  }
  ~TwoHosts() {
    for (const std::string& n : names_) run(ip_ + " netns delete " + n);
  }
  std::vector<std::string> execIn(int host) const { return {ip_, "netns", "exec", names_[host]}; }

 private:
  TwoHosts(std::string ip, std::vector<std::string> names) : ip_(std::move(ip)), names_(std::move(names)) {}
  std::string ip_;
  std::vector<std::string> names_;
};

bool underCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string(ci) == "true";
}

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    hosts_ = TwoHosts::create(why);
    if (hosts_) return;
    if (underCi()) FAIL() << "CI must run the multi-host test, but namespaces cannot be made: " << why;
    GTEST_SKIP() << "no network namespaces here: " << why;
  }

  // torchrun's variables for rank r, and UCX forced to TCP on the veth.
  static proc::Env rankEnv(int r) {
    return proc::Env{{"RANK", std::to_string(r)},
                     {"WORLD_SIZE", std::to_string(kRanks)},
                     {"LOCAL_RANK", std::to_string(r % kRanksPerHost)},
                     {"MASTER_ADDR", kAddress[0]},
                     {"MASTER_PORT", std::to_string(kMasterPort)},
                     {"OCCL_SOCKET_IFNAME", kDevice},
                     {"UCX_TLS", "tcp"},
                     {"UCX_NET_DEVICES", kDevice},
                     {"UCX_WARN_UNUSED_ENV_VARS", "n"}};
  }

  // Starts the 4 ranks of `scenario` (ranks 0,1 on host 0; 2,3 on host 1) and returns exit codes.
  std::vector<int> runScenario(const std::string& scenario, std::chrono::seconds timeout) {
    std::vector<pid_t> pids;
    for (int r = 0; r < kRanks; ++r) {
      proc::Env env = rankEnv(r);
      env["OCCL_MH_SCENARIO"] = scenario;
      pids.push_back(proc::spawn("MultiHostChild.DISABLED_Entry", env, hosts_->execIn(r / kRanksPerHost)));
    }
    return proc::reap(pids, timeout);
  }

  // Runs `program args...` as the 4 ranks, as a user would with torchrun's variables; returns
  // rank 0's output (stdout and stderr) and fails the test if any rank exits non-zero.
  std::string runProgram(const std::string& program, const std::vector<std::string>& args, std::chrono::seconds timeout) {
    std::vector<pid_t> pids;
    std::vector<std::string> outputs;
    for (int r = 0; r < kRanks; ++r) {
      std::vector<std::string> argv = hosts_->execIn(r / kRanksPerHost);
      argv.push_back(program);
      argv.insert(argv.end(), args.begin(), args.end());
      outputs.push_back(absl::StrFormat("%s/multihost-%d-%s-rank%d.out", OCCL_TEST_BINARY_DIR, getpid(),
                                        program.substr(program.rfind('/') + 1), r));
      pids.push_back(proc::spawnProgram(argv, rankEnv(r), outputs.back()));
    }
    const std::vector<int> codes = proc::reap(pids, timeout);
    std::vector<std::string> texts;
    for (const std::string& path : outputs) {
      std::string text;
      if (FILE* f = std::fopen(path.c_str(), "r")) {
        char buf[4096];
        for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) text.append(buf, n);
        std::fclose(f);
      }
      std::remove(path.c_str());
      texts.push_back(text);
    }
    for (int r = 0; r < kRanks; ++r) EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << program << " rank " << r << ":\n" << texts[static_cast<size_t>(r)];
    return texts[0];
  }

  std::unique_ptr<TwoHosts> hosts_;
};

void expectAllSucceeded(const std::vector<int>& codes) {
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " failed (exit code)";
}

TEST_F(MultiHostTest, EveryCollectiveWithDataChecks) { expectAllSucceeded(runScenario("collectives", std::chrono::seconds(240))); }

TEST_F(MultiHostTest, RandomOrderTorture) { expectAllSucceeded(runScenario("torture", std::chrono::seconds(240))); }

#if defined(OCCL_BENCH_EXE) && defined(OCCL_TORTURE_EXE)
// The README's "two hosts" commands: occl-bench and occl-torture, one process per rank with
// torchrun's variables, check their data across the hosts and report it on rank 0.
TEST_F(MultiHostTest, OcclBenchAndOcclTortureRunAcrossHosts) {
  const std::string bench =
      runProgram(OCCL_BENCH_EXE, {"allreduce", "--backend", "host", "-b", "8", "-e", "1M", "-f", "32", "-n", "3"},
                 std::chrono::seconds(240));
  int rows = 0;
  std::istringstream lines(bench);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("peers:") != std::string::npos) {
      EXPECT_NE(line.find("peers: 1 shm, 2 net"), std::string::npos) << line;
    }
    std::istringstream fields(line);
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), std::istream_iterator<std::string>()};
    if (f.empty() || f[0][0] == '#') continue;
    ++rows;  // size count type redop root time algbw busbw #wrong (out of place), then in place
    ASSERT_EQ(f.size(), 13u) << line;
    EXPECT_EQ(f[8], "0") << "out-of-place errors: " << line;
    EXPECT_EQ(f[12], "0") << "in-place errors: " << line;
  }
  EXPECT_EQ(rows, 4) << bench;  // 8 B, 256 B, 8 KiB, 256 KiB
  EXPECT_NE(bench.find("#  Rank  3"), std::string::npos) << bench;

  const std::string torture = runProgram(OCCL_TORTURE_EXE, {"--iters", "3"}, std::chrono::seconds(240));
  EXPECT_NE(torture.find("4 ranks"), std::string::npos) << torture;
  EXPECT_NE(torture.find("#wrong 0"), std::string::npos) << torture;
}
#endif

TEST_F(MultiHostTest, KilledRankOnTheOtherHostFailsEverySurvivor) {
  std::vector<int> codes = runScenario("kill", std::chrono::seconds(120));
  for (int r = 0; r < kRanks; ++r) {
    if (r == kVictim) continue;
    EXPECT_EQ(codes[static_cast<size_t>(r)], 0) << "survivor rank " << r << " failed (exit code)";
  }
}

TEST_F(MultiHostTest, DifferentRegistrationIsAnErrorOnEveryRank) {
  expectAllSucceeded(runScenario("mismatch", std::chrono::seconds(120)));
}

// ---- child side ----

int envInt(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : -1;
}

// The specs of one batch: every collective type, a reduction that is exact in any order.
std::vector<Spec> everyCollective(size_t count, bool inPlace) {
  std::vector<Spec> specs;
  for (int type : {occlCollAllReduce, occlCollAllGather, occlCollReduceScatter, occlCollReduce, occlCollBroadcast,
                   occlCollAllToAll}) {
    Spec s;
    s.type = type;
    s.dtype = type == occlCollAllGather ? occlInt32 : occlFloat32;
    s.op = type == occlCollReduce ? occlMax : occlSum;
    s.count = count;
    s.inPlace = inPlace && hasInPlace(type);
    s.root = type == occlCollBroadcast ? 3 : 1;  // roots on either host
    specs.push_back(s);
  }
  Spec pair;  // across the hosts: rank 1 sends to rank 2
  pair.type = occlCollSend;
  pair.count = count;
  pair.root = 1;
  pair.peer = 2;
  specs.push_back(pair);
  return specs;
}

// Runs `cases` on this rank in `order` (registration and submission) and checks its buffers.
void runAndCheck(occlComm_t comm, int rank, std::vector<Case>& cases, const std::vector<size_t>& order) {
  runRank(comm, rank, cases, order);
  for (const Case& c : cases) {
    if (!participates(c.spec, rank)) continue;
    const std::string bad = mismatch(c.spec, rank, c.io[static_cast<size_t>(rank)]);
    ASSERT_TRUE(bad.empty()) << bad;
  }
}

// collIds must agree across processes: a batch numbers its cases from `base`.
std::vector<Case> batch(const std::vector<Spec>& specs, uint64_t base) {
  std::vector<Case> cases;
  for (size_t k = 0; k < specs.size(); ++k) cases.push_back(Case{specs[k], base + k, prepare(specs[k], kRanks)});
  return cases;
}

// Each peer got the transport the table promises: shared memory within a host, NET across.
void expectTransports(occlComm_t comm, int rank) {
  for (int peer = 0; peer < kRanks; ++peer) {
    const char* t = nullptr;
    expectOk(occlCommPeerTransport(comm, peer, &t), comm, "occlCommPeerTransport");
    const bool sameHost = peer / kRanksPerHost == rank / kRanksPerHost;
    EXPECT_STREQ(t, sameHost ? "shm" : "net") << "rank " << rank << " to rank " << peer;
  }
  // The default slot size is the one for a communicator that spans hosts, on every rank.
  occlConfig_t config{};
  expectOk(occlCommGetConfig(comm, &config), comm, "occlCommGetConfig");
  EXPECT_EQ(config.connectorSlotBytes, size_t{1} << 20) << "rank " << rank;
  const char* t = nullptr;
  EXPECT_EQ(occlCommPeerTransport(comm, kRanks, &t), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(comm)).find("peer 4 is not a rank of this 4-rank communicator"),
            std::string::npos)
      << occlGetLastError(comm);
}

void collectivesScenario(occlComm_t comm, int rank) {
  expectTransports(comm, rank);
  uint64_t base = 0x5000;
  for (size_t count : {size_t{1}, size_t{4099}, size_t{300000}}) {
    for (bool inPlace : {false, true}) {
      std::vector<Case> cases = batch(everyCollective(count, inPlace), base);
      base += cases.size();
      std::vector<size_t> order(cases.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = k;
      ASSERT_NO_FATAL_FAILURE(runAndCheck(comm, rank, cases, order));
    }
  }
}

// Every round, each rank registers and submits the batch in its own random order.
void tortureScenario(occlComm_t comm, int rank) {
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<Spec> specs = everyCollective(static_cast<size_t>(5000 + 1000 * round), round % 2 == 1);
    std::vector<Spec> more = everyCollective(777, round % 2 == 0);
    specs.insert(specs.end(), more.begin(), more.end());
    std::vector<Case> cases = batch(specs, 0x7000 + static_cast<uint64_t>(round) * 100);
    std::vector<size_t> order(cases.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::mt19937 rng(static_cast<uint32_t>(1000 * round + 17 * rank + 5));
    std::shuffle(order.begin(), order.end(), rng);
    ASSERT_NO_FATAL_FAILURE(runAndCheck(comm, rank, cases, order)) << "round " << round;
  }
}

// One AllReduce succeeds; then the victim dies by SIGKILL while the survivors wait on the next.
void killScenario(occlComm_t comm, int rank) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 1 << 16;
  expectOk(occlCollRegister(comm, 0xF1, &d), comm, "register");
  std::vector<float> buf(d.count, 1.0f);
  CallbackCounter first;
  expectOk(occlSubmit(comm, 0xF1, buf.data(), buf.data(), &CallbackCounter::callback, first.arg()), comm, "submit");
  ASSERT_TRUE(first.waitFor(1, std::chrono::seconds(60)));
  ASSERT_EQ(first.fired()[0].second, occlSuccess);
  ASSERT_EQ(buf[0], static_cast<float>(kRanks));
  if (rank == kVictim) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the survivors submit meanwhile
    raise(SIGKILL);
  }
  CallbackCounter second;
  const auto start = std::chrono::steady_clock::now();
  const occlResult_t submitted = occlSubmit(comm, 0xF1, buf.data(), buf.data(), &CallbackCounter::callback, second.arg());
  if (submitted == occlSuccess) {
    ASSERT_TRUE(second.waitFor(1, std::chrono::seconds(20))) << "the pending AllReduce never completed";
    EXPECT_NE(second.fired()[0].second, occlSuccess);
  } else {
    EXPECT_EQ(submitted, occlRemoteError) << occlGetLastError(comm);  // the death was already known
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20)) << "timeout is 60 s";
  // The NET connector may fail the collective before the bootstrap has told the communicator
  // that the rank died; both come well inside the timeout.
  EXPECT_EQ(awaitAsyncError(comm, std::chrono::seconds(20)), occlRemoteError);
  expectOk(occlCommFinalize(comm), comm, "finalize");  // the death is known: no wait for the dead peer
  expectOk(occlCommDestroy(comm), nullptr, "destroy");
}

// Rank 2 (host 1) registers 1024 elements where the others register 1000. A rank learns it at
// registration when its peer's signature is already there, else from its collective's callback
// (its daemon sees the peer's signature, or a poisoned connector of a rank that did).
void mismatchScenario(occlComm_t comm, int rank) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = rank == 2 ? 1024 : 1000;
  const occlResult_t registered = occlCollRegister(comm, 0xD1, &d);
  if (registered != occlSuccess) {
    EXPECT_EQ(registered, occlInvalidUsage) << occlGetLastError(comm);
    EXPECT_NE(std::string(occlGetLastError(comm)).find("registered it differently"), std::string::npos)
        << occlGetLastError(comm);
  } else {
    std::vector<float> buf(d.count, 1.0f);
    CallbackCounter done;
    expectOk(occlSubmit(comm, 0xD1, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), comm, "submit");
    ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(30))) << "no callback: the mismatch was not reported";
    EXPECT_EQ(done.fired()[0].second, occlInvalidUsage) << occlGetLastError(comm);
    EXPECT_NE(std::string(occlGetLastError(comm)).find("registered this collId differently"), std::string::npos)
        << occlGetLastError(comm);
    expectOk(occlCollDeregister(comm, 0xD1), comm, "deregister");
  }
  expectOk(occlCommFinalize(comm), comm, "finalize");
  expectOk(occlCommDestroy(comm), nullptr, "destroy");
}

TEST(MultiHostChild, DISABLED_Entry) {
  const char* scenario = std::getenv("OCCL_MH_SCENARIO");
  ASSERT_NE(scenario, nullptr) << "run only as a child of MultiHostTest";
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = 60000;
  occlComm_t comm = nullptr;
  expectOk(occlCommInitFromEnv(&comm, &cfg), nullptr, "occlCommInitFromEnv");
  const int rank = envInt("RANK");
  const std::string s = scenario;
  if (s == "kill") return killScenario(comm, rank);
  if (s == "mismatch") return mismatchScenario(comm, rank);
  if (s == "collectives") {
    ASSERT_NO_FATAL_FAILURE(collectivesScenario(comm, rank));
  } else if (s == "torture") {
    ASSERT_NO_FATAL_FAILURE(tortureScenario(comm, rank));
  } else {
    FAIL() << "unknown scenario " << s;
  }
  expectOk(occlCommFinalize(comm), comm, "finalize");
  expectOk(occlCommDestroy(comm), nullptr, "destroy");
}

}  // namespace
}  // namespace occl::test
