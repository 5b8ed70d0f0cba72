// The OCCL_* variables of docs/configuration.md: the table there and this test list the same
// variables, each one lands in its config field, and a malformed value fails occlConfigInit (and
// an init call that takes its config from the environment) with occlInvalidArgument and a message
// naming the variable and what it expects. Every test restores the environment it found.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "occl/occl.h"

namespace {

struct Variable {
  const char* name;
  const char* value;  // differs from the default
  std::function<int64_t(const occlConfig_t&)> field;
  int64_t expected;
};

const std::vector<Variable>& documentedVariables() {
  static const std::vector<Variable> vars = {
      {"OCCL_BACKEND", "HOST", [](const occlConfig_t& c) { return int64_t{c.backend}; }, occlBackendHost},
      {"OCCL_DAEMON_BLOCKS", "3", [](const occlConfig_t& c) { return int64_t{c.daemonBlocks}; }, 3},
      {"OCCL_THREADS_PER_BLOCK", "256", [](const occlConfig_t& c) { return int64_t{c.threadsPerBlock}; }, 256},
      {"OCCL_SQ_DEPTH", "64", [](const occlConfig_t& c) { return int64_t{c.sqDepth}; }, 64},
      {"OCCL_CQ_DEPTH", "128", [](const occlConfig_t& c) { return int64_t{c.cqDepth}; }, 128},
      {"OCCL_TASK_QUEUE_DEPTH", "77", [](const occlConfig_t& c) { return int64_t{c.taskQueueDepth}; }, 77},
      {"OCCL_MAX_INFLIGHT_PER_COLL", "32", [](const occlConfig_t& c) { return int64_t{c.maxInflightPerColl}; }, 32},
      {"OCCL_CONN_SLOTS", "8", [](const occlConfig_t& c) { return int64_t{c.connectorSlots}; }, 8},
      {"OCCL_CONN_SLOT_BYTES", "4096", [](const occlConfig_t& c) { return static_cast<int64_t>(c.connectorSlotBytes); },
       4096},
      {"OCCL_ORDER", "priority", [](const occlConfig_t& c) { return int64_t{c.orderPolicy}; }, occlOrderPriority},
      {"OCCL_SPIN_POLICY", "fixed", [](const occlConfig_t& c) { return int64_t{c.spinPolicy}; }, occlSpinPolicyFixed},
      {"OCCL_SPIN_MAX", "4294967295", [](const occlConfig_t& c) { return int64_t{c.spinThresholdMax}; }, 4294967295},
      {"OCCL_SPIN_MIN", "5", [](const occlConfig_t& c) { return int64_t{c.spinThresholdMin}; }, 5},
      {"OCCL_SPIN_STEP", "0", [](const occlConfig_t& c) { return int64_t{c.spinThresholdStep}; }, 0},
      {"OCCL_SPIN_BOOST", "7", [](const occlConfig_t& c) { return int64_t{c.spinThresholdBoost}; }, 7},
      {"OCCL_PRIORITY_POLL_INTERVAL", "9", [](const occlConfig_t& c) { return int64_t{c.priorityPollInterval}; }, 9},
      {"OCCL_IDLE_QUIT_US", "123", [](const occlConfig_t& c) { return int64_t{c.idleQuitUs}; }, 123},
      {"OCCL_TIMEOUT_MS", "9000000000", [](const occlConfig_t& c) { return c.collTimeoutMs; }, 9000000000},
      {"OCCL_INIT_TIMEOUT_MS", "4500", [](const occlConfig_t& c) { return c.initTimeoutMs; }, 4500},
      {"OCCL_FORCE_PREEMPT", "1", [](const occlConfig_t& c) { return int64_t{c.forcePreempt}; }, 1},
      {"OCCL_DISABLE_PREEMPTION", "1", [](const occlConfig_t& c) { return int64_t{c.disablePreemption}; }, 1},
      {"OCCL_SIMT_LANES", "7", [](const occlConfig_t& c) { return int64_t{c.simtLanes}; }, 7},
      {"OCCL_SIMT_SM_SLOTS", "12", [](const occlConfig_t& c) { return int64_t{c.simtSmSlots}; }, 12},
      {"OCCL_SIMT_JITTER", "4294967295", [](const occlConfig_t& c) { return int64_t{c.simtJitterSeed}; }, 4294967295},
      {"OCCL_TRANSPORT", "Net", [](const occlConfig_t& c) { return int64_t{c.transport}; }, occlTransportNet},
      {"OCCL_TIMELINE_DEPTH", "256", [](const occlConfig_t& c) { return int64_t{c.timelineDepth}; }, 256},
  };
  return vars;
}

// Clears every documented variable for the test and puts back what was there before.
class ConfigEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const Variable& v : documentedVariables()) {
      if (const char* old = std::getenv(v.name)) saved_[v.name] = old;
      ::unsetenv(v.name);
    }
  }
  void TearDown() override {
    for (const Variable& v : documentedVariables()) ::unsetenv(v.name);
    for (const auto& [name, value] : saved_) ::setenv(name.c_str(), value.c_str(), 1);
  }

  // occlConfigInit's result with only `name` set to `value`; the error message when it fails.
  static std::optional<occlConfig_t> configWith(const char* name, const char* value, std::string* error) {
    ::setenv(name, value, 1);
    occlConfig_t c;
    occlResult_t r = occlConfigInit(&c);
    ::unsetenv(name);
    if (r == occlSuccess) return c;
    EXPECT_EQ(r, occlInvalidArgument) << name << "=" << value;
    *error = occlGetLastError(nullptr);
    return std::nullopt;
  }

 private:
  std::map<std::string, std::string> saved_;
};

// Variable -> the config field its row names ("OCCL_SQ_DEPTH" -> "sqDepth").
std::map<std::string, std::string> fieldsInTheDocsTable() {
  std::ifstream doc(std::string(OCCL_SOURCE_DIR) + "/docs/configuration.md");
  const std::regex row(R"(^\|\s*([A-Za-z]+)\s*\|\s*`(OCCL_[A-Z_]+)`)");
  std::map<std::string, std::string> fields;
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) fields[m[2]] = m[1];
  }
  return fields;
}

std::set<std::string> variablesInTheDocsTable() {
  std::ifstream doc(std::string(OCCL_SOURCE_DIR) + "/docs/configuration.md");
  EXPECT_TRUE(doc.is_open()) << "docs/configuration.md not found under " << OCCL_SOURCE_DIR;
  const std::regex row(R"(^\|[^|]*\|\s*`(OCCL_[A-Z_]+)`)");
  std::set<std::string> names;
  for (std::string line; std::getline(doc, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) names.insert(m[1]);
  }
  return names;
}

TEST_F(ConfigEnvTest, TheDocsTableAndThisTestListTheSameVariables) {
  std::set<std::string> tested;
  for (const Variable& v : documentedVariables()) tested.insert(v.name);
  EXPECT_EQ(variablesInTheDocsTable(), tested);
}

TEST_F(ConfigEnvTest, EachVariableLandsInItsFieldAndNowhereElse) {
  occlConfig_t defaults;
  ASSERT_EQ(occlConfigInit(&defaults), occlSuccess) << occlGetLastError(nullptr);
  for (const Variable& v : documentedVariables()) {
    std::string error;
    std::optional<occlConfig_t> c = configWith(v.name, v.value, &error);
    ASSERT_TRUE(c.has_value()) << v.name << ": " << error;
    EXPECT_NE(v.field(defaults), v.expected) << v.name << ": pick a value that differs from the default";
    EXPECT_EQ(v.field(*c), v.expected) << v.name << "=" << v.value;
    for (const Variable& other : documentedVariables()) {
      if (&other == &v) continue;
      EXPECT_EQ(other.field(*c), other.field(defaults)) << v.name << " changed " << other.name;
    }
  }
}

// occlConfigSetField reads the same table: each field, named as the docs' table names it, takes
// the text its variable takes, and lands the same value; nothing else changes.
TEST_F(ConfigEnvTest, SetFieldTakesWhatTheVariableTakesIntoTheSameField) {
  occlConfig_t defaults;
  ASSERT_EQ(occlConfigInit(&defaults), occlSuccess) << occlGetLastError(nullptr);
  const std::map<std::string, std::string> fields = fieldsInTheDocsTable();
  for (const Variable& v : documentedVariables()) {
    ASSERT_TRUE(fields.count(v.name)) << v.name << " has no field in the docs' table";
    const std::string& field = fields.at(v.name);
    occlConfig_t c = defaults;
    ASSERT_EQ(occlConfigSetField(&c, field.c_str(), v.value), occlSuccess) << field << ": " << occlGetLastError(nullptr);
    EXPECT_EQ(v.field(c), v.expected) << field << " = " << v.value;
    for (const Variable& other : documentedVariables()) {
      if (&other == &v) continue;
      EXPECT_EQ(other.field(c), other.field(defaults)) << field << " changed " << other.name;
    }
  }
}

TEST_F(ConfigEnvTest, SetFieldNamesAnUnknownFieldOrABadValueAndChangesNothing) {
  occlConfig_t c, before;
  ASSERT_EQ(occlConfigInit(&c), occlSuccess);
  before = c;
  EXPECT_EQ(occlConfigSetField(&c, "sqDepht", "64"), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(nullptr)).find("unknown config field 'sqDepht': expected one of backend, "
                                                        "daemonBlocks"),
            std::string::npos)
      << occlGetLastError(nullptr);
  EXPECT_EQ(occlConfigSetField(&c, "forcePreempt", "2"), occlInvalidArgument);
  EXPECT_STREQ(occlGetLastError(nullptr), "config field forcePreempt=\"2\" must be 0 or 1");
  EXPECT_EQ(occlConfigSetField(&c, "transport", "carrier pigeon"), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(nullptr)).find("must be one of auto|net|shm"), std::string::npos);
  EXPECT_EQ(occlConfigSetField(&c, "sqDepth", nullptr), occlInvalidArgument);
  EXPECT_EQ(occlConfigSetField(&c, nullptr, "1"), occlInvalidArgument);
  EXPECT_EQ(occlConfigSetField(nullptr, "sqDepth", "1"), occlInvalidArgument);
  EXPECT_EQ(std::memcmp(&c, &before, sizeof(c)), 0) << "a refused value changed the config";
  // A choice also takes its enum's value, as a program holding the enum would pass it.
  ASSERT_EQ(occlConfigSetField(&c, "orderPolicy", std::to_string(occlOrderFifo).c_str()), occlSuccess);
  EXPECT_EQ(c.orderPolicy, occlOrderFifo);
}

TEST_F(ConfigEnvTest, AnEmptyVariableCountsAsUnset) {
  occlConfig_t defaults;
  ASSERT_EQ(occlConfigInit(&defaults), occlSuccess);
  for (const Variable& v : documentedVariables()) {
    std::string error;
    std::optional<occlConfig_t> c = configWith(v.name, "", &error);
    ASSERT_TRUE(c.has_value()) << v.name << ": " << error;
    EXPECT_EQ(v.field(*c), v.field(defaults)) << v.name;
  }
}

TEST_F(ConfigEnvTest, AMalformedIntegerNamesTheVariable) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"OCCL_SQ_DEPTH", "abc"},          {"OCCL_SQ_DEPTH", "-1"},        {"OCCL_SQ_DEPTH", "+8"},
      {"OCCL_DAEMON_BLOCKS", " 2"},      {"OCCL_DAEMON_BLOCKS", "2 "},   {"OCCL_SPIN_MAX", "1e3"},
      {"OCCL_CONN_SLOT_BYTES", "64KiB"}, {"OCCL_TIMEOUT_MS", "0x10"},    {"OCCL_IDLE_QUIT_US", "1.5"},
  };
  for (const auto& [name, value] : cases) {
    std::string error;
    ASSERT_FALSE(configWith(name, value, &error).has_value()) << name << "=\"" << value << "\" was accepted";
    EXPECT_EQ(error, std::string("environment variable ") + name + "=\"" + value + "\" is not a non-negative integer");
  }
}

TEST_F(ConfigEnvTest, AnIntegerItsFieldCannotHoldIsRejectedNotTruncated) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"OCCL_DAEMON_BLOCKS", "4294967297"},          // would truncate to 1, a valid value
      {"OCCL_SPIN_BOOST", "4294967296"},             // would truncate to 0
      {"OCCL_TIMEOUT_MS", "9223372036854775808"},    // would turn negative
      {"OCCL_SQ_DEPTH", "99999999999999999999999"},  // past any integer
  };
  const std::map<std::string, std::string> limits = {{"OCCL_DAEMON_BLOCKS", "2147483647"},
                                                     {"OCCL_SPIN_BOOST", "4294967295"},
                                                     {"OCCL_TIMEOUT_MS", "9223372036854775807"},
                                                     {"OCCL_SQ_DEPTH", "2147483647"}};
  for (const auto& [name, value] : cases) {
    std::string error;
    ASSERT_FALSE(configWith(name, value, &error).has_value()) << name << "=\"" << value << "\" was accepted";
    EXPECT_EQ(error, std::string("environment variable ") + name + "=\"" + value + "\" is out of range: at most " +
                         limits.at(name));
  }
}

TEST_F(ConfigEnvTest, AWordOutsideItsChoicesListsThem) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"OCCL_BACKEND", "gpu"}, {"OCCL_ORDER", "lifo"}, {"OCCL_SPIN_POLICY", "sticky"}};
  const std::map<std::string, std::string> choices = {
      {"OCCL_BACKEND", "auto|host|cuda|simt"}, {"OCCL_ORDER", "fifo|priority|agreed"}, {"OCCL_SPIN_POLICY", "stickiness|fixed"}};
  for (const auto& [name, value] : cases) {
    std::string error;
    ASSERT_FALSE(configWith(name, value, &error).has_value()) << name << "=\"" << value << "\" was accepted";
    EXPECT_EQ(error,
              std::string("environment variable ") + name + "=\"" + value + "\" must be one of " + choices.at(name));
  }
}

TEST_F(ConfigEnvTest, TheTestKnobsAreZeroOrOne) {
  for (const char* name : {"OCCL_FORCE_PREEMPT", "OCCL_DISABLE_PREEMPTION"}) {
    for (const char* value : {"2", "yes", "true", "-1"}) {
      std::string error;
      ASSERT_FALSE(configWith(name, value, &error).has_value()) << name << "=\"" << value << "\" was accepted";
      EXPECT_EQ(error, std::string("environment variable ") + name + "=\"" + value + "\" must be 0 or 1");
    }
    std::string error;
    std::optional<occlConfig_t> off = configWith(name, "0", &error);
    ASSERT_TRUE(off.has_value()) << error;
    EXPECT_EQ(off->forcePreempt + off->disablePreemption, 0);
  }
}

// A value that parses but is out of range fails the init call, naming the field and the variable
// it came from; once the program overwrites the field, the variable is no longer blamed.
TEST_F(ConfigEnvTest, AnOutOfRangeValueNamesTheVariableItCameFrom) {
  const std::vector<std::tuple<const char*, const char*, std::string>> cases = {
      {"OCCL_DAEMON_BLOCKS", "65", "config.daemonBlocks = 65 (from environment variable OCCL_DAEMON_BLOCKS=\"65\"): "
                                   "expected 0 (auto) or 1..64"},
      {"OCCL_TIMEOUT_MS", "3153600000001",
       "config.collTimeoutMs = 3153600000001 (from environment variable OCCL_TIMEOUT_MS=\"3153600000001\"): "
       "expected 0..3153600000000 (0 = never; at most 100 years, OCCL_MAX_TIMEOUT_MS)"},
      {"OCCL_INIT_TIMEOUT_MS", "9223372036854775807",
       "config.initTimeoutMs = 9223372036854775807 (from environment variable "
       "OCCL_INIT_TIMEOUT_MS=\"9223372036854775807\"): expected 1..3153600000000 (at most 100 years, "
       "OCCL_MAX_TIMEOUT_MS)"},
  };
  for (const auto& [name, value, message] : cases) {
    ::setenv(name, value, 1);
    occlComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(occlCommInitAll(comms, 2, nullptr, nullptr), occlInvalidArgument) << name;
    EXPECT_EQ(std::string(occlGetLastError(nullptr)), message);
    EXPECT_EQ(comms[0], nullptr);
    ::unsetenv(name);
  }
  ::setenv("OCCL_DAEMON_BLOCKS", "65", 1);
  occlConfig_t c;
  ASSERT_EQ(occlConfigInit(&c), occlSuccess) << occlGetLastError(nullptr);
  c.daemonBlocks = 66;
  occlComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(occlCommInitAll(comms, 2, nullptr, &c), occlInvalidArgument);
  EXPECT_STREQ(occlGetLastError(nullptr), "config.daemonBlocks = 66: expected 0 (auto) or 1..64");
}

TEST_F(ConfigEnvTest, AnInitCallThatReadsTheEnvironmentFailsWithTheSameMessage) {
  ::setenv("OCCL_CONN_SLOTS", "four", 1);
  occlComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(occlCommInitAll(comms, 2, nullptr, nullptr), occlInvalidArgument);
  EXPECT_STREQ(occlGetLastError(nullptr),
               "environment variable OCCL_CONN_SLOTS=\"four\" is not a non-negative integer");
  EXPECT_EQ(comms[0], nullptr);
  EXPECT_EQ(comms[1], nullptr);
}

}  // namespace
