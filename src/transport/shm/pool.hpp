// Where the shm connectors of a job's processes on one host live (transport/shm/connectors.cpp): one POSIX
// shm segment, the pool, pairs the ends, and a few large sparse segments, the arenas, hold the
// connectors. A connector per segment cost a mapping each, and Linux allows a process 65,530
// (vm.max_map_count): two processes failed to register their 32,682nd AllReduce. Now a process
// maps the pool and each arena once, however many connectors it registers.
//
// The pool holds, under a process-shared robust mutex:
//   - a table from (connector key, generation) to the connector's range, an entry from the first
//     end's attach until both ends have released it (the pairing rule of connector.hpp: whichever
//     end comes first takes a range, the other finds it);
//   - the arenas' sizes, the bump offset in the newest one, and lists of released ranges by size.
// The table is open addressing with linear probing; a table of capacity C lies at byte C * 64 of
// the pool, so growing moves it to a region never used before, and the old region's pages go
// back. Nothing of this is on a collective's path: only registration and deregistration lock.
//
// Last in the pool, the ranks' yield board (queues/yield_board.hpp): a cache line per rank.
//
// Memory: only what is touched takes /dev/shm pages (the pool and the arenas are sparse files).
// A range is whole pages, or, packed (rangeBytes), a power of two from 256 bytes to half a page
// in a page that holds ranges of that size only: a small collective's connector (832 bytes for a
// one-element AllReduce) takes a quarter of a page, not a whole one. A range both ends released
// goes into the list of its size (nodes in the pool, 16 bytes each) and serves the next connector
// of that size. It reads as zeroes there: a whole-pages range gives its pages back, a packed one
// is cleared, and its page goes back once none of its ranges is in use (a count per arena page in
// the pool). The packed sizes (4 of them with 4 KiB pages) keep lists of their own for good.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "transport/connector.hpp"
#include "transport/shm/pages.hpp"
#include "transport/shm/pool_key.hpp"
#include "util/status.hpp"

namespace occl::transport {


struct PoolHeader;

class ShmPool {
 public:
  // Maps the job's pool, creating it where this process is the first; a creator still setting it
  // up is waited for up to `timeoutMs`.
  static Result<std::shared_ptr<ShmPool>> open(uint64_t nonce, int64_t timeoutMs);
  ~ShmPool();
  ShmPool(const ShmPool&) = delete;
  ShmPool& operator=(const ShmPool&) = delete;

  struct Range {
    char* base;    // in this process's mapping of an arena, aligned to `bytes` or to a page
    size_t bytes;  // rangeBytes(what the end that came first asked for)
    bool created;  // this end came first: the range is new and zeroed
  };
  // This end's range for `key`: the one the other end took, if it came first (its `bytes` may
  // differ from this end's: the ends disagree, which the caller reports), otherwise a zeroed
  // range of rangeBytes(bytes, packed) whose first page is reserved in /dev/shm (occlSystemError
  // where there is no room for it; a packed range's whole page is). Either way this end releases
  // it once.
  Result<Range> attach(const PoolKey& key, size_t bytes, bool packed);
  // This end is done with `key`'s range; after both ends, it goes back to the pool.
  void release(const PoolKey& key);

  // The yield board of the communicator's ranks of this host (queues/yield_board.hpp), in the pool,
  // or nullptr where /dev/shm has no room for its pages: they are reserved (reservePages) at the
  // first call, as a connector's are, so that a yield counted on a board never touches a page a
  // full /dev/shm cannot give (a SIGBUS). Without a board the ranks' waits yield as before.
  YieldBoard* yieldBoard();

  // What the pool holds now (for tests).
  struct Usage {
    uint64_t connectors;    // table entries: ranges attached by one end or both, not yet released by both
    uint64_t arenaBytes;    // bytes the arenas have handed out, released ranges included
    uint32_t arenas;
    uint32_t tableCapacity;
  };
  Usage usage();


 private:
  explicit ShmPool(uint64_t nonce) : nonce_(nonce) {}
  Status lock();
  void unlock();
  void prefetchSlot(const PoolKey& key) const;
  std::string arenaName(uint32_t arena) const;
  Result<char*> arenaBase(uint32_t arena);
  Result<char*> at(uint64_t location);
  // The arenas' ranges (pool_ranges.cpp), under the lock.
  Result<uint64_t> allocate(size_t bytes);
  Result<uint64_t> allocatePacked(size_t bytes);
  void giveBack(uint64_t location, uint64_t bytes);
  void list(uint64_t location, uint64_t bytes);
  uint64_t unlist(uint64_t bytes);
  uint16_t* pageUses(uint64_t location);
  Status grow();

  uint64_t nonce_;
  PoolHeader* header_ = nullptr;  // the pool's mapping (shm/pool_layout.hpp)
  int fd_ = -1;
  // This process's mappings of the arenas, by index; changed only under the pool's lock.
  std::vector<char*> arenas_;
  std::vector<size_t> arenaBytes_;
  std::vector<int> arenaFds_;
  std::once_flag boardOnce_;
  YieldBoard* board_ = nullptr;  // yieldBoard(), once its pages are reserved
};

}  // namespace occl::transport
