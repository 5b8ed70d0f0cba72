#include "bootstrap/launcher_env.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string_view>

#include "absl/strings/str_format.h"
#include "util/fnv1a.hpp"

namespace occl::bootstrap {
namespace {

// Unset and empty are the same: `export RANK=` is how scripts clear a variable.
std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace

bool launcherSetsRanks() { return env("OMPI_COMM_WORLD_SIZE").has_value() || env("WORLD_SIZE").has_value(); }

namespace {

Result<int> parseInt(std::string_view variable, const std::string& value) {
  int out = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), out);
  if (ec != std::errc() || end != value.data() + value.size()) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s='%s' is not an integer", variable, value));
  }
  return out;
}

Result<int> parsePort(std::string_view variable, const std::string& value) {
  auto port = parseInt(variable, value);
  if (port.ok() && (*port < 1 || *port > 65535)) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s='%s': port %d is outside 1..65535", variable, value, *port));
  }
  return port;
}

uint64_t fnv1a(std::string_view s) { return Fnv1a().add(s).value(); }

// Rank and size from one launcher's pair of variables; nullopt when neither is set.
Result<std::optional<LauncherEnv>> rankAndSize(const char* rankVar, const char* sizeVar, const char* source) {
  auto rankStr = env(rankVar);
  auto sizeStr = env(sizeVar);
  if (!rankStr && !sizeStr) return std::optional<LauncherEnv>();
  if (!rankStr || !sizeStr) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s is set but %s is not (%s sets both)", rankStr ? rankVar : sizeVar,
                                         rankStr ? sizeVar : rankVar, source));
  }
  auto rank = parseInt(rankVar, *rankStr);
  if (!rank.ok()) return rank.status();
  auto size = parseInt(sizeVar, *sizeStr);
  if (!size.ok()) return size.status();
  if (*size < 1) {
    return Status::error(occlInvalidArgument, absl::StrFormat("%s=%d must be at least 1", sizeVar, *size));
  }
  if (*rank < 0 || *rank >= *size) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s=%d is not in [0, %s=%d)", rankVar, *rank, sizeVar, *size));
  }
  LauncherEnv e;
  e.rank = *rank;
  e.size = *size;
  e.source = source;
  return std::optional<LauncherEnv>(e);
}

// Fills addr/port from OCCL_COMM_ID or MASTER_ADDR/MASTER_PORT; false when neither is set.
Result<bool> explicitAddress(LauncherEnv& e) {
  if (auto id = env("OCCL_COMM_ID")) {
    auto hp = parseHostPort("OCCL_COMM_ID", *id);
    if (!hp.ok()) return hp.status();
    e.addr = hp->first;
    e.port = hp->second;
    e.addrSource = "OCCL_COMM_ID";
    return true;
  }
  auto addr = env("MASTER_ADDR");
  auto port = env("MASTER_PORT");
  if (!addr && !port) return false;
  if (!addr || !port) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s is set but %s is not: set both to rank 0's host and a free port",
                                         addr ? "MASTER_ADDR" : "MASTER_PORT", addr ? "MASTER_PORT" : "MASTER_ADDR"));
  }
  auto p = parsePort("MASTER_PORT", *port);
  if (!p.ok()) return p.status();
  e.addr = *addr;
  if (e.addr.size() >= 2 && e.addr.front() == '[' && e.addr.back() == ']') e.addr = e.addr.substr(1, e.addr.size() - 2);
  e.port = *p;
  e.addrSource = "MASTER_ADDR/MASTER_PORT";
  return true;
}

uint64_t jobSeed() {
  for (const char* var : {"OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"}) {
    if (auto v = env(var)) return fnv1a(*v);
  }
  return 0;
}

}  // namespace

Result<std::pair<std::string, int>> parseHostPort(const std::string& variable, const std::string& value) {
  auto bad = [&](const std::string& why) {
    return Status::error(occlInvalidArgument, absl::StrFormat("%s='%s' %s", variable, value, why));
  };
  std::string host, portStr;
  if (!value.empty() && value[0] == '[') {
    size_t close = value.find(']');
    if (close == std::string::npos) return bad("has '[' without ']'; expected [v6addr]:port");
    if (close + 1 >= value.size() || value[close + 1] != ':') return bad("lacks ':port' after ']'");
    host = value.substr(1, close - 1);
    portStr = value.substr(close + 2);
  } else {
    size_t colon = value.rfind(':');
    if (colon == std::string::npos) return bad("is not host:port");
    host = value.substr(0, colon);
    portStr = value.substr(colon + 1);
    if (host.find(':') != std::string::npos) return bad("looks like an IPv6 address: write it as [addr]:port");
  }
  if (host.empty()) return bad("has an empty host; expected host:port");
  auto port = parsePort("port", portStr);
  if (!port.ok()) return bad(absl::StrFormat("has port '%s'; expected an integer in 1..65535", portStr));
  return std::make_pair(host, *port);
}

Result<LauncherEnv> detectLauncherEnv() {
  auto found = rankAndSize("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "mpirun");
  if (found.ok() && !found->has_value()) found = rankAndSize("RANK", "WORLD_SIZE", "torchrun");
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return Status::error(occlInvalidArgument,
                         "no launcher environment: set OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE (mpirun) "
                         "or RANK and WORLD_SIZE (torchrun), and OCCL_COMM_ID=host:port or MASTER_ADDR and "
                         "MASTER_PORT (rank 0's host and a free port)");
  }
  LauncherEnv e = **found;
  e.jobSeed = jobSeed();
  auto hasAddress = explicitAddress(e);
  if (!hasAddress.ok()) return hasAddress.status();
  if (*hasAddress) return e;
  // Single-node mpirun runs need no configuration: every rank derives the same port.
  if (auto job = env("OMPI_MCA_ess_base_jobid"); job && e.source == "mpirun") {
    e.addr = "127.0.0.1";
    e.port = 20000 + static_cast<int>(fnv1a(*job) % 10000);
    e.addrSource = "OMPI_MCA_ess_base_jobid";
    return e;
  }
  return Status::error(occlInvalidArgument,
                       absl::StrFormat("%s gave rank %d of %d but no rendezvous address: set OCCL_COMM_ID=host:port "
                                       "or MASTER_ADDR and MASTER_PORT (rank 0's host and a free port)",
                                       e.source, e.rank, e.size));
}

int localRankFromEnv() {
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"}) {
    auto v = env(var);
    if (!v) continue;
    auto r = parseInt(var, *v);
    return r.ok() && *r >= 0 ? *r : -1;
  }
  return -1;
}

uint64_t pidNamespace() {
  struct stat ns {};
  return stat("/proc/self/ns/pid", &ns) == 0 ? static_cast<uint64_t>(ns.st_ino) : 0;
}

uint64_t shmDevice() {
  struct stat shm {};
  return stat("/dev/shm", &shm) == 0 ? static_cast<uint64_t>(shm.st_dev) : 0;
}

std::string hostIdentity() {
  if (std::optional<std::string> id = env("OCCL_HOSTID")) return *id;
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  struct stat ns {};
  const unsigned long long netns = stat("/proc/self/ns/net", &ns) == 0 ? static_cast<unsigned long long>(ns.st_ino) : 0;
  return absl::StrFormat("%s/%s/netns:%d", name, bootId.substr(0, 8), netns);
}

}  // namespace occl::bootstrap
