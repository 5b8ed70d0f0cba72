#include "host/config.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <strings.h>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace occl::host {
namespace {

// An empty variable counts as unset: `OCCL_X= cmd` is the usual way to drop an exported value
// for one command.
const char* envValue(const char* name) {
  const char* text = std::getenv(name);
  return text == nullptr || *text == '\0' ? nullptr : text;
}

// A non-negative decimal integer that fits `Field`: a value the field cannot hold would otherwise
// be truncated into another, perhaps valid, value.
template <typename Field>
Status readInt(const char* name, Field& field) {
  const char* text = envValue(name);
  if (text == nullptr) return Status::success();
  std::string_view sv(text);
  unsigned long long value = 0;
  auto [end, ec] = std::from_chars(sv.data(), sv.data() + sv.size(), value);
  if (ec == std::errc::invalid_argument || end != sv.data() + sv.size()) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("environment variable %s=\"%s\" is not a non-negative integer", name, text));
  }
  constexpr auto kMax = static_cast<unsigned long long>(std::numeric_limits<Field>::max());
  if (ec == std::errc::result_out_of_range || value > kMax) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("environment variable %s=\"%s\" is out of range: at most %d", name, text,
                                         kMax));
  }
  field = static_cast<Field>(value);
  return Status::success();
}

// The test knobs are switches: "2" or "yes" is more likely a typo than a request.
Status readFlag(const char* name, int& field) {
  const char* text = envValue(name);
  if (text == nullptr) return Status::success();
  if (std::string_view(text) != "0" && std::string_view(text) != "1") {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("environment variable %s=\"%s\" must be 0 or 1", name, text));
  }
  field = text[0] - '0';
  return Status::success();
}

Status readChoice(const char* name, int& field, std::initializer_list<std::pair<const char*, int>> choices) {
  const char* text = envValue(name);
  if (text == nullptr) return Status::success();
  std::string accepted;
  for (const auto& [word, value] : choices) {
    if (strcasecmp(text, word) == 0) {
      field = value;
      return Status::success();
    }
    accepted += accepted.empty() ? word : absl::StrCat("|", word);
  }
  return Status::error(occlInvalidArgument,
                       absl::StrFormat("environment variable %s=\"%s\" must be one of %s", name, text, accepted));
}

void setDefaults(occlConfig_t& c) {
  std::memset(&c, 0, sizeof(c));
  c.structSize = sizeof(occlConfig_t);
  c.backend = occlBackendAuto;
  c.daemonBlocks = 1;
  c.threadsPerBlock = 512;
  c.sqDepth = 1024;
  c.cqDepth = 1024;
  c.taskQueueDepth = 1024;
  c.maxInflightPerColl = 16;
  c.connectorSlots = 4;
  c.connectorSlotBytes = 0;  // auto: resolveConnectorGeometry
  c.orderPolicy = occlOrderFifo;
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

Status applyEnvironment(occlConfig_t& c) {
  Status s = readChoice("OCCL_BACKEND", c.backend, {{"auto", occlBackendAuto}, {"host", occlBackendHost}, {"cuda", occlBackendCuda}, {"simt", occlBackendSimt}});
  if (s.ok()) s = readInt("OCCL_DAEMON_BLOCKS", c.daemonBlocks);
  if (s.ok()) s = readInt("OCCL_THREADS_PER_BLOCK", c.threadsPerBlock);
  if (s.ok()) s = readInt("OCCL_SQ_DEPTH", c.sqDepth);
  if (s.ok()) s = readInt("OCCL_CQ_DEPTH", c.cqDepth);
  if (s.ok()) s = readInt("OCCL_TASK_QUEUE_DEPTH", c.taskQueueDepth);
  if (s.ok()) s = readInt("OCCL_MAX_INFLIGHT_PER_COLL", c.maxInflightPerColl);
  if (s.ok()) s = readInt("OCCL_CONN_SLOTS", c.connectorSlots);
  if (s.ok()) s = readInt("OCCL_CONN_SLOT_BYTES", c.connectorSlotBytes);
  if (s.ok()) s = readChoice("OCCL_ORDER", c.orderPolicy, {{"fifo", occlOrderFifo}, {"priority", occlOrderPriority}});
  if (s.ok()) s = readChoice("OCCL_SPIN_POLICY", c.spinPolicy, {{"stickiness", occlSpinPolicyStickiness}, {"fixed", occlSpinPolicyFixed}});
  if (s.ok()) s = readInt("OCCL_SPIN_MAX", c.spinThresholdMax);
  if (s.ok()) s = readInt("OCCL_SPIN_MIN", c.spinThresholdMin);
  if (s.ok()) s = readInt("OCCL_SPIN_STEP", c.spinThresholdStep);
  if (s.ok()) s = readInt("OCCL_SPIN_BOOST", c.spinThresholdBoost);
  if (s.ok()) s = readInt("OCCL_PRIORITY_POLL_INTERVAL", c.priorityPollInterval);
  if (s.ok()) s = readInt("OCCL_IDLE_QUIT_US", c.idleQuitUs);
  if (s.ok()) s = readInt("OCCL_TIMEOUT_MS", c.collTimeoutMs);
  if (s.ok()) s = readInt("OCCL_INIT_TIMEOUT_MS", c.initTimeoutMs);
  if (s.ok()) s = readFlag("OCCL_FORCE_PREEMPT", c.forcePreempt);
  if (s.ok()) s = readFlag("OCCL_DISABLE_PREEMPTION", c.disablePreemption);
  if (s.ok()) s = readInt("OCCL_SIMT_LANES", c.simtLanes);
  if (s.ok()) s = readInt("OCCL_SIMT_SM_SLOTS", c.simtSmSlots);
  if (s.ok()) s = readInt("OCCL_SIMT_JITTER", c.simtJitterSeed);
  if (s.ok()) s = readChoice("OCCL_TRANSPORT", c.transport, {{"auto", occlTransportAuto}, {"net", occlTransportNet}});
  return s;
}

bool isPowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

Status rangeError(const char* field, int64_t value, const char* expected) {
  return Status::error(occlInvalidArgument, absl::StrFormat("config.%s = %d: expected %s", field, value, expected));
}

}  // namespace

Status initConfig(occlConfig_t& config) {
  setDefaults(config);
  return applyEnvironment(config);
}

void resolveConnectorGeometry(occlConfig_t& c, bool spansHosts) {
  if (c.connectorSlotBytes == 0) c.connectorSlotBytes = spansHosts ? kSlotBytesAcrossHosts : kSlotBytesOneHost;
}

Status validateConfig(const occlConfig_t& c) {
  if (c.structSize != sizeof(occlConfig_t))
    return rangeError("structSize", static_cast<int64_t>(c.structSize), "sizeof(occlConfig_t): call occlConfigInit first");
  if (c.backend < occlBackendAuto || c.backend > occlBackendSimt) return rangeError("backend", c.backend, "an occlBackend_t");
  if (c.daemonBlocks < 1 || c.daemonBlocks > 64) return rangeError("daemonBlocks", c.daemonBlocks, "1..64");
  if (c.threadsPerBlock < 32 || c.threadsPerBlock > 1024 || c.threadsPerBlock % 32 != 0)
    return rangeError("threadsPerBlock", c.threadsPerBlock, "a multiple of 32 in 32..1024");
  if (!isPowerOfTwo(c.sqDepth) || c.sqDepth > (1 << 20)) return rangeError("sqDepth", c.sqDepth, "a power of two up to 2^20");
  if (!isPowerOfTwo(c.cqDepth) || c.cqDepth > (1 << 20)) return rangeError("cqDepth", c.cqDepth, "a power of two up to 2^20");
  if (c.taskQueueDepth < 1 || c.taskQueueDepth > (1 << 20)) return rangeError("taskQueueDepth", c.taskQueueDepth, "1..2^20");
  if (!isPowerOfTwo(c.maxInflightPerColl) || c.maxInflightPerColl > 64)
    return rangeError("maxInflightPerColl", c.maxInflightPerColl, "a power of two up to 64");
  if (c.connectorSlots < 2 || c.connectorSlots > 1024)
    return rangeError("connectorSlots", c.connectorSlots, "2..1024 (fused recv-then-send steps need two slots)");
  if (c.connectorSlotBytes % 64 != 0 || c.connectorSlotBytes > (1ull << 30))
    return rangeError("connectorSlotBytes", static_cast<int64_t>(c.connectorSlotBytes),
                      "0 (auto) or a multiple of 64 up to 1 GiB");
  if (c.orderPolicy != occlOrderFifo && c.orderPolicy != occlOrderPriority) return rangeError("orderPolicy", c.orderPolicy, "an occlOrderPolicy_t");
  if (c.spinPolicy != occlSpinPolicyStickiness && c.spinPolicy != occlSpinPolicyFixed) return rangeError("spinPolicy", c.spinPolicy, "an occlSpinPolicy_t");
  if (c.spinThresholdMax < 1) return rangeError("spinThresholdMax", c.spinThresholdMax, ">= 1");
  if (c.spinThresholdMin < 1 || c.spinThresholdMin > c.spinThresholdMax)
    return rangeError("spinThresholdMin", c.spinThresholdMin, "1..spinThresholdMax");
  if (c.idleQuitUs < 0) return rangeError("idleQuitUs", c.idleQuitUs, ">= 0");
  if (c.collTimeoutMs < 0) return rangeError("collTimeoutMs", c.collTimeoutMs, ">= 0 (0 = never)");
  if (c.initTimeoutMs <= 0) return rangeError("initTimeoutMs", c.initTimeoutMs, "> 0");
  if (c.forcePreempt && c.disablePreemption) return rangeError("forcePreempt", c.forcePreempt, "0 when disablePreemption is set");
  if (c.simtLanes < 1 || c.simtLanes > 64) return rangeError("simtLanes", c.simtLanes, "1..64");
  if (c.simtSmSlots < 0 || c.simtSmSlots > 4096) return rangeError("simtSmSlots", c.simtSmSlots, "0..4096 (0 = no limit)");
  if (c.transport != occlTransportAuto && c.transport != occlTransportNet)
    return rangeError("transport", c.transport, "an occlTransport_t");
  return Status::success();
}

}  // namespace occl::host
