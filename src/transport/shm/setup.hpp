// The shm row of the transport table (select.cpp): this rank's factory for its peers in other
// processes of its /dev/shm, and for its connectors to itself.
#pragma once

#include <memory>
#include <vector>

#include "transport/connector.hpp"
#include "transport/shm/connectors.hpp"
#include "transport/setup.hpp"
#include "util/status.hpp"

namespace occl::transport::shm {

// shm connectors in the job's pool; registered with CUDA for a device rank (cuda/connectors.hpp).
Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup);

// How the ranks that meet in one /dev/shm (one host, one shm device) lay out their shm
// connectors: whole pages where any of them is a CUDA rank, so that both ends of every connector
// take the same range; packed otherwise.
ShmRanges rangesFor(const std::vector<RankInfo>& ranks, int rank);

}  // namespace occl::transport::shm
