// Building a communicator: where each rank runs, its daemon's backend, the transport to each peer
// (transport/select.hpp) and the connectors. The ranks meet through a bootstrap::Group: the TCP
// bootstrap for occlCommInitRank, the threads of this process for occlCommInitAll, and the
// parent's group for occlCommSplit, whose children open a group of their own (docs/design.md,
// "Building a communicator").
#include "host/comm_setup.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher_env.hpp"
#include "bootstrap/thread_group.hpp"
#include "host/config.hpp"
#include "transport/ipc/fd_exchange.hpp"
#include "transport/ipc/ipc.hpp"
#include "transport/ipc/ipc_device.hpp"
#include "transport/select.hpp"
#include "util/cpus.hpp"
#include "util/fnv1a.hpp"
#if OCCL_HAVE_UCX
#include "transport/net/net_factory.hpp"
#endif
#if OCCL_HAVE_CUDA
#include "transport/cuda_connectors.hpp"
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

// Ranks of one process share connector memory: host memory, or GPU memory for device ranks
// (all ranks of one occlCommInitAll are of one kind). Returns a factory per rank.
std::function<std::unique_ptr<transport::ConnectorFactory>()> inProcessConnectors(const std::vector<int>& devices) {
#if OCCL_HAVE_CUDA
  if (devices.front() >= 0) {
    auto world = transport::makeCudaWorld(devices);
    return [world] { return transport::makeCudaInProcessFactory(world); };
  }
#endif
  auto world = transport::makeInProcessWorld();
  return [world] { return transport::makeInProcessFactory(world); };
}

// Connectors between processes of this host: shm, registered with CUDA for a device rank (which
// takes whole pages: `ranges` is WholePages where this host has one).
std::unique_ptr<transport::ConnectorFactory> shmConnectorsFor(uint64_t nonce, int64_t timeoutMs, int device,
                                                                    transport::ShmRanges ranges) {
#if OCCL_HAVE_CUDA
  if (device >= 0) return transport::makeCudaShmFactory(nonce, timeoutMs, device);
#endif
  return transport::makeShmFactory(nonce, timeoutMs, ranges);
}

// Where every rank of a communicator runs, and the transport this rank takes to each peer.
struct Topology {
  std::vector<transport::RankInfo> ranks;   // places first; daemons once gathered (choosePeers)
  std::vector<transport::Transport> byPeer;  // this rank's transport to each rank (choosePeers)
  int localRank = 0;                               // among the ranks of this host
  int localRanks = 0;                              // ranks of this host, this one included
  bool anyNet = false;                             // some pair of ranks (not only this one) uses NET
  bool anyIpc = false;                             // some pair of ranks uses device memory (IPC)
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
    for (int q = 0; q < nranks; ++q) {
      const Transport between = selectTransport(peer, t.ranks[static_cast<size_t>(q)], policy);
      t.anyNet = t.anyNet || between == Transport::Net;
      t.anyIpc = t.anyIpc || between == Transport::DeviceIpc;
    }
  }
  return Status::success();
}

// A simt rank's IPC arena (sparse: only the pages of its connectors are memory).
constexpr size_t kSimtIpcArenaBytes = size_t{1} << 30;

// The IPC connector of a device rank (transport/ipc/): its device memory, the pools exchanged
// with its IPC peers over Unix sockets. Every rank takes part in the exchange's barrier where any
// pair of ranks uses IPC (anyIpc), also one that has no IPC peer; it then returns nullptr.
Result<std::unique_ptr<transport::ConnectorFactory>> ipcConnectors(bootstrap::Group& boot, const Topology& t,
                                                                          int rank, const occlConfig_t& c, int device) {
  namespace ipc = transport::ipc;
  std::vector<int> peers;
  for (size_t r = 0; r < t.byPeer.size(); ++r)
    if (t.byPeer[r] == transport::Transport::DeviceIpc) peers.push_back(static_cast<int>(r));
  Result<std::shared_ptr<ipc::IpcDevice>> memory = std::shared_ptr<ipc::IpcDevice>();
  if (!peers.empty() && c.backend == occlBackendSimt) memory = ipc::makeSimtIpcDevice(rank, kSimtIpcArenaBytes);
#if OCCL_HAVE_CUDA
  if (!peers.empty() && device >= 0) {
    std::vector<uint64_t> gpus;
    for (const transport::RankInfo& r : t.ranks) gpus.push_back(r.daemon.gpu);
    memory = ipc::makeCudaIpcDevice(rank, device, gpus);
  }
#else
  (void)device;
#endif
  // A rank whose device memory failed still joins the barrier; its peers then fail to reach it.
  std::shared_ptr<ipc::IpcDevice> made = memory.ok() ? memory.value() : nullptr;
  if (!peers.empty() && made == nullptr && memory.ok())
    memory = Status::error(occlInternalError, "an IPC peer, but no backend whose device memory can be shared");
  Result<std::map<int, std::vector<ipc::PoolFd>>> received = ipc::exchangeFds(
      boot.nonce(), rank, made != nullptr ? peers : std::vector<int>{},
      [&](int peer) { return made->exportPools(peer); },
      [&]() -> Status {
        // Whether each rank has its device memory: one that has not fails them all now, not
        // after the exchange's timeout.
        std::vector<int32_t> ready(t.ranks.size());
        ready[static_cast<size_t>(rank)] = memory.ok() ? 1 : 0;
        if (Status s = boot.allGather(ready.data(), sizeof(int32_t)); !s.ok()) return s;
        for (size_t r = 0; r < ready.size(); ++r)
          if (ready[r] == 0 && static_cast<int>(r) != rank)
            return Status::error(occlRemoteError, absl::StrFormat("rank %d could not set up its IPC device memory", r));
        return Status::success();
      },
      c.initTimeoutMs);
  if (!memory.ok()) return memory.status().withContext("the IPC connector's device memory");
  if (!received.ok()) return received.status().withContext("exchanging the IPC connector's pools");
  Status imported = Status::success();
  for (auto& [peer, fds] : received.value()) {
    Status s = made->importPools(peer, fds);  // closes them either way
    if (imported.ok() && !s.ok()) imported = s.withContext(absl::StrFormat("importing rank %d's pools", peer));
  }
  if (!imported.ok()) return imported;
  if (made == nullptr) return std::unique_ptr<transport::ConnectorFactory>();
  return ipc::makeIpcFactory(boot.nonce(), c.initTimeoutMs, rank, made);
}

#if OCCL_HAVE_UCX
// Phase one of the NET connector on every rank, the worker addresses through the bootstrap (sizes
// first: they differ by rank), phase two with the addresses of this rank's NET peers.
Result<std::unique_ptr<transport::ConnectorFactory>> netConnectors(bootstrap::Group& boot, const Topology& t,
                                                                          int rank, int nranks, int device) {
  namespace net = transport::net;
  net::NetOptions options;
  options.rank = rank;
  options.nRanks = nranks;
#if OCCL_HAVE_CUDA
  if (device >= 0) {
    // The daemon kernel reads and writes the FIFOs at their host addresses, and its publishes
    // cannot wake the proxy: it scans at least every kCudaProxySleepUs.
    constexpr int64_t kCudaProxySleepUs = 50;
    Result<transport::HostAllocator> pinned = transport::makeCudaPinnedAllocator(device);
    if (!pinned.ok()) return pinned.status();
    options.allocator = std::move(pinned.value());
    options.maxSleepUs = kCudaProxySleepUs;
  }
#else
  (void)device;  // device ranks exist only in CUDA builds
#endif
  Result<std::unique_ptr<net::NetFactory>> factory = net::makeNetFactory(options);
  if (!factory.ok()) return factory.status();
  const std::vector<uint8_t>& mine = factory.value()->localAddress();
  std::vector<uint64_t> sizes(static_cast<size_t>(nranks));
  sizes[static_cast<size_t>(rank)] = mine.size();
  if (Status s = boot.allGather(sizes.data(), sizeof(uint64_t)); !s.ok()) return s;
  const uint64_t stride = *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> all(stride * static_cast<size_t>(nranks));
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<long>(stride * static_cast<size_t>(rank)));
  if (Status s = boot.allGather(all.data(), stride); !s.ok()) return s;
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    if (r == rank || t.byPeer[static_cast<size_t>(r)] != transport::Transport::Net) continue;
    const auto* at = all.data() + stride * static_cast<size_t>(r);
    addresses[static_cast<size_t>(r)].assign(at, at + sizes[static_cast<size_t>(r)]);
  }
  if (Status s = factory.value()->connect(addresses); !s.ok()) return s;
  return std::unique_ptr<transport::ConnectorFactory>(std::move(factory.value()));
}
#endif

// The connector factory of a rank in its own process: each peer's transport (transport/select.hpp).
Result<std::unique_ptr<transport::ConnectorFactory>> connectorsFor(bootstrap::Group& boot, const Topology& t,
                                                                         int rank, int nranks, const occlConfig_t& c,
                                                                         int device) {
  using transport::Transport;
  std::map<Transport, std::unique_ptr<transport::ConnectorFactory>> factories;
  const transport::ShmRanges ranges = transport::shmRangesFor(t.ranks, rank);
  // A rank's connectors to itself pair up within the process, like shm between two processes.
  factories[Transport::InProcess] = shmConnectorsFor(boot.nonce(), c.initTimeoutMs, device, ranges);
  factories[Transport::Shm] = shmConnectorsFor(boot.nonce(), c.initTimeoutMs, device, ranges);
  if (t.anyIpc) {
    Result<std::unique_ptr<transport::ConnectorFactory>> ipc = ipcConnectors(boot, t, rank, c, device);
    if (!ipc.ok()) return ipc.status();
    if (ipc.value() != nullptr) factories[Transport::DeviceIpc] = std::move(ipc.value());
  }
  if (t.anyNet) {
    const auto peer = std::find(t.byPeer.begin(), t.byPeer.end(), Transport::Net);
    const int other = peer == t.byPeer.end() ? rank : static_cast<int>(peer - t.byPeer.begin());
    const transport::PeerInfo &mine = t.ranks[static_cast<size_t>(rank)].place,
                                    &theirs = t.ranks[static_cast<size_t>(other)].place;
    const std::string where =
        sameHost(mine, theirs) && mine.shmDevice != theirs.shmDevice
            ? absl::StrFormat("ranks %d and %d run on host \"%s\" with a /dev/shm each (devices 0x%x and 0x%x)", rank,
                              other, mine.host, mine.shmDevice, theirs.shmDevice)
            : absl::StrFormat("rank %d runs on host \"%s\" and rank %d on \"%s\"", rank, mine.host, other, theirs.host);
#if OCCL_HAVE_UCX
    Result<std::unique_ptr<transport::ConnectorFactory>> net = netConnectors(boot, t, rank, nranks, device);
    if (!net.ok()) return net.status().withContext(where + ": starting the NET connector");
    factories[Transport::Net] = std::move(net.value());
#else
    return Status::error(occlInvalidUsage, where + ": ranks on several hosts, or without a /dev/shm in common (or "
                                                   "OCCL_TRANSPORT=net), need the NET connector, and this build has no "
                                                   "UCX (install libucx-dev and rebuild)");
#endif
  }
  return std::unique_ptr<transport::ConnectorFactory>(
      std::make_unique<transport::RoutedFactory>(rank, t.byPeer, std::move(factories)));
}
// How a communicator's ranks run: the config's backend and, for a CUDA rank, its device.
struct Placement {
  occlConfig_t config;    // as resolved for this rank (connector geometry included)
  occlConfig_t requested; // as the user asked: what a child inherits
  int device = -1;        // CUDA device, -1 for host threads and simt
};

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

// A communicator of one rank whose ranks meet through `boot` (a TCP bootstrap): its topology, its
// device (`fixedDevice` when it has one already: a child's is its parent's), its peers'
// transports and connectors.
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
  resolveConnectorGeometry(options.config, topology.value().anyNet, anyCuda);
  options.backend = std::move(backend.value());
  Result<std::unique_ptr<transport::ConnectorFactory>> connectors =
      connectorsFor(*boot, topology.value(), rank, nranks, config, device.value());
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

// One rank of a group of threads of this process (occlCommInitAll, or a split of its ranks), with
// its connector factory made for the group.
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

// What a split's child needs beside its colour: its ranks in the parent, ordered by key.
struct SplitRequest {
  int32_t color;
  int32_t key;
  int32_t device;
  int32_t valid;  // 0: this rank's arguments were bad (it reports why; the others name it)
};
static_assert(std::is_trivially_copyable_v<SplitRequest>);

// What the new rank 0 of each child hands its other ranks through the parent.
struct SplitHandoff {
  bootstrap::UniqueIdData id;  // a TCP parent: the child's bootstrap id
  uint64_t kit = 0;            // a thread parent: a ThreadKit* of this process
  int32_t ready = 0;           // 0: the new rank 0 could not make them
  int32_t reserved = 0;
};
static_assert(std::is_trivially_copyable_v<SplitHandoff>);

// A child of thread ranks: each rank's member of the child's group and connector factory, made by
// the child's rank 0 and taken by each rank (its own slot only) before the parent's barrier.
struct ThreadKit {
  std::vector<std::unique_ptr<bootstrap::Group>> groups;
  std::vector<std::unique_ptr<transport::ConnectorFactory>> connectors;
  bool anyCuda = false;
};

// Where a rank of `parent` runs, as a config backend can name it.
int backendOf(const Comm& parent) {
  if (parent.device() >= 0) return occlBackendCuda;
  return parent.requestedConfig().backend == occlBackendSimt ? occlBackendSimt : occlBackendHost;
}

// This rank's split arguments: the config the child gets, or why not.
Result<occlConfig_t> childConfig(const Comm& parent, int color, const occlConfig_t* config) {
  if (color < 0 && color != OCCL_SPLIT_NOCOLOR)
    return Status::error(occlInvalidArgument, absl::StrFormat("color = %d: expected >= 0, or OCCL_SPLIT_NOCOLOR (%d)",
                                                              color, OCCL_SPLIT_NOCOLOR));
  occlConfig_t c = config != nullptr ? *config : parent.requestedConfig();
  if (Status s = validateConfig(c); !s.ok()) return s;
  const int where = backendOf(parent);
  if (c.backend != occlBackendAuto && c.backend != where)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("config.backend = %s, but the parent's ranks run on %s: a child runs where its "
                                         "parent does (pass auto)",
                                         backendName(c.backend), backendName(where)));
  c.backend = where;
  return c;
}

}  // namespace

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
  auto connectors = inProcessConnectors(devices);
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

namespace {

// The split of `group`'s ranks (the parent's, or for a shrink of thread ranks the survivors'):
// `mine` is this rank's config for the child or why its arguments were bad; `overTcp`: the child
// meets through a new TCP bootstrap, else through a thread group of this process; `what` names
// the call in messages.
Result<std::unique_ptr<Comm>> splitOver(bootstrap::Group& group, bool overTcp, const Comm& parent, int color, int key,
                                        const Result<occlConfig_t>& mine, const char* what) {
  const int n = group.size(), rank = group.rank();
  std::vector<SplitRequest> requests(static_cast<size_t>(n));
  requests[static_cast<size_t>(rank)] = SplitRequest{color, key, parent.device(), mine.ok() ? 1 : 0};
  if (Status s = group.allGather(requests.data(), sizeof(SplitRequest)); !s.ok())
    return s.withContext(absl::StrCat(what, ": gathering every rank's color and key"));
  if (!mine.ok()) return mine.status().withContext(what);
  for (int r = 0; r < n; ++r)
    if (requests[static_cast<size_t>(r)].valid == 0)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s: rank %d passed an invalid argument (its error says which)", what, r));

  // The child's ranks in the parent, in their new order.
  std::vector<int> members;
  if (color != OCCL_SPLIT_NOCOLOR) {
    for (int r = 0; r < n; ++r)
      if (requests[static_cast<size_t>(r)].color == color) members.push_back(r);
    std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
      return requests[static_cast<size_t>(a)].key < requests[static_cast<size_t>(b)].key;
    });
  }
  const auto at = std::find(members.begin(), members.end(), rank);
  const int newRank = static_cast<int>(at - members.begin());
  const int newSize = static_cast<int>(members.size());

  // The new rank 0 makes what its child meets through and hands it over.
  std::vector<SplitHandoff> handoffs(static_cast<size_t>(n));
  std::unique_ptr<ThreadKit> kit;
  Status made = Status::success();
  if (color != OCCL_SPLIT_NOCOLOR && newRank == 0) {
    SplitHandoff& h = handoffs[static_cast<size_t>(rank)];
    if (overTcp) {
      Result<bootstrap::UniqueIdData> id = bootstrap::createUniqueId();
      if (id.ok()) h.id = id.value();
      made = id.status();
    } else {
      kit = std::make_unique<ThreadKit>();
      std::vector<int> devices;
      for (int r : members) devices.push_back(requests[static_cast<size_t>(r)].device);
      kit->anyCuda = std::any_of(devices.begin(), devices.end(), [](int d) { return d >= 0; });
      kit->groups = bootstrap::makeThreadGroup(newSize, mine.value().initTimeoutMs);
      auto connectors = inProcessConnectors(devices);
      for (int r = 0; r < newSize; ++r) kit->connectors.push_back(connectors());
      h.kit = reinterpret_cast<uint64_t>(kit.get());
    }
    h.ready = made.ok() ? 1 : 0;
  }
  if (Status s = group.allGather(handoffs.data(), sizeof(SplitHandoff)); !s.ok())
    return s.withContext(absl::StrCat(what, ": handing each child's rendezvous to its ranks"));
  if (!made.ok()) return made.withContext(absl::StrCat(what, ": making the child's rendezvous"));
  const SplitHandoff* handoff = color != OCCL_SPLIT_NOCOLOR ? &handoffs[static_cast<size_t>(members.front())] : nullptr;
  std::unique_ptr<bootstrap::Group> childGroup;
  std::unique_ptr<transport::ConnectorFactory> childConnectors;
  bool anyCuda = false;
  if (handoff != nullptr && handoff->ready != 0 && !overTcp) {
    auto* theirs = reinterpret_cast<ThreadKit*>(handoff->kit);
    childGroup = std::move(theirs->groups[static_cast<size_t>(newRank)]);
    childConnectors = std::move(theirs->connectors[static_cast<size_t>(newRank)]);
    anyCuda = theirs->anyCuda;
  }
  // Every rank has taken its part of the kits: their makers may let them go.
  if (Status s = group.barrier(); !s.ok()) return s.withContext(absl::StrCat(what, ": waiting for every rank's handoff"));
  kit.reset();
  if (color == OCCL_SPLIT_NOCOLOR) return std::unique_ptr<Comm>();
  if (handoff->ready == 0)
    return Status::error(occlRemoteError, absl::StrFormat("%s: rank %d, the new rank 0 of color %d, could not make "
                                                          "the child's rendezvous",
                                                          what, members.front(), color));
  Result<std::unique_ptr<Comm>> child = [&]() -> Result<std::unique_ptr<Comm>> {
    if (!overTcp) return buildThreadRank(std::move(childGroup), mine.value(), parent.device(), anyCuda,
                                         std::move(childConnectors));
    Result<std::unique_ptr<bootstrap::Bootstrap>> boot =
        bootstrap::Bootstrap::connect(handoff->id, newRank, newSize, mine.value().initTimeoutMs);
    if (!boot.ok()) return boot.status();
    return buildOverBootstrap(std::move(boot.value()), mine.value(), parent.device());
  }();
  if (!child.ok())
    return child.status().withContext(absl::StrFormat("%s: color %d, new rank %d of %d", what, color, newRank, newSize));
  return child;
}

}  // namespace

Result<std::unique_ptr<Comm>> split(Comm& parent, int color, int key, const occlConfig_t* config) {
  return splitOver(parent.setupGroup(), parent.bootstrapped(), parent, color, key, childConfig(parent, color, config),
                   "occlCommSplit");
}

namespace {

// A shrink of ranks that are processes: the survivors meet at the lowest one's spare rendezvous
// and check that they all excluded the same ranks.
Result<std::unique_ptr<Comm>> shrinkOverTcp(const Comm& parent, const std::vector<int>& survivors,
                                            const std::vector<bool>& excluded, const occlConfig_t& cfg) {
  const int newRank =
      static_cast<int>(std::find(survivors.begin(), survivors.end(), parent.rank()) - survivors.begin());
  const int newSize = static_cast<int>(survivors.size());
  const bootstrap::UniqueIdData& id = parent.spareIds()[static_cast<size_t>(survivors.front())];
  if (id.magicVersion == 0)
    return Status::error(occlRemoteError, absl::StrFormat("occlCommShrink: rank %d, the shrunk communicator's new rank "
                                                          "0, could not listen for it when this communicator was made",
                                                          survivors.front()));
  const std::string who = absl::StrFormat("occlCommShrink (new rank %d of %d, meeting at rank %d)", newRank, newSize,
                                          survivors.front());
  Result<std::unique_ptr<bootstrap::Bootstrap>> boot = bootstrap::Bootstrap::connect(id, newRank, newSize, cfg.initTimeoutMs);
  if (!boot.ok()) return boot.status().withContext(who);
  // Every survivor must have excluded the same ranks: a rank one survivor kept and another
  // excluded would make two communicators of different members.
  std::vector<uint64_t> agreed(static_cast<size_t>(newSize));
  Fnv1a hash;
  for (bool e : excluded) hash.add(e ? uint8_t{1} : uint8_t{0});
  agreed[static_cast<size_t>(newRank)] = hash.value();
  if (Status s = boot.value()->allGather(agreed.data(), sizeof(uint64_t)); !s.ok()) return s.withContext(who);
  for (int r = 0; r < newSize; ++r)
    if (agreed[static_cast<size_t>(r)] != agreed[static_cast<size_t>(newRank)])
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("%s: rank %d excluded other ranks than this one (every survivor must pass "
                                           "the same excludeRanksList)",
                                           who, survivors[static_cast<size_t>(r)]));
  Result<std::unique_ptr<Comm>> child = buildOverBootstrap(std::move(boot.value()), cfg, parent.device());
  if (!child.ok()) return child.status().withContext(who);
  return child;
}

// A shrink of the threads of one process: the survivors meet as a subgroup of the parent's thread
// group (ranks that passed another list meet another one, which times out naming who never came),
// then split it as occlCommSplit does, all with one color, in their order.
Result<std::unique_ptr<Comm>> shrinkThreads(const Comm& parent, const std::vector<int>& survivors,
                                            const occlConfig_t& cfg) {
  Result<std::unique_ptr<bootstrap::Group>> group =
      bootstrap::threadSubgroup(parent.setupGroup(), survivors, cfg.initTimeoutMs);
  if (!group.ok()) return group.status();
  return splitOver(*group.value(), /*overTcp=*/false, parent, 0, group.value()->rank(), cfg, "occlCommShrink");
}

}  // namespace

Result<std::unique_ptr<Comm>> shrink(Comm& parent, const int* excludeRanks, int excludeCount,
                                     const occlConfig_t* config, int flags) {
  const int n = parent.size(), rank = parent.rank();
  if (flags != OCCL_SHRINK_DEFAULT && flags != OCCL_SHRINK_ABORT)
    return Status::error(occlInvalidArgument, absl::StrFormat("shrinkFlags = %d: expected OCCL_SHRINK_DEFAULT (%d) or "
                                                              "OCCL_SHRINK_ABORT (%d)",
                                                              flags, OCCL_SHRINK_DEFAULT, OCCL_SHRINK_ABORT));
  if (excludeCount < 0 || excludeCount >= n)
    return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksCount = %d: expected 0..%d (this "
                                                              "communicator has %d ranks, this one stays)",
                                                              excludeCount, n - 1, n));
  if (excludeCount > 0 && excludeRanks == nullptr)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("excludeRanksList is NULL with excludeRanksCount = %d", excludeCount));
  std::vector<bool> excluded(static_cast<size_t>(n), false);
  for (int i = 0; i < excludeCount; ++i) {
    const int r = excludeRanks[i];
    if (r < 0 || r >= n)
      return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksList[%d] = %d: expected a rank 0..%d", i,
                                                                r, n - 1));
    if (r == rank)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("excludeRanksList[%d] = %d is this rank: an excluded rank does not call "
                                           "occlCommShrink",
                                           i, r));
    if (excluded[static_cast<size_t>(r)])
      return Status::error(occlInvalidArgument, absl::StrFormat("excludeRanksList names rank %d twice", r));
    excluded[static_cast<size_t>(r)] = true;
  }
  Result<occlConfig_t> cfg = childConfig(parent, 0, config);
  if (!cfg.ok()) return cfg.status();
  if (flags == OCCL_SHRINK_DEFAULT) {
    if (const uint64_t pending = parent.pendingSubmissions(); pending != 0)
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("%d submission(s) are pending: wait for them (occlCommWaitAll), or pass "
                                           "OCCL_SHRINK_ABORT to fail them",
                                           pending));
  } else if (!parent.revoked()) {
    if (Status s = parent.revoke(); !s.ok()) return s.withContext("occlCommShrink: revoking the parent");
  }
  std::vector<int> survivors;
  for (int r = 0; r < n; ++r)
    if (!excluded[static_cast<size_t>(r)]) survivors.push_back(r);
  const int newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), rank) - survivors.begin());
  Result<std::unique_ptr<Comm>> child = parent.bootstrapped()
                                            ? shrinkOverTcp(parent, survivors, excluded, cfg.value())
                                            : shrinkThreads(parent, survivors, cfg.value());
  if (!child.ok()) return child.status();
  const std::string who = absl::StrFormat("occlCommShrink (new rank %d of %d)", newRank, static_cast<int>(survivors.size()));
  // What does not depend on the rank count goes along: AllReduce with the built-in algorithms.
  for (const Comm::Registration& reg : parent.registrations()) {
    if (!carriedByShrink(reg.desc, reg.algorithm)) continue;
    occlCollDesc_t d = reg.desc;
    d.algorithm = reg.algorithm.empty() ? nullptr : reg.algorithm.c_str();
    if (Status s = child.value()->registerCollective(reg.collId, d); !s.ok())
      return s.withContext(absl::StrFormat("%s: registering collId 0x%x again", who, reg.collId));
  }
  return child;
}

bool carriedByShrink(const occlCollDesc_t& desc, const std::string& algorithm) {
  return desc.type == occlCollAllReduce && (algorithm.empty() || algorithm == "ring");
}

}  // namespace occl::host
