// Per-peer transport selection, NCCL's canConnect table in small: each rank describes itself
// (rank_info.hpp), every rank learns every description through the bootstrap, and for each peer
// the first row of the table (select.cpp) whose canConnect() accepts the pair carries its
// connectors. Every rank evaluates the same table on the same descriptions, so both ends of a
// connector choose the same transport. The same row makes the transport's connector factory.
//
// A new transport is a folder under transport/ with the files its peers have (connectors.hpp,
// connectors.cpp: its ConnectorFactory; setup.hpp, setup.cpp: its maker, given a TransportSetup),
// a value of Transport (setup.hpp) and one row of the table (docs/design.md walks through it).
#pragma once

#include <memory>
#include <set>
#include <vector>

#include "transport/connector.hpp"
#include "transport/rank_info.hpp"
#include "transport/setup.hpp"
#include "util/status.hpp"

namespace occl::transport {

struct SelectionPolicy {
  bool forceNet = false;  // OCCL_TRANSPORT=net: the network between all processes, also on one host
  bool forceShm = false;  // OCCL_TRANSPORT=shm: shared memory between processes of a host, not device memory
};

// The transport for the pair (self, peer); self == peer is the rank itself (in-process).
Transport selectTransport(const RankInfo& self, const RankInfo& peer, const SelectionPolicy& policy);

// The transports that some pair of `ranks` takes (every rank computes the same set).
std::set<Transport> takenByAnyPair(const std::vector<RankInfo>& ranks, const SelectionPolicy& policy);

// This rank's connector factory in a communicator of processes: the factory of each transport in
// setup.taken, made by its row in the table's order on every rank, behind a RoutedFactory
// (routed.hpp) that hands each attach to the factory of the peer's transport. Fails, naming the
// ranks, where a transport some pair needs is not in this build.
Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup);

}  // namespace occl::transport
