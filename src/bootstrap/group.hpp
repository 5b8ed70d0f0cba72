// The ranks of a communicator meeting while they set it up: the small collectives that building
// a communicator needs (occlCommInitRank's topology and addresses, occlCommSplit's colours),
// whether the ranks are processes (bootstrap.hpp, over TCP) or threads of one process
// (thread_group.hpp, occlCommInitAll's ranks).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/status.hpp"

namespace occl::bootstrap {

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Agreed by every rank, random per group: names what the group's ranks share (shm segments).
  virtual uint64_t nonce() const = 0;
  // Every rank calls these in the same order. In place: rank r's bytes are at
  // data + r * bytesPerRank. Bounded by the group's timeout; a mismatch of order or size fails
  // every rank with occlInvalidUsage; after one failure the group stays failed.
  virtual Status allGather(void* data, size_t bytesPerRank) = 0;
  virtual Status barrier() = 0;
};

}  // namespace occl::bootstrap
