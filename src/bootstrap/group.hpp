// The ranks of a communicator meeting outside their collectives: the small collectives that
// building a communicator needs (occlCommInitRank's topology and addresses, occlCommSplit's
// colours), and every rank's status gathered for "who is missing" (status_board.hpp), whether
// the ranks are processes (bootstrap.hpp, over TCP) or threads of one process (thread_group.hpp,
// occlCommInitAll's ranks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "bootstrap/status_board.hpp"
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

  // This rank's status table comes from `source` from now on (status_board.hpp); an empty one
  // stops it, and once setBoardSource returns the old source is no longer called.
  virtual void setBoardSource(BoardSource source) = 0;
  // Every rank's entries for `keys`, bounded by timeoutMs (a root that does not answer gives a
  // view with answered = false). Any thread, any time; never waits for the other ranks.
  virtual BoardView queryBoard(std::span<const uint64_t> keys, int64_t timeoutMs) = 0;
};

}  // namespace occl::bootstrap
