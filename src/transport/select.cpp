#include "transport/select.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "util/fnv1a.hpp"

namespace occl::transport {
namespace {

struct TransportEntry {
  Transport kind;
  bool (*canConnect)(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy);
};

bool sharesDevShm(const PeerInfo& self, const PeerInfo& peer) {
  return sameHost(self, peer) && self.shmDevice == peer.shmDevice;
}

bool reaches(const DaemonInfo& from, uint64_t gpu) {
  for (size_t i = 0; i < from.nReach && i < DaemonInfo::kMaxReach; ++i)
    if (from.reach[i] == gpu) return true;
  return false;
}

// In order of preference; the last one reaches everything.
constexpr TransportEntry kTransports[] = {
    // A pid names a process only within its pid namespace: two ranks in containers that share
    // the host's network and /dev/shm may both be pid 1.
    {Transport::InProcess,
     [](const RankInfo& self, const RankInfo& peer, const SelectionPolicy&) {
       return sameHost(self.place, peer.place) && self.place.pidNamespace == peer.place.pidNamespace &&
              self.place.process == peer.place.process;
     }},
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
     }},
    // Segments are named in /dev/shm: two containers with one each would each make their own
    // and wait for a peer that never writes there.
    {Transport::Shm,
     [](const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy) {
       return !policy.forceNet && sharesDevShm(self.place, peer.place);
     }},
    {Transport::Net, [](const RankInfo&, const RankInfo&, const SelectionPolicy&) { return true; }},
};

}  // namespace

const char* transportName(Transport t) {
  switch (t) {
    case Transport::InProcess: return "in-process";
    case Transport::DeviceIpc: return "device-ipc";
    case Transport::Shm: return "shm";
    case Transport::Net: return "net";
  }
  return "unknown";
}

PeerInfo makePeerInfo(const std::string& host, const ProcessPlace& place) {
  PeerInfo info{};
  std::memcpy(info.host, host.data(), std::min(host.size(), PeerInfo::kHostBytes - 1));
  info.pidNamespace = place.pidNamespace;
  info.shmDevice = place.shmDevice;
  info.process = place.process;
  return info;
}

bool sameHost(const PeerInfo& a, const PeerInfo& b) { return std::strncmp(a.host, b.host, PeerInfo::kHostBytes) == 0; }

uint64_t gpuIdentity(const unsigned char (&uuid)[16]) {
  Fnv1a h;  // the same on every rank
  for (unsigned char c : uuid) h.add(c);
  return h.value() == 0 ? 1 : h.value();
}

Transport selectTransport(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy) {
  for (const TransportEntry& t : kTransports)
    if (t.canConnect(self, peer, policy)) return t.kind;
  return Transport::Net;
}

ShmRanges shmRangesFor(const std::vector<RankInfo>& ranks, int rank) {
  const PeerInfo& self = ranks.at(static_cast<size_t>(rank)).place;
  for (const RankInfo& r : ranks)
    if (r.daemon.kind == DaemonKind::Cuda && sharesDevShm(self, r.place)) return ShmRanges::WholePages;
  return ShmRanges::Packed;
}

RoutedFactory::RoutedFactory(int rank, std::vector<Transport> byPeer,
                             std::map<Transport, std::unique_ptr<ConnectorFactory>> factories)
    : rank_(rank), byPeer_(std::move(byPeer)), factories_(std::move(factories)) {}

const char* RoutedFactory::transportTo(int peer) const {
  if (peer < 0 || static_cast<size_t>(peer) >= byPeer_.size()) return "none";
  auto it = factories_.find(byPeer_[static_cast<size_t>(peer)]);
  return it == factories_.end() ? transportName(byPeer_[static_cast<size_t>(peer)]) : it->second->transportTo(peer);
}

Result<std::shared_ptr<ConnectorMemory>> RoutedFactory::attach(const ConnectorKey& key, ConnectorEnd end,
                                                               uint32_t nSlots, uint64_t slotBytes) {
  const int peer = end == ConnectorEnd::Sender ? key.receiver : key.sender;
  if (peer < 0 || static_cast<size_t>(peer) >= byPeer_.size())
    return Status::error(occlInternalError,
                         absl::StrFormat("connector %s: peer rank %d outside 0..%d", key.describe(), peer,
                                         byPeer_.size() - 1));
  auto it = factories_.find(byPeer_[static_cast<size_t>(peer)]);
  if (it == factories_.end())
    return Status::error(occlInternalError,
                         absl::StrFormat("rank %d has no %s connector factory for rank %d", rank_,
                                         transportName(byPeer_[static_cast<size_t>(peer)]), peer));
  return it->second->attach(key, end, nSlots, slotBytes);
}

YieldBoard* RoutedFactory::yieldBoard() {
  // The rank's own connectors pair up in the job's pool as shm peers' do: one board for all.
  for (const Transport t : byPeer_)
    if (t == Transport::Net || t == Transport::DeviceIpc) return nullptr;
  auto it = factories_.find(Transport::Shm);
  return it == factories_.end() ? nullptr : it->second->yieldBoard();
}

}  // namespace occl::transport
