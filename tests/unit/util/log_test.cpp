// Logging (util/log.hpp): OCCL_DEBUG's levels, OCCL_DEBUG_SUBSYS's choice and exclusion,
// OCCL_DEBUG_FILE's %h/%p pattern, and the warning an unknown OCCL_* variable gets, naming the
// closest one occl reads. The settings are read once per process, so each case is a child process
// that makes a communicator of two thread ranks, runs an AllReduce and writes its lines to a file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/process_job.hpp"
#include "support/processes.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

using namespace std::chrono_literals;

TEST(LogChild, DISABLED_Entry) {
  CommGroup comms(2);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 8;
  std::vector<std::vector<float>> bufs(2, std::vector<float>(8, 1.0f));
  CallbackCounter done;
  for (int r = 0; r < 2; ++r) {
    expectOk(occlCollRegister(comms[r], 0x42, &d), comms[r], "occlCollRegister");
    expectOk(occlSubmit(comms[r], 0x42, bufs[r].data(), bufs[r].data(), &CallbackCounter::callback, done.arg()),
             comms[r], "occlSubmit");
  }
  ASSERT_TRUE(done.waitFor(2, 30s));
  EXPECT_EQ(bufs[0][7], 2.0f);
}

// Runs the child with `env` and returns what it logged to <dir>/log.<its pid>.
std::string logOf(proc::Env env) {
  proc::TempDir dir;
  env["OCCL_DEBUG_FILE"] = dir.path() + "/log.%p";
  const pid_t pid = proc::spawn("LogChild.DISABLED_Entry", env);
  const std::vector<int> codes = proc::reap({pid}, std::chrono::seconds(60));
  EXPECT_EQ(codes.at(0), 0) << "the child failed (its output is above)";
  std::ifstream in(dir.path() + "/log." + std::to_string(pid));
  EXPECT_TRUE(in.is_open()) << "no log.<pid> file: %p was not the child's pid";
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

TEST(Log, InfoForInitOnlyWithTheChildsPidInTheFileName) {
  const std::string log = logOf({{"OCCL_DEBUG", "info"}, {"OCCL_DEBUG_SUBSYS", "init"}});
  EXPECT_TRUE(has(log, "occl: info [init] ")) << log;
  EXPECT_TRUE(has(log, "rank 0 of 2 ready: backend host")) << log;
  EXPECT_TRUE(has(log, "rank 1 of 2 ready")) << log;
  EXPECT_FALSE(has(log, "[coll]")) << log;
  EXPECT_FALSE(has(log, "occl: trace")) << log;
}

TEST(Log, TraceForEverythingButInit) {
  const std::string log = logOf({{"OCCL_DEBUG", "TRACE"}, {"OCCL_DEBUG_SUBSYS", "^init"}});
  EXPECT_TRUE(has(log, "occl: trace [coll] ")) << log;
  EXPECT_TRUE(has(log, "registered collId 0x42: allreduce, count 8, datatype float")) << log;
  EXPECT_FALSE(has(log, "[init]")) << log;
}

TEST(Log, AMisspelledVariableIsWarnedAboutWithTheClosestNameUnlessLoggingIsOff) {
  std::string log = logOf({{"OCCL_DEAMON_BLOCKS", "2"}, {"OCCL_MP_SOMETHING", "1"}});
  EXPECT_TRUE(has(log, "occl: warning: environment variable OCCL_DEAMON_BLOCKS is not one occl reads; it is "
                       "ignored (did you mean OCCL_DAEMON_BLOCKS?)"))
      << log;
  EXPECT_FALSE(has(log, "OCCL_MP_SOMETHING")) << "the test harness's variables are known: " << log;
  EXPECT_FALSE(has(log, "occl: info")) << "warnings only by default: " << log;
  log = logOf({{"OCCL_DEAMON_BLOCKS", "2"}, {"OCCL_DEBUG", "NONE"}});
  EXPECT_EQ(log, "");
}

TEST(Log, ABadLevelOrSubsystemIsNamed) {
  const std::string log = logOf({{"OCCL_DEBUG", "LOUD"}, {"OCCL_DEBUG_SUBSYS", "init,gpu"}});
  EXPECT_TRUE(has(log, "OCCL_DEBUG=\"LOUD\" is not one of NONE, WARN, INFO, TRACE")) << log;
  EXPECT_TRUE(has(log, "OCCL_DEBUG_SUBSYS names \"gpu\"")) << log;
}

}  // namespace
}  // namespace occl::test
