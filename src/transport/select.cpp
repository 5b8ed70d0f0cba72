#include "transport/select.hpp"

#include <map>
#include <utility>

#include "transport/ipc/setup.hpp"
#include "transport/routed.hpp"
#include "transport/shm/setup.hpp"
#if OCCL_HAVE_UCX
#include "transport/net/setup.hpp"
#endif

namespace occl::transport {
namespace {

// A row: when the transport carries a pair, and how a rank makes its connector factory for it.
// `make` runs on every rank where some pair takes the transport (setup.taken), in the table's
// order, since a maker may meet its peers through setup.allGather; it returns nullptr where this
// rank has no peer over it. A transport not in this build has no maker: `missing` says why.
using Maker = Result<std::unique_ptr<ConnectorFactory>> (*)(const TransportSetup& setup);
struct TransportEntry {
  Transport kind;
  bool (*canConnect)(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy);
  Maker make;
  const char* missing;
};

bool reaches(const DaemonInfo& from, uint64_t gpu) {
  for (size_t i = 0; i < from.nReach && i < DaemonInfo::kMaxReach; ++i)
    if (from.reach[i] == gpu) return true;
  return false;
}

// In order of preference; the last one reaches everything.
constexpr TransportEntry kTransports[] = {
    // A pid names a process only within its pid namespace: two ranks in containers that share
    // the host's network and /dev/shm may both be pid 1. A rank's connectors to itself pair up
    // in the job's shm pool, as those between two processes do: its maker is shm's.
    {Transport::InProcess,
     [](const RankInfo& self, const RankInfo& peer, const SelectionPolicy&) {
       return sameHost(self.place, peer.place) && self.place.pidNamespace == peer.place.pidNamespace &&
              self.place.process == peer.place.process;
     },
     shm::makeConnectors, nullptr},
    // Device ranks of one kind in two processes: FIFOs in device memory that one exports and the
    // other imports (transport/ipc/). The ends pair through the job's shm pool, so the shm row's
    // condition holds too. CUDA: both GPUs' pools export as file descriptors, and the GPUs are
    // one, or each reaches the other by peer access as its own process sees it (NVLink or PCIe
    // P2P; a GPU outside a process's CUDA_VISIBLE_DEVICES is not seen to be reached); otherwise
    // pinned shm. simt: its processes emulate GPUs that all reach each other.
    {Transport::DeviceIpc,
     [](const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy) {
       if (policy.forceNet || policy.forceShm || !sharesDevShm(self.place, peer.place)) return false;
       const DaemonInfo &a = self.daemon, &b = peer.daemon;
       if (a.kind != b.kind) return false;
       if (a.kind == DaemonKind::Simt) return true;
       return a.kind == DaemonKind::Cuda && a.canExport != 0 && b.canExport != 0 &&
              (a.gpu == b.gpu || (reaches(a, b.gpu) && reaches(b, a.gpu)));
     },
     ipc::makeConnectors, nullptr},
    // Segments are named in /dev/shm: two containers with one each would each make their own
    // and wait for a peer that never writes there.
    {Transport::Shm,
     [](const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy) {
       return !policy.forceNet && sharesDevShm(self.place, peer.place);
     },
     shm::makeConnectors, nullptr},
    {Transport::Net, [](const RankInfo&, const RankInfo&, const SelectionPolicy&) { return true; },
#if OCCL_HAVE_UCX
     net::makeConnectors, nullptr},
#else
     nullptr,
     "ranks on several hosts, or without a /dev/shm in common (or OCCL_TRANSPORT=net), need the NET connector, and "
     "this build has no UCX (install libucx-dev and rebuild)"},
#endif
};

}  // namespace

Transport selectTransport(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy) {
  for (const TransportEntry& t : kTransports)
    if (t.canConnect(self, peer, policy)) return t.kind;
  return Transport::Net;
}

std::set<Transport> takenByAnyPair(const std::vector<RankInfo>& ranks, const SelectionPolicy& policy) {
  std::set<Transport> taken;
  for (const RankInfo& a : ranks)
    for (const RankInfo& b : ranks) taken.insert(selectTransport(a, b, policy));
  return taken;
}

Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup) {
  std::map<Transport, std::unique_ptr<ConnectorFactory>> factories;
  for (const TransportEntry& t : kTransports) {
    if (!setup.taken.contains(t.kind)) continue;
    if (t.make == nullptr) return Status::error(occlInvalidUsage, setup.whereFirstPeer(t.kind) + ": " + t.missing);
    Result<std::unique_ptr<ConnectorFactory>> made = t.make(setup);
    if (!made.ok()) return made.status();
    if (made.value() != nullptr) factories[t.kind] = std::move(made.value());
  }
  return std::unique_ptr<ConnectorFactory>(std::make_unique<RoutedFactory>(setup.rank, setup.byPeer, std::move(factories)));
}

}  // namespace occl::transport
