// Per-peer transport selection, NCCL's canConnect table in small: each rank describes itself
// (PeerInfo), every rank learns every description through the bootstrap, and for each peer the
// first transport of kTransports whose canConnect() accepts the pair carries its connectors.
// Every rank evaluates the same table on the same descriptions, so both ends of a connector
// choose the same transport. A new transport is a folder under transport/ and one line here.
//
// RoutedFactory then hands each attach to the factory of the peer's transport; the daemon never
// knows which one it got.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/connector.hpp"

namespace occl::transport {

enum class Transport : uint8_t { InProcess, DeviceIpc, Shm, Net };
const char* transportName(Transport t);

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

struct SelectionPolicy {
  bool forceNet = false;  // OCCL_TRANSPORT=net: the network between all processes, also on one host
  bool forceShm = false;  // OCCL_TRANSPORT=shm: shared memory between processes of a host, not device memory
};

// The transport for the pair (self, peer); self == peer is the rank itself (in-process).
Transport selectTransport(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy);

// How the ranks that meet in one /dev/shm (one host, one shm device) lay out their shm
// connectors (connector.hpp): whole pages where any of them is a CUDA rank, so that both ends of
// every connector take the same range; packed otherwise.
ShmRanges shmRangesFor(const std::vector<RankInfo>& ranks, int rank);

// Attaches each connector through the factory of its peer's transport.
class RoutedFactory : public ConnectorFactory {
 public:
  // `byPeer[r]` is rank r's transport; `factories` must hold one for each transport used.
  RoutedFactory(int rank, std::vector<Transport> byPeer, std::map<Transport, std::unique_ptr<ConnectorFactory>> factories);
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override;
  const char* name() const override { return "routed"; }
  // The shm factory's, where every peer is on this host and none is reached through device
  // memory (NET or IPC: the host cannot name the ends in such a FIFO's header).
  YieldBoard* yieldBoard() override;
  // The name of the factory the peer's connectors go to ("shm", "cuda-shm", "cuda-ipc", "net", ...).
  const char* transportTo(int peer) const override;

 private:
  int rank_;
  std::vector<Transport> byPeer_;
  std::map<Transport, std::unique_ptr<ConnectorFactory>> factories_;
};

}  // namespace occl::transport
