#include "transport/routed.hpp"

#include "absl/strings/str_format.h"

namespace occl::transport {

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
  // The rank's own connectors pair up in the job's pool as shm peers' do (the in-process row
  // makes an shm factory: select.cpp): one board for all, which either factory opens.
  for (const Transport t : byPeer_)
    if (t == Transport::Net || t == Transport::DeviceIpc) return nullptr;
  auto it = factories_.find(Transport::Shm);
  if (it == factories_.end()) it = factories_.find(Transport::InProcess);
  return it == factories_.end() ? nullptr : it->second->yieldBoard();
}

}  // namespace occl::transport
