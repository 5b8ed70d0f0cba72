#include "host/config.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <mutex>
#include <strings.h>
#include <span>
#include <string>
#include <string_view>
#include <unistd.h>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/step.hpp"
#include "util/log.hpp"

namespace occl::host {
namespace {

// An empty variable counts as unset: `OCCL_X= cmd` is the usual way to drop an exported value
// for one command.
const char* envValue(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? nullptr : text;
}

// A non-negative decimal integer that fits `Field`: a value the field cannot hold would otherwise
// be truncated into another, perhaps valid, value. `what` says where `text` came from
// ("environment variable OCCL_SQ_DEPTH", "config field sqDepth").
template <typename Field>
Status readInt(const std::string& what, const char* text, Field& field) {
  if (text == nullptr) return Status::success();
  std::string_view sv(text);
  unsigned long long value = 0;
  auto [end, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), value);
  if (ec == std::errc::invalid_argument || end != sv.data() + sv.size()) {
    return Status::error(occlInvalidArgument, absl::StrFormat("%s=\"%s\" is not a non-negative integer", what, text));
  }
  constexpr auto kMax = static_cast<unsigned long long>(std::numeric_limits<Field>::max());
  if (ec == std::errc::result_out_of_range || value > kMax) {
    return Status::error(occlInvalidArgument, absl::StrFormat("%s=\"%s\" is out of range: at most %d", what, text, kMax));
  }
  field = static_cast<Field>(value);
  return Status::success();
}

// The test knobs are switches: "2" or "yes" is more likely a typo than a request.
Status readFlag(const std::string& what, const char* text, int& field) {
  if (text == nullptr) return Status::success();
  if (std::string_view(text) != "0" && std::string_view(text) != "1") {
    return Status::error(occlInvalidArgument, absl::StrFormat("%s=\"%s\" must be 0 or 1", what, text));
  }
  field = text[0] - '0';
  return Status::success();
}

using Choice = std::pair<const char*, int>;

// A word of `choices` (any case), or the value it stands for in decimal (what a program holding
// the enum passes to occlConfigSetField).
Status readChoice(const std::string& what, const char* text, int& field, std::span<const Choice> choices) {
  if (text == nullptr) return Status::success();
  std::string accepted;
  for (const auto& [word, value] : choices) {
    if (strcasecmp(text, word) == 0 || std::string_view(text) == std::to_string(value)) {
      field = value;
      return Status::success();
    }
    accepted += accepted.empty() ? word : absl::StrCat("|", word);
  }
  return Status::error(occlInvalidArgument, absl::StrFormat("%s=\"%s\" must be one of %s", what, text, accepted));
}

void setDefaults(occlConfig_t& c) {
  std::memset(&c, 0, sizeof(c));
  c.structSize = sizeof(occlConfig_t);
  c.backend = occlBackendAuto;
  c.daemonBlocks = 0;  // auto: the backend chooses (Backend::daemonBlocks)
  c.threadsPerBlock = 512;
  c.sqDepth = 1024;
  c.cqDepth = 1024;
  c.taskQueueDepth = 1024;
  c.maxInflightPerColl = 16;
  c.connectorSlots = 4;
  c.connectorSlotBytes = 0;  // auto: resolveConnectorGeometry
  c.orderPolicy = occlOrderAgreed;
  c.spinPolicy = occlSpinPolicyStickiness;
  c.spinThresholdMax = 4096;
  c.spinThresholdMin = 64;
  c.spinThresholdStep = 512;
  c.spinThresholdBoost = 1024;
  c.priorityPollInterval = 4;
  c.idleQuitUs = 2000;
  c.collTimeoutMs = 600000;  // PyTorch's default collective timeout
  c.initTimeoutMs = 120000;
  c.forcePreempt = 0;
  c.disablePreemption = 0;
  c.simtLanes = 4;
  c.simtSmSlots = 0;
  c.simtJitterSeed = 0;
  c.transport = occlTransportAuto;
}

constexpr Choice kBackends[] = {
    {"auto", occlBackendAuto}, {"host", occlBackendHost}, {"cuda", occlBackendCuda}, {"simt", occlBackendSimt}};
constexpr Choice kOrders[] = {{"fifo", occlOrderFifo}, {"priority", occlOrderPriority}, {"agreed", occlOrderAgreed}};
constexpr Choice kSpinPolicies[] = {{"stickiness", occlSpinPolicyStickiness}, {"fixed", occlSpinPolicyFixed}};
constexpr Choice kTransports[] = {{"auto", occlTransportAuto}, {"net", occlTransportNet}, {"shm", occlTransportShm}};

// Whether `value` is one of the table's: the values a config field of that enum may hold.
bool isChoice(int value, std::span<const Choice> choices) {
  return std::any_of(choices.begin(), choices.end(), [value](const Choice& c) { return c.second == value; });
}

// Every OCCL_* variable of the configuration, the field it sets (as validateConfig names it), how
// it is read and the field's value; applied in kVariables' order. docs/configuration.md lists the
// same (config_env_test).
struct Variable {
  const char* name;
  const char* field;
  Status (*read)(const std::string& what, const char* text, occlConfig_t& c);
  int64_t (*value)(const occlConfig_t& c);
};

template <auto Member>
constexpr int64_t valueOf(const occlConfig_t& c) {
  return static_cast<int64_t>(c.*Member);
}
template <auto Member>
constexpr Variable integer(const char* name, const char* field) {
  return {name, field, [](const std::string& w, const char* t, occlConfig_t& c) { return readInt(w, t, c.*Member); },
          valueOf<Member>};
}
template <auto Member>
constexpr Variable flag(const char* name, const char* field) {
  return {name, field, [](const std::string& w, const char* t, occlConfig_t& c) { return readFlag(w, t, c.*Member); },
          valueOf<Member>};
}
template <auto Member, const auto& Choices>
constexpr Variable choice(const char* name, const char* field) {
  return {name, field,
          [](const std::string& w, const char* t, occlConfig_t& c) { return readChoice(w, t, c.*Member, Choices); },
          valueOf<Member>};
}

constexpr Variable kVariables[] = {
    choice<&occlConfig_t::backend, kBackends>("OCCL_BACKEND", "backend"),
    integer<&occlConfig_t::daemonBlocks>("OCCL_DAEMON_BLOCKS", "daemonBlocks"),
    integer<&occlConfig_t::threadsPerBlock>("OCCL_THREADS_PER_BLOCK", "threadsPerBlock"),
    integer<&occlConfig_t::sqDepth>("OCCL_SQ_DEPTH", "sqDepth"),
    integer<&occlConfig_t::cqDepth>("OCCL_CQ_DEPTH", "cqDepth"),
    integer<&occlConfig_t::taskQueueDepth>("OCCL_TASK_QUEUE_DEPTH", "taskQueueDepth"),
    integer<&occlConfig_t::maxInflightPerColl>("OCCL_MAX_INFLIGHT_PER_COLL", "maxInflightPerColl"),
    integer<&occlConfig_t::connectorSlots>("OCCL_CONN_SLOTS", "connectorSlots"),
    integer<&occlConfig_t::connectorSlotBytes>("OCCL_CONN_SLOT_BYTES", "connectorSlotBytes"),
    choice<&occlConfig_t::orderPolicy, kOrders>("OCCL_ORDER", "orderPolicy"),
    choice<&occlConfig_t::spinPolicy, kSpinPolicies>("OCCL_SPIN_POLICY", "spinPolicy"),
    integer<&occlConfig_t::spinThresholdMax>("OCCL_SPIN_MAX", "spinThresholdMax"),
    integer<&occlConfig_t::spinThresholdMin>("OCCL_SPIN_MIN", "spinThresholdMin"),
    integer<&occlConfig_t::spinThresholdStep>("OCCL_SPIN_STEP", "spinThresholdStep"),
    integer<&occlConfig_t::spinThresholdBoost>("OCCL_SPIN_BOOST", "spinThresholdBoost"),
    integer<&occlConfig_t::priorityPollInterval>("OCCL_PRIORITY_POLL_INTERVAL", "priorityPollInterval"),
    integer<&occlConfig_t::idleQuitUs>("OCCL_IDLE_QUIT_US", "idleQuitUs"),
    integer<&occlConfig_t::collTimeoutMs>("OCCL_TIMEOUT_MS", "collTimeoutMs"),
    integer<&occlConfig_t::initTimeoutMs>("OCCL_INIT_TIMEOUT_MS", "initTimeoutMs"),
    flag<&occlConfig_t::forcePreempt>("OCCL_FORCE_PREEMPT", "forcePreempt"),
    flag<&occlConfig_t::disablePreemption>("OCCL_DISABLE_PREEMPTION", "disablePreemption"),
    integer<&occlConfig_t::simtLanes>("OCCL_SIMT_LANES", "simtLanes"),
    integer<&occlConfig_t::simtSmSlots>("OCCL_SIMT_SM_SLOTS", "simtSmSlots"),
    integer<&occlConfig_t::simtJitterSeed>("OCCL_SIMT_JITTER", "simtJitterSeed"),
    choice<&occlConfig_t::transport, kTransports>("OCCL_TRANSPORT", "transport"),
    integer<&occlConfig_t::timelineDepth>("OCCL_TIMELINE_DEPTH", "timelineDepth"),
};

std::string fromEnvironment(const Variable& v) { return absl::StrCat("environment variable ", v.name); }

Status applyEnvironment(occlConfig_t& c) {
  for (const Variable& v : kVariables) {
    if (Status s = v.read(fromEnvironment(v), envValue(v.name), c); !s.ok()) return s;
  }
  return Status::success();
}

// OCCL_* variables the library reads outside kVariables (docs/configuration.md), and those of occl's
// scripts, tools and tests (names and prefixes): an OCCL_* variable that is none of these is
// warned about once, with the closest variable the library reads.
constexpr const char* kOtherVariables[] = {"OCCL_COMM_ID", "OCCL_SOCKET_IFNAME", "OCCL_HOSTID",
                                           "OCCL_DEBUG",   "OCCL_DEBUG_SUBSYS",  "OCCL_DEBUG_FILE"};
constexpr const char* kToolVariables[] = {"OCCL_BENCH_BIN",         "OCCL_TORTURE_ITERS",   "OCCL_SIMT_TORTURE_ITERS",
                                          "OCCL_PACKAGES",          "OCCL_SHARED_DIR",      "OCCL_WRITE_KERNEL_RESOURCES",
                                          "OCCL_KERNEL_RESOURCES_LOG", "OCCL_PYTHON_DIR",   "OCCL_PYTHON_EXECUTABLE",
                                          "OCCL_TORCH_PYTHON_LIBRARY", "OCCL_WARNINGS"};
constexpr const char* kToolPrefixes[] = {"OCCL_MP_", "OCCL_MH_", "OCCL_GPU_", "OCCL_FUZZ_", "OCCL_SOAK_", "OCCL_NET_TEST_"};

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

bool knownVariable(std::string_view name) {
  auto is = [&](const char* known) { return name == known; };
  if (std::any_of(std::begin(kVariables), std::end(kVariables), [&](const Variable& v) { return is(v.name); }) ||
      std::any_of(std::begin(kOtherVariables), std::end(kOtherVariables), is) ||
      std::any_of(std::begin(kToolVariables), std::end(kToolVariables), is))
    return true;
  if (name.ends_with("_BUILD_DIR")) return true;
  return std::any_of(std::begin(kToolPrefixes), std::end(kToolPrefixes),
                     [&](const char* prefix) { return name.starts_with(prefix); });
}

void warnUnknownVariables() {
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::string_view name = text.substr(0, text.find('='));
    if (!name.starts_with("OCCL_") || knownVariable(name)) continue;
    std::string_view closest;
    size_t best = 4;  // suggest only names within 3 edits
    auto consider = [&](std::string_view known) {
      const size_t d = editDistance(name, known);
      if (d < best) best = d, closest = known;
    };
    for (const Variable& v : kVariables) consider(v.name);
    for (const char* other : kOtherVariables) consider(other);
    const std::string hint = closest.empty() ? "" : " (did you mean " + std::string(closest) + "?)";
    logWarning("environment variable " + std::string(name) + " is not one occl reads; it is ignored" + hint +
               " (docs/configuration.md lists them)");
  }
}

// When `field` holds the value its OCCL_* variable gives it, that variable is where the value came
// from: the message says so, since the program never wrote it.
std::string variableOrigin(const occlConfig_t& c, std::string_view field) {
  for (const Variable& v : kVariables) {
    if (field != v.field) continue;
    const char* text = envValue(v.name);
    occlConfig_t fromEnv = c;
    if (text == nullptr || !v.read(fromEnvironment(v), text, fromEnv).ok() || v.value(fromEnv) != v.value(c)) return "";
    return absl::StrFormat(" (from environment variable %s=\"%s\")", v.name, text);
  }
  return "";
}

static_assert(OCCL_MAX_TIMEOUT_MS * 1000000 <= std::numeric_limits<int64_t>::max() / 2,
              "a deadline in nanoseconds from now must fit an int64_t");

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

Status rangeError(const occlConfig_t& c, const char* field, int64_t value, std::string_view expected) {
  return Status::error(occlInvalidArgument, absl::StrFormat("config.%s = %d%s: expected %s", field, value,
                                                            variableOrigin(c, field), expected));
}

}  // namespace

const char* backendName(int backend) {
  for (const Choice& c : kBackends)
    if (c.second == backend) return c.first;
  return "?";
}

Status setConfigField(occlConfig_t& config, std::string_view field, const char* text) {
  if (text == nullptr) return Status::error(occlInvalidArgument, absl::StrFormat("config field %s: value is NULL", field));
  for (const Variable& v : kVariables)
    if (field == v.field) return v.read(absl::StrCat("config field ", v.field), text, config);
  std::string names;
  for (const Variable& v : kVariables) absl::StrAppend(&names, names.empty() ? "" : ", ", v.field);
  return Status::error(occlInvalidArgument,
                       absl::StrFormat("unknown config field '%s': expected one of %s", field, names));
}

Status initConfig(occlConfig_t& config) {
  static std::once_flag warned;
  std::call_once(warned, warnUnknownVariables);
  setDefaults(config);
  return applyEnvironment(config);
}

void resolveConnectorGeometry(occlConfig_t& c, bool spansHosts, bool anyCudaRank) {
  if (c.connectorSlotBytes != 0) return;
  if (anyCudaRank) {
    c.connectorSlotBytes = kSlotBytesGpu;
  } else {
    c.connectorSlotBytes = spansHosts ? kSlotBytesAcrossHosts : kSlotBytesOneHost;
  }
}

Status validateConfig(const occlConfig_t& c) {
  if (c.structSize != sizeof(occlConfig_t))
    return rangeError(c, "structSize", static_cast<int64_t>(c.structSize), "sizeof(occlConfig_t): call occlConfigInit first");
  if (!isChoice(c.backend, kBackends)) return rangeError(c, "backend", c.backend, "an occlBackend_t");
  if (c.daemonBlocks < 0 || c.daemonBlocks > kMaxDaemonBlocks)
    return rangeError(c, "daemonBlocks", c.daemonBlocks, absl::StrCat("0 (auto) or 1..", kMaxDaemonBlocks));
  if (c.threadsPerBlock < 32 || c.threadsPerBlock > 1024 || c.threadsPerBlock % 32 != 0)
    return rangeError(c, "threadsPerBlock", c.threadsPerBlock, "a multiple of 32 in 32..1024");
  if (!isPowerOfTwo(c.sqDepth) || c.sqDepth > (1 << 20)) return rangeError(c, "sqDepth", c.sqDepth, "a power of two up to 2^20");
  if (!isPowerOfTwo(c.cqDepth) || c.cqDepth > (1 << 20)) return rangeError(c, "cqDepth", c.cqDepth, "a power of two up to 2^20");
  if (c.taskQueueDepth < 1 || c.taskQueueDepth > (1 << 20)) return rangeError(c, "taskQueueDepth", c.taskQueueDepth, "1..2^20");
  if (!isPowerOfTwo(c.maxInflightPerColl) || c.maxInflightPerColl > static_cast<int>(kMaxInflightPerColl))
    return rangeError(c, "maxInflightPerColl", c.maxInflightPerColl,
                      absl::StrCat("a power of two up to ", kMaxInflightPerColl));
  if (c.connectorSlots < 2 || c.connectorSlots > kMaxConnectorSlots)
    return rangeError(c, "connectorSlots", c.connectorSlots,
                      absl::StrCat("2..", kMaxConnectorSlots, " (fused recv-then-send steps need two slots)"));
  if (c.connectorSlotBytes % 64 != 0 || c.connectorSlotBytes > (1ull << 30))
    return rangeError(c, "connectorSlotBytes", static_cast<int64_t>(c.connectorSlotBytes),
                      "0 (auto) or a multiple of 64 up to 1 GiB");
  if (!isChoice(c.orderPolicy, kOrders)) return rangeError(c, "orderPolicy", c.orderPolicy, "an occlOrderPolicy_t");
  if (!isChoice(c.spinPolicy, kSpinPolicies)) return rangeError(c, "spinPolicy", c.spinPolicy, "an occlSpinPolicy_t");
  if (c.spinThresholdMax < 1) return rangeError(c, "spinThresholdMax", c.spinThresholdMax, ">= 1");
  if (c.spinThresholdMin < 1 || c.spinThresholdMin > c.spinThresholdMax)
    return rangeError(c, "spinThresholdMin", c.spinThresholdMin, "1..spinThresholdMax");
  if (c.idleQuitUs < 0) return rangeError(c, "idleQuitUs", c.idleQuitUs, ">= 0");
  if (c.collTimeoutMs < 0 || c.collTimeoutMs > OCCL_MAX_TIMEOUT_MS)
    return rangeError(c, "collTimeoutMs", c.collTimeoutMs,
                      absl::StrCat("0..", OCCL_MAX_TIMEOUT_MS, " (0 = never; at most 100 years, OCCL_MAX_TIMEOUT_MS)"));
  if (c.initTimeoutMs <= 0 || c.initTimeoutMs > OCCL_MAX_TIMEOUT_MS)
    return rangeError(c, "initTimeoutMs", c.initTimeoutMs,
                      absl::StrCat("1..", OCCL_MAX_TIMEOUT_MS, " (at most 100 years, OCCL_MAX_TIMEOUT_MS)"));
  if (c.forcePreempt && c.disablePreemption) return rangeError(c, "forcePreempt", c.forcePreempt, "0 when disablePreemption is set");
  if (c.simtLanes < 1 || c.simtLanes > 64) return rangeError(c, "simtLanes", c.simtLanes, "1..64");
  if (c.simtSmSlots < 0 || c.simtSmSlots > 4096) return rangeError(c, "simtSmSlots", c.simtSmSlots, "0..4096 (0 = no limit)");
  if (!isChoice(c.transport, kTransports)) return rangeError(c, "transport", c.transport, "an occlTransport_t");
  if (c.timelineDepth < 0 || c.timelineDepth > kMaxTimelineDepth)
    return rangeError(c, "timelineDepth", c.timelineDepth, absl::StrCat("0..", kMaxTimelineDepth, " (0 = none)"));
  return Status::success();
}

}  // namespace occl::host
