// The device-ipc row of the transport table (select.cpp): this rank's factory for its device
// peers (CUDA or simt) in other processes of its host.
#pragma once

#include <memory>

#include "transport/connector.hpp"
#include "transport/setup.hpp"
#include "util/status.hpp"

namespace occl::transport::ipc {

// This rank's device memory (a CUDA rank's pools, a simt rank's arena), exported to its IPC peers
// and theirs imported over Unix sockets (fd_exchange.hpp). Every rank of the communicator calls
// it where some pair takes IPC: also one without an IPC peer, which joins the exchange's barrier
// and returns nullptr.
Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup);

}  // namespace occl::transport::ipc
