// The C API: argument checks, error recording, and the translation to host::Comm.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher_env.hpp"
#include "host/comm.hpp"
#include "host/config.hpp"
#include "memory/shared_buffers.hpp"
#include "occl/occl.h"
#include "transport/ipc/fd_exchange.hpp"
#include "transport/ipc/ipc.hpp"
#include "transport/ipc/ipc_device.hpp"
#include "transport/select.hpp"
#include "util/cpus.hpp"
#if OCCL_HAVE_UCX
#include "transport/net/net_factory.hpp"
#endif
#if OCCL_HAVE_CUDA
#include "transport/cuda_connectors.hpp"
#include "util/cuda_util.hpp"
#endif

struct occlComm {
  std::unique_ptr<occl::host::Comm> impl;
};

namespace {

using occl::host::Comm;
using occl::Result;
using occl::Status;

thread_local std::string tlsLastError;

occlResult_t fail(occlComm_t comm, const Status& s) {
  if (s.ok()) return occlSuccess;
  if (comm != nullptr && comm->impl) return comm->impl->record(s);
  tlsLastError = s.message;
  return s.code;
}

occlResult_t invalid(const char* what) { return fail(nullptr, Status::error(occlInvalidArgument, what)); }

Result<occlConfig_t> resolveConfig(const occlConfig_t* config) {
  occlConfig_t c{};
  if (config != nullptr) {
    c = *config;
  } else if (Status s = occl::host::initConfig(c); !s.ok()) {
    return s;
  }
  if (Status s = occl::host::validateConfig(c); !s.ok()) return s;
  return c;
}

occlResult_t makeComm(occlComm_t* out, occl::host::CommOptions options) {
  Result<std::unique_ptr<Comm>> comm = Comm::create(std::move(options));
  if (!comm.ok()) return fail(nullptr, comm.status());
  *out = new occlComm{std::move(comm.value())};
  return occlSuccess;
}

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
  Result<int> count = occl::cudaDeviceCount();
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

Result<std::unique_ptr<occl::backend::Backend>> backendFor(const occlConfig_t& c, int device) {
  if (c.backend == occlBackendSimt) return occl::backend::makeSimtBackend(c);
  if (device < 0) return occl::backend::makeHostBackend(c);
#if OCCL_HAVE_CUDA
  return occl::backend::makeCudaBackend(c, device);
#else
  return Status::error(occlInternalError, "a CUDA device was chosen in a build without the CUDA backend");
#endif
}

// Ranks of one process share connector memory: host memory, or GPU memory for device ranks
// (all ranks of one occlCommInitAll are of one kind). Returns a factory per rank.
std::function<std::unique_ptr<occl::transport::ConnectorFactory>()> inProcessConnectors(const std::vector<int>& devices) {
#if OCCL_HAVE_CUDA
  if (devices.front() >= 0) {
    auto world = occl::transport::makeCudaWorld(devices);
    return [world] { return occl::transport::makeCudaInProcessFactory(world); };
  }
#endif
  auto world = occl::transport::makeInProcessWorld();
  return [world] { return occl::transport::makeInProcessFactory(world); };
}

// Connectors between processes of this host: shm, registered with CUDA for a device rank (which
// takes whole pages: `ranges` is WholePages where this host has one).
std::unique_ptr<occl::transport::ConnectorFactory> shmConnectorsFor(uint64_t nonce, int64_t timeoutMs, int device,
                                                                    occl::transport::ShmRanges ranges) {
#if OCCL_HAVE_CUDA
  if (device >= 0) return occl::transport::makeCudaShmFactory(nonce, timeoutMs, device);
#endif
  return occl::transport::makeShmFactory(nonce, timeoutMs, ranges);
}

// Where every rank of a communicator runs, and the transport this rank takes to each peer.
struct Topology {
  std::vector<occl::transport::RankInfo> ranks;   // places first; daemons once gathered (choosePeers)
  std::vector<occl::transport::Transport> byPeer;  // this rank's transport to each rank (choosePeers)
  int localRank = 0;                               // among the ranks of this host
  int localRanks = 0;                              // ranks of this host, this one included
  bool anyNet = false;                             // some pair of ranks (not only this one) uses NET
  bool anyIpc = false;                             // some pair of ranks uses device memory (IPC)
  bool shmPeersSharePids = true;                   // every peer of this host is in this rank's pid namespace
  int hostCpus = 0;                                // CPUs the ranks of this host may run on together
};

// Where each rank runs (its host, process, /dev/shm): enough to know the local rank, which
// decides the device.
Result<Topology> discoverTopology(occl::bootstrap::Bootstrap& boot, int rank, int nranks) {
  using namespace occl::transport;
  Topology t;
  std::vector<PeerInfo> places(static_cast<size_t>(nranks));
  places[static_cast<size_t>(rank)] =
      makePeerInfo(occl::bootstrap::hostIdentity(), {.pidNamespace = occl::bootstrap::pidNamespace(),
                                                     .shmDevice = occl::bootstrap::shmDevice(),
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
  masks[static_cast<size_t>(rank)] = occl::threadCpus();
  if (Status s = boot.allGather(masks.data(), sizeof(cpu_set_t)); !s.ok()) return s;
  std::vector<cpu_set_t> here;
  for (int r = 0; r < nranks; ++r)
    if (sameHost(self, places[static_cast<size_t>(r)])) here.push_back(masks[static_cast<size_t>(r)]);
  t.hostCpus = occl::cpusCovered(here);
  return t;
}

// What runs this rank's daemon: host threads, simt, or the CUDA `device`.
Result<occl::transport::DaemonInfo> describeDaemon(const occlConfig_t& c, int device) {
  occl::transport::DaemonInfo info;
  if (c.backend == occlBackendSimt) info.kind = occl::transport::DaemonKind::Simt;
#if OCCL_HAVE_CUDA
  if (device >= 0) return occl::transport::ipc::describeCudaDaemon(device);
#else
  (void)device;  // device ranks exist only in CUDA builds
#endif
  return info;
}

// Every rank's daemon (known once each has its device), then the transport table
// (transport/select.hpp) for every pair.
Status choosePeers(occl::bootstrap::Bootstrap& boot, Topology& t, int rank, const occlConfig_t& c,
                   const occl::transport::DaemonInfo& mine) {
  using namespace occl::transport;
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
Result<std::unique_ptr<occl::transport::ConnectorFactory>> ipcConnectors(occl::bootstrap::Bootstrap& boot, const Topology& t,
                                                                          int rank, const occlConfig_t& c, int device) {
  namespace ipc = occl::transport::ipc;
  std::vector<int> peers;
  for (size_t r = 0; r < t.byPeer.size(); ++r)
    if (t.byPeer[r] == occl::transport::Transport::DeviceIpc) peers.push_back(static_cast<int>(r));
  Result<std::shared_ptr<ipc::IpcDevice>> memory = std::shared_ptr<ipc::IpcDevice>();
  if (!peers.empty() && c.backend == occlBackendSimt) memory = ipc::makeSimtIpcDevice(rank, kSimtIpcArenaBytes);
#if OCCL_HAVE_CUDA
  if (!peers.empty() && device >= 0) {
    std::vector<uint64_t> gpus;
    for (const occl::transport::RankInfo& r : t.ranks) gpus.push_back(r.daemon.gpu);
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
  if (made == nullptr) return std::unique_ptr<occl::transport::ConnectorFactory>();
  return ipc::makeIpcFactory(boot.nonce(), c.initTimeoutMs, rank, made);
}

#if OCCL_HAVE_UCX
// Phase one of the NET connector on every rank, the worker addresses through the bootstrap (sizes
// first: they differ by rank), phase two with the addresses of this rank's NET peers.
Result<std::unique_ptr<occl::transport::ConnectorFactory>> netConnectors(occl::bootstrap::Bootstrap& boot, const Topology& t,
                                                                          int rank, int nranks, int device) {
  namespace net = occl::transport::net;
  net::NetOptions options;
  options.rank = rank;
  options.nRanks = nranks;
#if OCCL_HAVE_CUDA
  if (device >= 0) {
    // The daemon kernel reads and writes the FIFOs at their host addresses, and its publishes
    // cannot wake the proxy: it scans at least every kCudaProxySleepUs.
    constexpr int64_t kCudaProxySleepUs = 50;
    Result<occl::transport::HostAllocator> pinned = occl::transport::makeCudaPinnedAllocator(device);
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
    if (r == rank || t.byPeer[static_cast<size_t>(r)] != occl::transport::Transport::Net) continue;
    const auto* at = all.data() + stride * static_cast<size_t>(r);
    addresses[static_cast<size_t>(r)].assign(at, at + sizes[static_cast<size_t>(r)]);
  }
  if (Status s = factory.value()->connect(addresses); !s.ok()) return s;
  return std::unique_ptr<occl::transport::ConnectorFactory>(std::move(factory.value()));
}
#endif

// The connector factory of a rank in its own process: each peer's transport (transport/select.hpp).
Result<std::unique_ptr<occl::transport::ConnectorFactory>> connectorsFor(occl::bootstrap::Bootstrap& boot, const Topology& t,
                                                                         int rank, int nranks, const occlConfig_t& c,
                                                                         int device) {
  using occl::transport::Transport;
  std::map<Transport, std::unique_ptr<occl::transport::ConnectorFactory>> factories;
  const occl::transport::ShmRanges ranges = occl::transport::shmRangesFor(t.ranks, rank);
  // A rank's connectors to itself pair up within the process, like shm between two processes.
  factories[Transport::InProcess] = shmConnectorsFor(boot.nonce(), c.initTimeoutMs, device, ranges);
  factories[Transport::Shm] = shmConnectorsFor(boot.nonce(), c.initTimeoutMs, device, ranges);
  if (t.anyIpc) {
    Result<std::unique_ptr<occl::transport::ConnectorFactory>> ipc = ipcConnectors(boot, t, rank, c, device);
    if (!ipc.ok()) return ipc.status();
    if (ipc.value() != nullptr) factories[Transport::DeviceIpc] = std::move(ipc.value());
  }
  if (t.anyNet) {
    const auto peer = std::find(t.byPeer.begin(), t.byPeer.end(), Transport::Net);
    const int other = peer == t.byPeer.end() ? rank : static_cast<int>(peer - t.byPeer.begin());
    const occl::transport::PeerInfo &mine = t.ranks[static_cast<size_t>(rank)].place,
                                    &theirs = t.ranks[static_cast<size_t>(other)].place;
    const std::string where =
        sameHost(mine, theirs) && mine.shmDevice != theirs.shmDevice
            ? absl::StrFormat("ranks %d and %d run on host \"%s\" with a /dev/shm each (devices 0x%x and 0x%x)", rank,
                              other, mine.host, mine.shmDevice, theirs.shmDevice)
            : absl::StrFormat("rank %d runs on host \"%s\" and rank %d on \"%s\"", rank, mine.host, other, theirs.host);
#if OCCL_HAVE_UCX
    Result<std::unique_ptr<occl::transport::ConnectorFactory>> net = netConnectors(boot, t, rank, nranks, device);
    if (!net.ok()) return net.status().withContext(where + ": starting the NET connector");
    factories[Transport::Net] = std::move(net.value());
#else
    return Status::error(occlInvalidUsage, where + ": ranks on several hosts, or without a /dev/shm in common (or "
                                                   "OCCL_TRANSPORT=net), need the NET connector, and this build has no "
                                                   "UCX (install libucx-dev and rebuild)");
#endif
  }
  return std::unique_ptr<occl::transport::ConnectorFactory>(
      std::make_unique<occl::transport::RoutedFactory>(rank, t.byPeer, std::move(factories)));
}

occlResult_t checkComm(occlComm_t comm) {
  return comm == nullptr || !comm->impl ? invalid("comm is NULL") : occlSuccess;
}

// Stopping a communicator joins its poller, so a callback (which runs there) must not do it.
occlResult_t refuseInCallback(occlComm_t comm, const char* what) {
  return fail(comm, Status::error(occlInvalidUsage,
                                  absl::StrFormat("%s called from a callback: it would wait for itself", what)));
}

}  // namespace

extern "C" {

const char* occlGetErrorString(occlResult_t result) {
  switch (result) {
    case occlSuccess: return "no error";
    case occlUnhandledCudaError: return "unhandled CUDA error";
    case occlSystemError: return "system error";
    case occlInternalError: return "internal error";
    case occlInvalidArgument: return "invalid argument";
    case occlInvalidUsage: return "invalid usage";
    case occlRemoteError: return "remote process error";
    case occlInProgress: return "operation in progress";
    case occlTimeout: return "timeout";
    case occlAborted: return "aborted";
    default: return "unknown result code";
  }
}

const char* occlGetLastError(occlComm_t comm) {
  thread_local std::string copy;
  copy = (comm != nullptr && comm->impl) ? comm->impl->lastError() : tlsLastError;
  return copy.c_str();
}

occlResult_t occlGetVersion(int* version) {
  if (version == nullptr) return invalid("version is NULL");
  *version = OCCL_VERSION_CODE;
  return occlSuccess;
}

occlResult_t occlConfigInit(occlConfig_t* config) {
  if (config == nullptr) return invalid("config is NULL");
  return fail(nullptr, occl::host::initConfig(*config));
}

occlResult_t occlCollDescInit(occlCollDesc_t* desc) {
  if (desc == nullptr) return invalid("desc is NULL");
  *desc = occlCollDesc_t{occlCollAllReduce, 0, occlFloat32, occlSum, 0, 0, nullptr, 0, 0};
  return occlSuccess;
}

occlResult_t occlGetUniqueId(occlUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid("uniqueId is NULL");
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::createUniqueId();
  if (!id.ok()) return fail(nullptr, id.status());
  occl::bootstrap::packUniqueId(id.value(), uniqueId);
  return occlSuccess;
}

static occlResult_t initRankFrom(occlComm_t* comm, int nranks, const occl::bootstrap::UniqueIdData& id, int rank,
                                 const occlConfig_t* config) {
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  if (nranks < 1) return invalid("nranks must be >= 1");
  if (rank < 0 || rank >= nranks)
    return fail(nullptr, Status::error(occlInvalidArgument,
                                       absl::StrFormat("rank = %d: expected 0..%d (nranks = %d)", rank, nranks - 1, nranks)));
  auto boot = occl::bootstrap::Bootstrap::connect(id, rank, nranks, cfg.value().initTimeoutMs);
  if (!boot.ok()) return fail(nullptr, boot.status());
  Result<Topology> topology = discoverTopology(*boot.value(), rank, nranks);
  if (!topology.ok()) return fail(nullptr, topology.status());
  Result<int> device = daemonDevice(cfg.value(), nullptr, rank, topology.value().localRank, /*autoPrefersGpu=*/true);
  if (!device.ok()) return fail(nullptr, device.status());
  Result<occl::transport::DaemonInfo> daemon = describeDaemon(cfg.value(), device.value());
  if (!daemon.ok()) return fail(nullptr, daemon.status());
  if (Status s = choosePeers(*boot.value(), topology.value(), rank, cfg.value(), daemon.value()); !s.ok())
    return fail(nullptr, s);
  Result<std::unique_ptr<occl::backend::Backend>> backend = backendFor(cfg.value(), device.value());
  if (!backend.ok()) return fail(nullptr, backend.status());
  occl::host::CommOptions options;
  options.rank = rank;
  options.nRanks = nranks;
  options.config = cfg.value();
  options.shmPeersSharePids = topology.value().shmPeersSharePids;
  options.ranksOnThisHost = topology.value().localRanks;
  options.cpusOfThisHostsRanks = topology.value().hostCpus;
  const bool anyCuda = std::any_of(topology.value().ranks.begin(), topology.value().ranks.end(),
                                   [](const occl::transport::RankInfo& r) { return r.daemon.kind == occl::transport::DaemonKind::Cuda; });
  occl::host::resolveConnectorGeometry(options.config, topology.value().anyNet, anyCuda);
  options.backend = std::move(backend.value());
  Result<std::unique_ptr<occl::transport::ConnectorFactory>> connectors =
      connectorsFor(*boot.value(), topology.value(), rank, nranks, cfg.value(), device.value());
  if (!connectors.ok()) return fail(nullptr, connectors.status());
  options.connectors = std::move(connectors.value());
  occl::bootstrap::Bootstrap* bootstrap = boot.value().get();
  options.bootstrap = std::move(boot.value());
  occlResult_t r = makeComm(comm, std::move(options));
  if (r != occlSuccess) return r;
  // The Comm itself, not the handle: occlCommDestroy may reset the handle's pointer (libc++ does,
  // before ~Comm runs) while the monitor thread still reports, and ~Comm joins that thread
  // (Bootstrap::close) before any of the Comm goes away.
  Comm* created = (*comm)->impl.get();
  bootstrap->setFailureCallback([created](int failedRank, const std::string& why) {
    created->failFromPeer(absl::StrFormat("rank %d failed: %s", failedRank, why));
  });
  return occlSuccess;
}

occlResult_t occlCommInitRank(occlComm_t* comm, int nranks, occlUniqueId commId, int rank, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::unpackUniqueId(commId);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, nranks, id.value(), rank, config);
}

occlResult_t occlCommInitFromEnv(occlComm_t* comm, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::bootstrap::LauncherEnv> env = occl::bootstrap::detectLauncherEnv();
  if (!env.ok()) return fail(nullptr, env.status());
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::uniqueIdFromAddress(env.value().addr, env.value().port, 0);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, env.value().size, id.value(), env.value().rank, config);
}

occlResult_t occlCommInitAll(occlComm_t* comms, int ndev, const int* devlist, const occlConfig_t* config) {
  if (comms == nullptr) return invalid("comms is NULL");
  if (ndev < 1) return fail(nullptr, Status::error(occlInvalidArgument, absl::StrFormat("ndev = %d: expected >= 1", ndev)));
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int r = 0; r < ndev; ++r) {
    Result<int> device = daemonDevice(cfg.value(), devlist, r, r, /*autoPrefersGpu=*/false);
    if (!device.ok()) return fail(nullptr, device.status());
    devices[static_cast<size_t>(r)] = device.value();
  }
  auto connectors = inProcessConnectors(devices);
  const bool anyCuda = std::any_of(devices.begin(), devices.end(), [](int d) { return d >= 0; });
  for (int r = 0; r < ndev; ++r) comms[r] = nullptr;
  auto destroyFirst = [&](int n) {
    for (int k = 0; k < n; ++k) {
      occlCommDestroy(comms[k]);
      comms[k] = nullptr;
    }
  };
  for (int r = 0; r < ndev; ++r) {
    Result<std::unique_ptr<occl::backend::Backend>> backend = backendFor(cfg.value(), devices[static_cast<size_t>(r)]);
    if (!backend.ok()) {
      destroyFirst(r);
      return fail(nullptr, backend.status().withContext(absl::StrFormat("rank %d", r)));
    }
    occl::host::CommOptions options;
    options.rank = r;
    options.nRanks = ndev;
    options.ranksOnThisHost = ndev;
    options.config = cfg.value();
    occl::host::resolveConnectorGeometry(options.config, /*spansHosts=*/false, anyCuda);
    options.backend = std::move(backend.value());
    options.connectors = connectors();
    if (occlResult_t res = makeComm(&comms[r], std::move(options)); res != occlSuccess) {
      destroyFirst(r);
      return res;
    }
  }
  return occlSuccess;
}

occlResult_t occlCommFinalize(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->finalize());
}

occlResult_t occlCommDestroy(occlComm_t comm) {
  if (comm == nullptr) return invalid("comm is NULL");
  if (comm->impl && comm->impl->inCallback()) return refuseInCallback(comm, "occlCommDestroy");
  delete comm;
  return occlSuccess;
}

occlResult_t occlCommAbort(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (comm->impl->inCallback()) return refuseInCallback(comm, "occlCommAbort");
  (void)comm->impl->abort(occlAborted);
  delete comm;
  return occlSuccess;
}

occlResult_t occlCommGetAsyncError(occlComm_t comm, occlResult_t* asyncError) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (asyncError == nullptr) return fail(comm, Status::error(occlInvalidArgument, "asyncError is NULL"));
  *asyncError = comm->impl->asyncError();
  return occlSuccess;
}

occlResult_t occlCommCount(occlComm_t comm, int* count) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (count == nullptr) return fail(comm, Status::error(occlInvalidArgument, "count is NULL"));
  *count = comm->impl->size();
  return occlSuccess;
}

occlResult_t occlCommUserRank(occlComm_t comm, int* rank) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (rank == nullptr) return fail(comm, Status::error(occlInvalidArgument, "rank is NULL"));
  *rank = comm->impl->rank();
  return occlSuccess;
}

occlResult_t occlCommPeerTransport(occlComm_t comm, int peer, const char** transport) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (transport == nullptr) return fail(comm, Status::error(occlInvalidArgument, "transport is NULL"));
  const int n = comm->impl->size();
  if (peer < 0 || peer >= n) {
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("peer %d is not a rank of this %d-rank communicator (0..%d)", peer,
                                                    n, n - 1)));
  }
  *transport = comm->impl->transportTo(peer);
  return occlSuccess;
}

occlResult_t occlCommGetConfig(occlComm_t comm, occlConfig_t* config) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (config == nullptr) return fail(comm, Status::error(occlInvalidArgument, "config is NULL"));
  *config = comm->impl->config();
  return occlSuccess;
}

occlResult_t occlCollRegister(occlComm_t comm, uint64_t collId, const occlCollDesc_t* desc) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (desc == nullptr) return fail(comm, Status::error(occlInvalidArgument, "desc is NULL"));
  return fail(comm, comm->impl->registerCollective(collId, *desc));
}

occlResult_t occlCollDeregister(occlComm_t comm, uint64_t collId) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->deregisterCollective(collId));
}

occlResult_t occlAlgorithmLoad(occlComm_t comm, const char* name, const char* path) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (name == nullptr) return fail(comm, Status::error(occlInvalidArgument, "name is NULL"));
  if (path == nullptr) return fail(comm, Status::error(occlInvalidArgument, "path is NULL"));
  return fail(comm, comm->impl->loadAlgorithm(name, path));
}

occlResult_t occlCollGetAlgorithm(occlComm_t comm, uint64_t collId, int inPlace, const char** algorithm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (algorithm == nullptr) return fail(comm, Status::error(occlInvalidArgument, "algorithm is NULL"));
  Result<const std::string*> name = comm->impl->algorithmOf(collId, inPlace != 0);
  if (!name.ok()) return fail(comm, name.status());
  *algorithm = name.value()->c_str();
  return occlSuccess;
}

occlResult_t occlSubmit(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback,
                        void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submit(collId, sendbuf, recvbuf, callback, arg));
}

occlResult_t occlSubmitGated(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                             occlCallback_t callback, void* arg, occlGate_t* gate) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submitGated(collId, sendbuf, recvbuf, callback, arg, gate));
}

occlResult_t occlGateOpen(occlComm_t comm, occlGate_t gate) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->openGate(gate));
}

occlResult_t occlSubmitOnStream(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                                struct CUstream_st* stream, occlCallback_t callback, void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submitOnStream(collId, sendbuf, recvbuf, stream, callback, arg));
}

occlResult_t occlCommWaitAll(occlComm_t comm, int64_t timeoutMs) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->waitAll(timeoutMs));
}

occlResult_t occlCollGetStats(occlComm_t comm, uint64_t collId, occlCollStats_t* stats) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (stats == nullptr) return fail(comm, Status::error(occlInvalidArgument, "stats is NULL"));
  Result<occlCollStats_t> s = comm->impl->collectiveStats(collId);
  if (!s.ok()) return fail(comm, s.status());
  *stats = s.value();
  return occlSuccess;
}

occlResult_t occlCommGetTimeline(occlComm_t comm, occlTimelineEntry_t* entries, int capacity, int* count) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (count == nullptr) return fail(comm, Status::error(occlInvalidArgument, "count is NULL"));
  if (capacity < 0)
    return fail(comm, Status::error(occlInvalidArgument, absl::StrFormat("capacity = %d: expected >= 0", capacity)));
  if (entries == nullptr && capacity != 0)
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("entries is NULL with capacity = %d: pass 0 to count", capacity)));
  Result<std::vector<occlTimelineEntry_t>> t = comm->impl->timeline();
  if (!t.ok()) return fail(comm, t.status());
  const std::vector<occlTimelineEntry_t>& all = t.value();
  if (entries == nullptr) {
    *count = static_cast<int>(all.size());
    return occlSuccess;
  }
  const size_t n = std::min(all.size(), static_cast<size_t>(capacity));
  std::copy(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n), entries);
  *count = static_cast<int>(n);
  return occlSuccess;
}

occlResult_t occlMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return invalid("ptr is NULL");
  Result<void*> p = occl::memory::allocate(size);
  if (!p.ok()) return fail(nullptr, p.status());
  *ptr = p.value();
  return occlSuccess;
}

occlResult_t occlMemFree(void* ptr) {
  if (ptr == nullptr) return occlSuccess;  // as free(NULL)
  return fail(nullptr, occl::memory::release(ptr));
}

}  // extern "C"
