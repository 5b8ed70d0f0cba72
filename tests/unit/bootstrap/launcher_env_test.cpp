// The launcher's environment (bootstrap/launcher_env.hpp): mpirun's and torchrun's variables,
// OCCL_COMM_ID, bad values named by variable, and the rendezvous they lead to.
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
