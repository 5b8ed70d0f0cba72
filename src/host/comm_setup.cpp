// Building a communicator: where each rank runs, its daemon's backend, the transport to each peer
// (transport/select.hpp, whose table also makes the connectors). The ranks meet through a
// bootstrap::Group: the TCP bootstrap for occlCommInitRank, the threads of this process for
// occlCommInitAll (and, for split and shrink, comm_split.cpp), docs/design.md, "Building a
// communicator".
#include "host/comm_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher_env.hpp"
#include "bootstrap/thread_group.hpp"
#include "host/config.hpp"
#include "transport/in_process/setup.hpp"
#include "transport/ipc/ipc_device.hpp"
#include "transport/select.hpp"
#include "util/cpus.hpp"
#include "util/fnv1a.hpp"
#if OCCL_HAVE_CUDA
#include "util/cuda_util.hpp"
#endif

namespace occl::host {
namespace {

// Where a rank's daemon runs: -1 for host threads, else a CUDA device (docs/configuration.md).
//   config.backend = host: host threads; a devlist is then an error.
//   a devlist: CUDA on devlist[index] (auto or cuda).
//   no devlist: CUDA on device localRank % device count when config.backend = cuda, or when it is
//   auto, `autoPrefersGpu` (occlCommInitRank; occlCommInitAll without a devlist means host ranks)
//   and a device is present. Auto without a device falls back to host threads; cuda without one,
//   or a devlist without one, fails with occlUnhandledCudaError "no CUDA device: ...".
Result<int> daemonDevice(const occlConfig_t& c, const int* devlist, int index, int localRank, bool autoPrefersGpu) {
  if (c.backend == occlBackendHost || c.backend == occlBackendSimt) {
    if (devlist == nullptr) return -1;
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("devlist names CUDA devices but config.backend = %s: pass NULL for its ranks",
                                         c.backend == occlBackendHost ? "host" : "simt"));
  }
  const bool wantsGpu = devlist != nullptr || c.backend == occlBackendCuda;
  if (!wantsGpu && !autoPrefersGpu) return -1;
#if OCCL_HAVE_CUDA
  Result<int> count = cudaDeviceCount();
  if (!count.ok()) return wantsGpu ? Result<int>(count.status()) : Result<int>(-1);
  if (devlist == nullptr) return localRank % count.value();
  if (devlist[index] < 0 || devlist[index] >= count.value())
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("devlist[%d] = %d: this process sees %d CUDA device(s)", index, devlist[index],
                                         count.value()));
  return devlist[index];
#else
  if (!wantsGpu) return -1;
  return Status::error(occlInvalidArgument, devlist != nullptr
                                                ? "devlist given but this build has no CUDA backend: pass NULL for host "
                                                  "ranks"
                                                : "config.backend = cuda but this build has no CUDA backend (configure "
                                                  "with -DOCCL_ENABLE_CUDA=ON)");
#endif
}

Result<std::unique_ptr<backend::Backend>> backendFor(const occlConfig_t& c, int device) {
  if (c.backend == occlBackendSimt) return backend::makeSimtBackend(c);
  if (device < 0) return backend::makeHostBackend(c);
#if OCCL_HAVE_CUDA
  return backend::makeCudaBackend(c, device);
#else
  return Status::error(occlInternalError, "a CUDA device was chosen in a build without the CUDA backend");
#endif
}


// Where every rank of a communicator runs, and the transport this rank takes to each peer.
struct Topology {
  std::vector<transport::RankInfo> ranks;   // places first; daemons once gathered (choosePeers)
  std::vector<transport::Transport> byPeer;  // this rank's transport to each rank (choosePeers)
  int localRank = 0;                               // among the ranks of this host
  int localRanks = 0;                              // ranks of this host, this one included
  std::set<transport::Transport> taken;            // what some pair of ranks (not only this one) takes
  bool shmPeersSharePids = true;                   // every peer of this host is in this rank's pid namespace
  int hostCpus = 0;                                // CPUs the ranks of this host may run on together
};

// Where each rank runs (its host, process, /dev/shm): enough to know the local rank, which
// decides the device.
Result<Topology> discoverTopology(bootstrap::Group& boot, int rank, int nranks) {
  using namespace transport;
  Topology t;
  std::vector<PeerInfo> places(static_cast<size_t>(nranks));
  places[static_cast<size_t>(rank)] =
      makePeerInfo(bootstrap::hostIdentity(), {.pidNamespace = bootstrap::pidNamespace(),
                                                     .shmDevice = bootstrap::shmDevice(),
                                                     .process = static_cast<uint64_t>(getpid())});
  if (Status s = boot.allGather(places.data(), sizeof(PeerInfo)); !s.ok()) return s;
  const PeerInfo& self = places[static_cast<size_t>(rank)];
  for (int r = 0; r < nranks; ++r) {
    t.ranks.push_back(RankInfo{places[static_cast<size_t>(r)], {}});
    if (sameHost(self, places[static_cast<size_t>(r)])) {
      t.localRanks += 1;
      if (r < rank) t.localRank += 1;
    }
  }
  // The union of this host's ranks' affinity masks: a launcher that binds each rank to a core of
  // its own (mpirun -np 2 binds to cores by default) leaves every mask one CPU wide, and only the
  // union shows that the ranks still run side by side (comm.cpp, spinInPlaceNs).
  std::vector<cpu_set_t> masks(static_cast<size_t>(nranks));
  masks[static_cast<size_t>(rank)] = threadCpus();
  if (Status s = boot.allGather(masks.data(), sizeof(cpu_set_t)); !s.ok()) return s;
  std::vector<cpu_set_t> here;
  for (int r = 0; r < nranks; ++r)
    if (sameHost(self, places[static_cast<size_t>(r)])) here.push_back(masks[static_cast<size_t>(r)]);
  t.hostCpus = cpusCovered(here);
  return t;
}

// What runs this rank's daemon: host threads, simt, or the CUDA `device`.
Result<transport::DaemonInfo> describeDaemon(const occlConfig_t& c, int device) {
  transport::DaemonInfo info;
  if (c.backend == occlBackendSimt) info.kind = transport::DaemonKind::Simt;
#if OCCL_HAVE_CUDA
  if (device >= 0) return transport::ipc::describeCudaDaemon(device);
#else
  (void)device;  // device ranks exist only in CUDA builds
#endif
  return info;
}

// Every rank's daemon (known once each has its device), then the transport table
// (transport/select.hpp) for every pair.
Status choosePeers(bootstrap::Group& boot, Topology& t, int rank, const occlConfig_t& c,
                   const transport::DaemonInfo& mine) {
  using namespace transport;
  const auto nranks = static_cast<int>(t.ranks.size());
  std::vector<DaemonInfo> daemons(static_cast<size_t>(nranks));
  daemons[static_cast<size_t>(rank)] = mine;
  if (Status s = boot.allGather(daemons.data(), sizeof(DaemonInfo)); !s.ok()) return s;
  for (int r = 0; r < nranks; ++r) t.ranks[static_cast<size_t>(r)].daemon = daemons[static_cast<size_t>(r)];
  const SelectionPolicy policy{.forceNet = c.transport == occlTransportNet, .forceShm = c.transport == occlTransportShm};
  const RankInfo& self = t.ranks[static_cast<size_t>(rank)];
  for (int r = 0; r < nranks; ++r) {
    const RankInfo& peer = t.ranks[static_cast<size_t>(r)];
    t.byPeer.push_back(selectTransport(self, peer, policy));
    if ((t.byPeer.back() == Transport::Shm || t.byPeer.back() == Transport::DeviceIpc) &&
        peer.place.pidNamespace != self.place.pidNamespace)
      t.shmPeersSharePids = false;
  }
  t.taken = takenByAnyPair(t.ranks, policy);
  return Status::success();
}

// Every rank's spare rendezvous: a unique id whose listener waits in that rank's process, where the
// survivors of a shrink meet without the communicator's bootstrap (its root may be the rank that
// died, or hangs). A rank that could not listen sends an empty id: a shrink rooted there fails.
Result<std::vector<bootstrap::UniqueIdData>> exchangeSpareIds(bootstrap::Group& boot) {
  std::vector<bootstrap::UniqueIdData> spares(static_cast<size_t>(boot.size()));
  Result<bootstrap::UniqueIdData> mine = bootstrap::createUniqueId();
  if (mine.ok()) spares[static_cast<size_t>(boot.rank())] = mine.value();
  if (Status s = boot.allGather(spares.data(), sizeof(bootstrap::UniqueIdData)); !s.ok()) {
    if (mine.ok()) bootstrap::discardUniqueId(mine.value());
    return s.withContext("exchanging the ranks' spare rendezvous");
  }
  return spares;
}

}  // namespace

Result<std::unique_ptr<Comm>> buildOverBootstrap(std::unique_ptr<bootstrap::Bootstrap> boot, const occlConfig_t& config,
                                                 std::optional<int> fixedDevice) {
  const int rank = boot->rank(), nranks = boot->size();
  Result<Topology> topology = discoverTopology(*boot, rank, nranks);
  if (!topology.ok()) return topology.status();
  Result<int> device = fixedDevice ? Result<int>(*fixedDevice)
                                   : daemonDevice(config, nullptr, rank, topology.value().localRank,
                                                  /*autoPrefersGpu=*/true);
  if (!device.ok()) return device.status();
  Result<transport::DaemonInfo> daemon = describeDaemon(config, device.value());
  if (!daemon.ok()) return daemon.status();
  if (Status s = choosePeers(*boot, topology.value(), rank, config, daemon.value()); !s.ok()) return s;
  Result<std::unique_ptr<backend::Backend>> backend = backendFor(config, device.value());
  if (!backend.ok()) return backend.status();
  CommOptions options;
  options.rank = rank;
  options.nRanks = nranks;
  options.device = device.value();
  options.requested = config;
  options.config = config;
  options.shmPeersSharePids = topology.value().shmPeersSharePids;
  options.ranksOnThisHost = topology.value().localRanks;
  options.cpusOfThisHostsRanks = topology.value().hostCpus;
  const bool anyCuda = std::any_of(topology.value().ranks.begin(), topology.value().ranks.end(),
                                   [](const transport::RankInfo& r) { return r.daemon.kind == transport::DaemonKind::Cuda; });
  resolveConnectorGeometry(options.config, topology.value().taken.contains(transport::Transport::Net), anyCuda);
  options.backend = std::move(backend.value());
  Result<std::unique_ptr<transport::ConnectorFactory>> connectors =
      transport::makeConnectors(transport::TransportSetup{
          .rank = rank,
          .ranks = topology.value().ranks,
          .byPeer = topology.value().byPeer,
          .taken = topology.value().taken,
          .nonce = boot->nonce(),
          .timeoutMs = config.initTimeoutMs,
          .device = device.value(),
          .allGather = [&boot](void* data, size_t bytes) { return boot->allGather(data, bytes); },
      });
  if (!connectors.ok()) return connectors.status();
  options.connectors = std::move(connectors.value());
  Result<std::vector<bootstrap::UniqueIdData>> spares = exchangeSpareIds(*boot);
  if (!spares.ok()) return spares.status();
  options.spareIds = std::move(spares.value());
  bootstrap::Bootstrap* watched = boot.get();
  options.bootstrap = std::move(boot);
  const bootstrap::UniqueIdData spare = options.spareIds[static_cast<size_t>(rank)];
  Result<std::unique_ptr<Comm>> comm = Comm::create(std::move(options));
  if (!comm.ok()) {
    bootstrap::discardUniqueId(spare);
    return comm.status();
  }
  // The Comm itself, not a handle: occlCommDestroy may reset the handle's pointer (libc++ does,
  // before ~Comm runs) while the monitor thread still reports, and ~Comm joins that thread
  // (Bootstrap::close) before any of the Comm goes away.
  Comm* created = comm.value().get();
  watched->setFailureCallback([created](int failedRank, const std::string& why) {
    created->failFromPeer(absl::StrFormat("rank %d failed: %s", failedRank, why));
  });
  return comm;
}

Result<std::unique_ptr<Comm>> buildThreadRank(std::unique_ptr<bootstrap::Group> group, const occlConfig_t& config,
                                              int device, bool anyCuda,
                                              std::unique_ptr<transport::ConnectorFactory> connectors) {
  Result<std::unique_ptr<backend::Backend>> backend = backendFor(config, device);
  if (!backend.ok()) return backend.status();
  CommOptions options;
  options.rank = group->rank();
  options.nRanks = group->size();
  options.ranksOnThisHost = group->size();
  options.device = device;
  options.requested = config;
  options.config = config;
  resolveConnectorGeometry(options.config, /*spansHosts=*/false, anyCuda);
  options.backend = std::move(backend.value());
  options.connectors = std::move(connectors);
  options.threadGroup = std::move(group);
  return Comm::create(std::move(options));
}

Result<std::unique_ptr<Comm>> initRank(const bootstrap::UniqueIdData& id, int rank, int nranks,
                                       const occlConfig_t& config) {
  Result<std::unique_ptr<bootstrap::Bootstrap>> boot = bootstrap::Bootstrap::connect(id, rank, nranks, config.initTimeoutMs);
  if (!boot.ok()) return boot.status();
  return buildOverBootstrap(std::move(boot.value()), config, std::nullopt);
}

Result<std::vector<std::unique_ptr<Comm>>> initAll(int ndev, const int* devlist, const occlConfig_t& config) {
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int r = 0; r < ndev; ++r) {
    Result<int> device = daemonDevice(config, devlist, r, r, /*autoPrefersGpu=*/false);
    if (!device.ok()) return device.status();
    devices[static_cast<size_t>(r)] = device.value();
  }
  auto connectors = transport::in_process::connectorsFor(devices);
  const bool anyCuda = std::any_of(devices.begin(), devices.end(), [](int d) { return d >= 0; });
  std::vector<std::unique_ptr<bootstrap::Group>> groups = bootstrap::makeThreadGroup(ndev, config.initTimeoutMs);
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < ndev; ++r) {
    Result<std::unique_ptr<Comm>> comm = buildThreadRank(std::move(groups[static_cast<size_t>(r)]), config,
                                                         devices[static_cast<size_t>(r)], anyCuda, connectors());
    if (!comm.ok()) return comm.status().withContext(absl::StrFormat("rank %d", r));
    comms.push_back(std::move(comm.value()));
  }
  return comms;
}

}  // namespace occl::host
