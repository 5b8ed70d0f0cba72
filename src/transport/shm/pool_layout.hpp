// The layout of a job's shm pool segment (pool.hpp says what it holds): its header, the table of
// ranges, the free lists' nodes, the page-use counts and the yield board, at fixed offsets that
// every process computes alike. Shared by pool.cpp (the table) and pool_ranges.cpp (the arenas'
// ranges); nothing else includes it. (ShmPool holds a PoolHeader* to its mapping.)
#pragma once

#include <fcntl.h>
#include <pthread.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "queues/yield_board.hpp"
#include "transport/shm/pool_key.hpp"
#include "util/status.hpp"

namespace occl::transport {
namespace pool_layout {

constexpr uint64_t kReady = 0x6f63636c706f6f33;  // "occlpoo3": the layout below, set up
constexpr uint32_t kMinTableLog2 = 8;
constexpr uint32_t kMaxTableLog2 = 22;  // 4M entries: ends waiting for their peer, at most
constexpr uint32_t kMaxArenas = 64;
constexpr uint32_t kSizeClasses = 32;
constexpr uint64_t kArenaBytes = uint64_t{16} << 30;  // sparse: only what is touched is memory
constexpr uint64_t kNone = ~uint64_t{0};
constexpr int kOffsetBits = 48;

// One connector's range; bytes == 0 marks an empty slot of the table.
struct Entry {
  PoolKey key;
  uint64_t bytes;
  uint64_t location;  // arena << kOffsetBits | offset in it
  uint32_t released;  // ends that let go of it
  uint32_t unused;
  uint64_t reserved;
};
static_assert(sizeof(Entry) == 64, "a table of capacity C lies at byte C * 64 of the pool");

// The table of capacity 2^log2 lies at [2^log2 * 64, 2^(log2+1) * 64): regions of different
// capacities never overlap, and the smallest starts after the header's page.
constexpr uint64_t tableOffset(uint32_t log2) { return (uint64_t{1} << log2) * sizeof(Entry); }
// Released ranges, listed by size: nodes of the lists, after the tables.
struct FreeNode {
  uint64_t location;
  uint64_t next;  // node index, or kNone
};
constexpr uint64_t kNodesOffset = tableOffset(kMaxTableLog2 + 1);
constexpr uint64_t kMaxNodes = uint64_t{1} << kMaxTableLog2;
// Then, for each arena page that holds packed ranges, how many of them are in use: a uint16_t per
// page of kArenaBytes per arena (an arena larger than that holds one range of whole pages only).
constexpr uint64_t kUsesOffset = kNodesOffset + kMaxNodes * sizeof(FreeNode);
inline uint64_t pagesPerArena() { return kArenaBytes / pageBytes(); }
// Last, the ranks' yield board (queues/yield_board.hpp), zeroes until a rank yields.
inline uint64_t boardOffset() { return kUsesOffset + kMaxArenas * pagesPerArena() * sizeof(uint16_t); }
static_assert(kUsesOffset % alignof(YieldBoard) == 0, "the board after the uses stays aligned");
inline uint64_t poolBytes() { return boardOffset() + sizeof(YieldBoard); }

// The same in every process (absl::Hash is seeded per process).
inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}
inline uint64_t hashOf(const PoolKey& k) {
  const ConnectorKey& c = k.connector;
  auto pair = [](int32_t high, int32_t low) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(high)) << 32) | static_cast<uint32_t>(low);
  };
  return mix(mix(mix(mix(0, c.collId), pair(c.sender, c.receiver)), pair(c.channel, c.form)), k.generation);
}

// A range's place: which arena, and where in it.
constexpr uint64_t locationOf(uint32_t arena, uint64_t offset) { return (uint64_t{arena} << kOffsetBits) | offset; }
constexpr uint32_t arenaOf(uint64_t location) { return static_cast<uint32_t>(location >> kOffsetBits); }
constexpr uint64_t offsetOf(uint64_t location) { return location & ((uint64_t{1} << kOffsetBits) - 1); }

// Gives the pages of [offset, offset + bytes) of a segment back to /dev/shm: they read as zeroes
// after, in every process. A hole punched in the file, where MADV_REMOVE would fail on a locked
// mapping (mlockall) and leave the old contents.
inline bool punch(int fd, uint64_t offset, uint64_t bytes) {
  return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                   static_cast<off_t>(bytes)) == 0;
}

inline Status sysError(const std::string& what, const std::string& name) {
  return Status::error(occlSystemError, absl::StrFormat("%s of shared memory %s failed: %s", what, name,
                                                        std::strerror(errno)));
}

}  // namespace pool_layout

struct PoolHeader {
  using Entry = pool_layout::Entry;
  using FreeNode = pool_layout::FreeNode;
  uint64_t ready;  // kReady, stored last by the creator
  pthread_mutex_t mu;
  // Under mu:
  uint32_t tableLog2;
  uint32_t nArenas;
  uint64_t entries;
  uint64_t arenaBytes[pool_layout::kMaxArenas];
  uint64_t bump;  // bytes handed out of the newest arena
  uint64_t handedOut;
  uint64_t nodes;      // FreeNodes ever used
  uint64_t freeNodes;  // the first unused one, or kNone
  struct SizeClass {
    uint64_t bytes;  // 0: unused
    uint64_t head;   // the node of the last released range of that size, or kNone
  } classes[pool_layout::kSizeClasses];

  FreeNode* node(uint64_t i) {
    return reinterpret_cast<FreeNode*>(reinterpret_cast<char*>(this) + pool_layout::kNodesOffset) + i;
  }

  Entry* table() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + pool_layout::tableOffset(tableLog2)); }
  uint64_t mask() const { return (uint64_t{1} << tableLog2) - 1; }
  // The slot of `key`, or of the empty slot where it would go.
  uint64_t probe(const PoolKey& key) {
    Entry* t = table();
    uint64_t i = pool_layout::hashOf(key) & mask();
    while (t[i].bytes != 0 && !(t[i].key == key)) i = (i + 1) & mask();
    return i;
  }
  // Linear probing's deletion: later entries of the cluster that could sit at `i` move back, so
  // a probe never meets a hole before its key.
  void erase(uint64_t i) {
    Entry* t = table();
    for (uint64_t j = (i + 1) & mask(); t[j].bytes != 0; j = (j + 1) & mask()) {
      const uint64_t home = pool_layout::hashOf(t[j].key) & mask();
      const bool staysAtJ = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (staysAtJ) continue;
      t[i] = t[j];
      i = j;
    }
    t[i] = Entry{};
    entries -= 1;
  }
};
static_assert(sizeof(PoolHeader) <= pool_layout::tableOffset(pool_layout::kMinTableLog2),
              "the header lies below the first table");

}  // namespace occl::transport
