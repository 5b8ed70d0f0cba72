// How a process's factories reach the job's shm pool (pool.hpp): each factory's lazy way in, with
// the generation count of the pairing rule, and the unlinking of the job's names after the last
// user.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "transport/connector.hpp"
#include "transport/shm/pool.hpp"
#include "util/status.hpp"

namespace occl::transport {

// A factory's way into the job's pool (shm/connectors.cpp, ipc/connectors.cpp): opened at the first use, so a
// factory that never attaches (no peer of this host takes it) maps nothing; and how often each
// end attached each key before, its generation: a rank is always the same end of a key, so both
// ends count their registrations alike and the k-th ones meet in one range. Thread-safe.
class PoolAccess {
 public:
  PoolAccess(uint64_t nonce, int64_t timeoutMs) : nonce_(nonce), timeoutMs_(timeoutMs) {}
  Result<std::shared_ptr<ShmPool>> pool();
  uint64_t nextGeneration(const ConnectorKey& key, ConnectorEnd end);

 private:
  const uint64_t nonce_;
  const int64_t timeoutMs_;
  std::mutex mu_;
  std::shared_ptr<ShmPool> pool_;
  absl::flat_hash_map<std::pair<ConnectorKey, ConnectorEnd>, uint64_t> generations_;
};

// Unlinks, when the last of a communicator's users of the job's pool is gone (its shm and IPC
// connectors and their factories hold one each), every name of the job's nonce left in /dev/shm:
// those whose peer never joined, this rank's or a dead peer's.
class JobSegments {
 public:
  explicit JobSegments(uint64_t nonce);
  ~JobSegments();
  JobSegments(const JobSegments&) = delete;
  JobSegments& operator=(const JobSegments&) = delete;

 private:
  std::string prefix_;
};

}  // namespace occl::transport
