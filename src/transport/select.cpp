#include "transport/select.hpp"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"

namespace occl::transport {
namespace {

struct TransportEntry {
  Transport kind;
  bool (*canConnect)(const PeerInfo& self, const PeerInfo& peer, const SelectionPolicy& policy);
};

// In order of preference; the last one reaches everything.
constexpr TransportEntry kTransports[] = {
    // A pid names a process only within its pid namespace: two ranks in containers that share
    // the host's network and /dev/shm may both be pid 1.
    {Transport::InProcess,
     [](const PeerInfo& self, const PeerInfo& peer, const SelectionPolicy&) {
       return sameHost(self, peer) && self.pidNamespace == peer.pidNamespace && self.process == peer.process;
     }},
    // Segments are named in /dev/shm: two containers with one each would each make their own
    // and wait for a peer that never writes there.
    {Transport::Shm,
     [](const PeerInfo& self, const PeerInfo& peer, const SelectionPolicy& policy) {
       return !policy.forceNet && sameHost(self, peer) && self.shmDevice == peer.shmDevice;
     }},
    {Transport::Net, [](const PeerInfo&, const PeerInfo&, const SelectionPolicy&) { return true; }},
};

}  // namespace

const char* transportName(Transport t) {
  switch (t) {
    case Transport::InProcess: return "in-process";
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

Transport selectTransport(const PeerInfo& self, const PeerInfo& peer, const SelectionPolicy& policy) {
  for (const TransportEntry& t : kTransports)
    if (t.canConnect(self, peer, policy)) return t.kind;
  return Transport::Net;
}

ShmRanges shmRangesFor(const std::vector<PeerInfo>& ranks, const std::vector<int32_t>& cudaRank, int rank) {
  const PeerInfo& self = ranks.at(static_cast<size_t>(rank));
  for (size_t r = 0; r < ranks.size(); ++r)
    if (cudaRank.at(r) != 0 && sameHost(self, ranks[r]) && ranks[r].shmDevice == self.shmDevice)
      return ShmRanges::WholePages;
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
    if (t == Transport::Net) return nullptr;
  auto it = factories_.find(Transport::Shm);
  return it == factories_.end() ? nullptr : it->second->yieldBoard();
}

}  // namespace occl::transport
