// The connector factory of a rank whose ranks run in several processes: each attach goes to the
// factory of the peer's transport (select.hpp chose it); the daemon never knows which one it got.
#pragma once

#include <map>
#include <memory>
#include <vector>

#include "transport/connector.hpp"
#include "transport/setup.hpp"

namespace occl::transport {

// Attaches each connector through the factory of its peer's transport.
class RoutedFactory : public ConnectorFactory {
 public:
  // `byPeer[r]` is rank r's transport; `factories` must hold one for each transport used.
  RoutedFactory(int rank, std::vector<Transport> byPeer, std::map<Transport, std::unique_ptr<ConnectorFactory>> factories);
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override;
  const char* name() const override { return "routed"; }
  // The shm (or in-process) factory's, where every peer is on this host and none is reached
  // through device memory (NET or IPC: the host cannot name the ends in such a FIFO's header).
  YieldBoard* yieldBoard() override;
  // The name of the factory the peer's connectors go to ("shm", "cuda-shm", "cuda-ipc", "net", ...).
  const char* transportTo(int peer) const override;

 private:
  int rank_;
  std::vector<Transport> byPeer_;
  std::map<Transport, std::unique_ptr<ConnectorFactory>> factories_;
};

}  // namespace occl::transport
