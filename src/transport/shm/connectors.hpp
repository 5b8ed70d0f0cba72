// The shm transport: ranks that are processes of one host share POSIX shared memory named after
// the job's nonce, in the job's pool (shm/pool.hpp).
#pragma once

#include <cstdint>
#include <memory>

#include "transport/connector.hpp"

namespace occl::transport {

// Small connectors share pages (Packed) unless each must have pages of its own (WholePages: a
// CUDA rank registers each connector's pages with the driver). All ranks that meet in one
// /dev/shm must choose alike (select.hpp, shmRangesFor): the two ends of a connector that ask for
// ranges of different sizes fail its registration.
enum class ShmRanges { Packed, WholePages };
std::unique_ptr<ConnectorFactory> makeShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs, ShmRanges ranges);

}  // namespace occl::transport
