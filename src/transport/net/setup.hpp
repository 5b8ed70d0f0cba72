// The net row of the transport table (select.cpp): this rank's factory for its peers on other
// hosts, or without a /dev/shm in common (UCX builds only).
#pragma once

#include <memory>

#include "transport/connector.hpp"
#include "transport/setup.hpp"
#include "util/status.hpp"

namespace occl::transport::net {

// Phase one of the NET connector (net/connectors.hpp) on every rank of the communicator where
// some pair takes the network, the UCX worker addresses through setup.allGather (sizes first:
// they differ by rank), phase two with the addresses of this rank's NET peers.
Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup);

}  // namespace occl::transport::net
