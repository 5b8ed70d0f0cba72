// What names a connector's range in the job's shm pool (pool.hpp): its key and the generation of
// the pairing rule (connector.hpp), the k-th attach of the key by each end.
#pragma once

#include <cstdint>

#include "transport/connector.hpp"

namespace occl::transport {

struct PoolKey {
  ConnectorKey connector;
  uint64_t generation;  // the k-th attach of the key by each end

  bool operator==(const PoolKey&) const = default;
};

}  // namespace occl::transport
