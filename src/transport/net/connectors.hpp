// The NET connector: connectors between ranks that share no memory (other hosts, or ranks of one
// host forced onto the network), carried by UCX.
//
// The daemon does not know a peer is remote. Each end of a NET connector is a LOCAL FIFO in this
// rank's host memory (queues/fifo.hpp), used exactly like an in-process or shm one. A per-rank
// progress ("proxy") thread mirrors it over UCX:
//   sender end   : ships each slot the daemon publishes (tail) to the peer, and advances the local
//                  head once a slot's send completed AND the peer's daemon consumed it (credit);
//   receiver end : writes arriving slots into the local FIFO and publishes its tail in step order;
//                  when the local daemon advances head, sends that head back as the credit;
//   both ends    : forward this end's registration signature and poison (written by the host
//                  through ConnectorMemory, or by the daemon into the header) to the peer, and
//                  write the peer's into the local header. A failed peer (UCX endpoint error)
//                  poisons every connector with it with occlRemoteError.
//
// Set-up is two-phase so the bootstrap can exchange worker addresses over its own channel:
//
//   auto f = makeNetFactory({.rank = r, .nRanks = n});        // 1. UCX context + worker
//   bytes  = f.value()->localAddress();                        //    ... allgather the bytes ...
//   f.value()->connect(addressOfRank);                         // 2. endpoints, proxy starts
//   f.value()->attach(key, end, nSlots, slotBytes);            //    any time after connect()
//
// `connect` takes one entry per rank; an empty entry means "not reached through NET" (same
// process/host peers that use in-process or shm connectors), so per-peer transport selection
// builds one NetFactory per rank and hands it only the remote peers' addresses.
//
// Pairing (transport/connector.hpp) holds across ranks: messages carry (key, generation) and the
// k-th attach of a key on one rank meets the k-th on the peer, whichever attaches first; data sent
// to a receiver that has not attached yet waits in a FIFO its proxy creates for it. A geometry
// that differs between the two ends fails the later attach with occlInvalidUsage when the peer's
// geometry is already known, and otherwise poisons both ends with occlInvalidUsage on arrival.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "transport/connector.hpp"
#include "transport/net/net_options.hpp"

namespace occl::transport::net {


class Proxy;

class NetFactory : public ConnectorFactory {
 public:
  // Stops the proxy, within about drainMs + 1 s: ships what daemons already published, poisons
  // (occlRemoteError) every connector still held on this rank so no daemon waits on it forever,
  // and closes the endpoints, which fails every connector the peers still have with this rank.
  // ConnectorMemory handles stay valid memory after it. Destroy it after the communicator's last
  // barrier, as shm unlinks its segments then.
  ~NetFactory() override;

  // This rank's UCX worker address: the bytes every peer passes to its connect().
  const std::vector<uint8_t>& localAddress() const;

  // Connects to every rank whose entry in `addresses` (indexed by rank, nRanks entries) is not
  // empty, and starts the proxy. Once per factory; this rank's own entry must be empty or equal
  // to localAddress(). Fails with occlInvalidArgument/occlInvalidUsage on bad input and
  // occlSystemError when UCX cannot create an endpoint.
  Status connect(const std::vector<std::vector<uint8_t>>& addresses);

  // This rank must be key.sender (end Sender) or key.receiver (end Receiver), and the other one a
  // rank connect() was given an address for. Fails with occlRemoteError once that peer failed.
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override;
  const char* name() const override { return "net"; }

  int rank() const { return options_.rank; }

 private:
  friend Result<std::unique_ptr<NetFactory>> makeNetFactory(NetOptions options);
  explicit NetFactory(NetOptions options);

  NetOptions options_;
  std::unique_ptr<Proxy> proxy_;
};

// Phase 1: creates this rank's UCX context and worker. occlInvalidArgument for a bad rank or
// allocator, occlSystemError when UCX cannot start (e.g. an unknown transport in `tls`).
Result<std::unique_ptr<NetFactory>> makeNetFactory(NetOptions options);

}  // namespace occl::transport::net
