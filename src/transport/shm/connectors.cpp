// Shared-memory connectors between processes of one host, under the pairing rule of
// connector.hpp: the k-th attach of a key by one end meets, in the job's pool (shm/pool.hpp), the
// k-th attach by the other. Whichever end comes first takes a range of an arena, the other finds
// it there; once both have released it, the range serves another connector. A range whose peer
// never attached stays (what was sent waits there for the peer), so when the last connector and
// the factory of a communicator are gone, every name of the job's nonce left in /dev/shm (the pool
// and its arenas) is unlinked: after occlCommFinalize's barrier no peer can still attach, and
// without it the job is being torn down. Processes that still map them keep their memory. (A job
// none of whose ranks lives to destroy its communicator leaves its pool and arenas, as NCCL leaves
// its segments; only the pages of connectors not yet released by both ends are memory.)
#include <sys/mman.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "transport/shm/connectors.hpp"
#include "transport/shm/pool_access.hpp"

namespace occl::transport {
namespace {

class ShmMemory : public ConnectorMemory {
 public:
  ShmMemory(char* base, size_t bytes, std::shared_ptr<ShmPool> pool, const PoolKey& key,
            std::shared_ptr<JobSegments> segments)
      : bytes_(bytes), pool_(std::move(pool)), key_(key), segments_(std::move(segments)) {
    base_ = base;
  }
  // The range goes back to the pool once the peer has let go too; until the peer attaches it
  // keeps what was sent, for the peer to find.
  ~ShmMemory() override { pool_->release(key_); }
  // Each process has its own page tables: both ends map in what they use, once the pages exist.
  // The used ranges come in address order; those that share or touch pages are reserved in one
  // call (a small collective's connector is a page or part of one: one call, not one per slot).
  Status populate(ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot) override {
    const uintptr_t page = pageBytes();
    uintptr_t from = 0, to = 0;  // pages not reserved yet
    Status room = Status::success();
    forEachUsedRange(base_, nSlots, slotBytes, bytesPerSlot, [&](char* start, size_t bytes) {
      if (bytes == 0) return;
      const uintptr_t first = reinterpret_cast<uintptr_t>(start) / page * page;
      const uintptr_t end = (reinterpret_cast<uintptr_t>(start) + bytes + page - 1) / page * page;
      if (to != 0 && first <= to) {
        to = std::max(to, end);
        return;
      }
      if (to != 0 && room.ok()) room = reservePages(reinterpret_cast<void*>(from), to - from);
      from = first;
      to = end;
    });
    if (to != 0 && room.ok()) room = reservePages(reinterpret_cast<void*>(from), to - from);
    if (!room.ok()) return room.withContext(absl::StrFormat("shared memory of connector %s", key_.connector.describe()));
    populateHostSlots(base_, nSlots, slotBytes, bytesPerSlot, end == ConnectorEnd::Sender);
    return Status::success();
  }
  // Punches out every page after the first (which holds the header) from the range: the peer
  // that attaches later finds the poison and fails; tmpfs pages were all that was left of it. A
  // range of a page or less (packed ones) keeps its bytes until both ends have released it.
  void discard() override {
    if (bytes_ > pageBytes()) (void)madvise(static_cast<char*>(base_) + pageBytes(), bytes_ - pageBytes(), MADV_REMOVE);
  }

 private:
  size_t bytes_;  // rangeBytes
  std::shared_ptr<ShmPool> pool_;
  PoolKey key_;
  std::shared_ptr<JobSegments> segments_;  // unlinks the pool's names after the last user
};

class ShmFactory : public ConnectorFactory {
 public:
  ShmFactory(uint64_t nonce, int64_t timeoutMs, ShmRanges ranges)
      : nonce_(nonce), packed_(ranges == ShmRanges::Packed), access_(nonce, timeoutMs) {}

  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    Result<std::shared_ptr<ShmPool>> pool = access_.pool();
    if (!pool.ok()) return pool.status();
    const PoolKey poolKey{key, access_.nextGeneration(key, end)};
    const size_t bytes = fifoBytes(nSlots, slotBytes);
    Result<ShmPool::Range> range = pool.value()->attach(poolKey, bytes, packed_);
    if (!range.ok()) return range.status();
    auto memory =
        std::make_shared<ShmMemory>(range.value().base, range.value().bytes, pool.value(), poolKey, segments_);
    if (range.value().bytes != rangeBytes(bytes, packed_)) {
      // The other end's FIFO is another size: its header is all this end may touch.
      (void)memory->poison(occlInvalidUsage, 0);
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("connector %s: the other end's FIFO takes %d bytes, this rank's %d: "
                                           "the collective (its count, datatype and algorithm) and connectorSlots and "
                                           "connectorSlotBytes decide it, and must be the same on all ranks; so must "
                                           "the backend of the ranks of one host (a CUDA rank takes whole pages)",
                                           key.describe(), range.value().bytes, rangeBytes(bytes, packed_)));
    }
    Status geometry = claimGeometry(memory->header(), nSlots, slotBytes, key);
    if (!geometry.ok()) return geometry;
    return std::shared_ptr<ConnectorMemory>(memory);
  }
  const char* name() const override { return "shm"; }
  // In the pool, which this opens if no attach has yet; nullptr where it cannot be opened (the
  // first attach will say why).
  YieldBoard* yieldBoard() override {
    Result<std::shared_ptr<ShmPool>> pool = access_.pool();
    return pool.ok() ? pool.value()->yieldBoard() : nullptr;
  }

 private:
  uint64_t nonce_;
  bool packed_;
  std::shared_ptr<JobSegments> segments_ = std::make_shared<JobSegments>(nonce_);
  PoolAccess access_;
};

}  // namespace

std::unique_ptr<ConnectorFactory> makeShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs, ShmRanges ranges) {
  return std::make_unique<ShmFactory>(jobNonce, attachTimeoutMs, ranges);
}

}  // namespace occl::transport
