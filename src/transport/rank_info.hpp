// What a rank tells its peers about itself when a communicator is built: where it runs (its host,
// pid namespace, /dev/shm, process) and what runs its daemon (host threads, simt, a CUDA GPU and
// the GPUs it reaches). Plain bytes: every rank gathers every rank's through the bootstrap, and
// the transport table (select.hpp) decides each pair from them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace occl::transport {

// Where a process runs within its host.
struct ProcessPlace {
  uint64_t pidNamespace = 0;  // bootstrap::pidNamespace(): shm peers reach occlMemAlloc memory through /proc/<pid>
  uint64_t shmDevice = 0;     // bootstrap::shmDevice(): shm peers meet in one /dev/shm
  uint64_t process = 0;       // getpid(): unique among the live processes of one pid namespace
};

// What a rank tells its peers about where it runs. Plain bytes: it crosses the bootstrap.
struct PeerInfo {
  static constexpr size_t kHostBytes = 112;
  char host[kHostBytes];  // host identity, NUL-padded (bootstrap::hostIdentity(): OCCL_HOSTID, or name +
                          // boot id + network namespace, so namespaces on one machine differ)
  uint64_t pidNamespace;  // ProcessPlace's fields
  uint64_t shmDevice;
  uint64_t process;
};
static_assert(sizeof(PeerInfo) == 136, "PeerInfo travels as fixed-size bytes");

PeerInfo makePeerInfo(const std::string& host, const ProcessPlace& place);
bool sameHost(const PeerInfo& a, const PeerInfo& b);

// What runs a rank's daemon, known once it has its device (which follows the place: the local
// rank). Plain bytes: it crosses the bootstrap.
enum class DaemonKind : uint8_t { Host, Cuda, Simt };
struct DaemonInfo {
  static constexpr size_t kMaxReach = 14;
  DaemonKind kind = DaemonKind::Host;
  uint8_t canExport = 0;  // CUDA: its GPU's memory pools can be exported as POSIX file descriptors
  uint8_t nReach = 0;
  uint8_t unused[5] = {};
  uint64_t gpu = 0;                // CUDA: its GPU (gpuIdentity of the UUID); else 0
  uint64_t reach[kMaxReach] = {};  // CUDA: the GPUs its GPU reaches by peer access (CUDA P2P)
};
static_assert(sizeof(DaemonInfo) == 128, "DaemonInfo travels as fixed-size bytes");

// A GPU's 16-byte UUID as DaemonInfo names it.
uint64_t gpuIdentity(const unsigned char (&uuid)[16]);

struct RankInfo {
  PeerInfo place;
  DaemonInfo daemon;
};

// Whether two ranks meet in one /dev/shm: one host, one shm device.
bool sharesDevShm(const PeerInfo& self, const PeerInfo& peer);

}  // namespace occl::transport
