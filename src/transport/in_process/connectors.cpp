// In-process connectors: ranks that are threads of one process (occlCommInitAll) share FIFO
// memory from anonymous mappings. Registration maps in only the part of each slot its collective's
// tiles use (ConnectorMemory::populate), so a connector costs address space beyond that.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/in_process/connectors.hpp"
#include "transport/end_pairing.hpp"

namespace occl::transport {
namespace {

class AnonymousMemory : public ConnectorMemory {
 public:
  AnonymousMemory(void* base, size_t bytes) : bytes_(bytes) { base_ = base; }
  ~AnonymousMemory() override { munmap(base_, bytes_); }
  // Threads share the page tables: the sender maps in what it will fill, before its daemon runs;
  // a touch by the receiver could meet the sender's daemon already writing.
  Status populate(ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot) override {
    if (end == ConnectorEnd::Sender) populateHostSlots(base_, nSlots, slotBytes, bytesPerSlot, true);
    return Status::success();
  }

 private:
  size_t bytes_;
};

}  // namespace

class InProcessWorld {
 public:
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::shared_ptr<ConnectorMemory> region = pairing_.take(key, end)) {
      Status geometry = claimGeometry(region->header(), nSlots, slotBytes, key);
      if (!geometry.ok()) return geometry;
      return region;
    }
    size_t bytes = fifoBytes(nSlots, slotBytes);
    void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      return Status::error(occlSystemError, absl::StrFormat("mmap of %d bytes for connector %s failed: %s",
                                                            bytes, key.describe(), std::strerror(errno)));
    }
    auto region = std::make_shared<AnonymousMemory>(base, bytes);
    Status geometry = claimGeometry(region->header(), nSlots, slotBytes, key);
    if (!geometry.ok()) return geometry;
    pairing_.hold(key, end, region);
    return std::shared_ptr<ConnectorMemory>(region);
  }

  // The ranks' yield board: 64 KiB a world, zeroed (no thread in a yield).
  YieldBoard* yieldBoard() { return board_.get(); }

 private:
  std::mutex mu_;
  EndPairing pairing_;
  std::unique_ptr<YieldBoard> board_ = std::make_unique<YieldBoard>();
};

namespace {

class InProcessFactory : public ConnectorFactory {
 public:
  explicit InProcessFactory(std::shared_ptr<InProcessWorld> world) : world_(std::move(world)) {}
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    return world_->attach(key, end, nSlots, slotBytes);
  }
  const char* name() const override { return "in-process"; }
  YieldBoard* yieldBoard() override { return world_->yieldBoard(); }

 private:
  std::shared_ptr<InProcessWorld> world_;
};

}  // namespace

std::shared_ptr<InProcessWorld> makeInProcessWorld() { return std::make_shared<InProcessWorld>(); }

std::unique_ptr<ConnectorFactory> makeInProcessFactory(std::shared_ptr<InProcessWorld> world) {
  return std::make_unique<InProcessFactory>(std::move(world));
}

std::string ConnectorKey::describe() const {
  if (form == 0) return absl::StrFormat("(coll 0x%x, %d -> %d, channel %d)", collId, sender, receiver, channel);
  return absl::StrFormat("(coll 0x%x, %d -> %d, channel %d, form %d)", collId, sender, receiver, channel, form);
}

void populateHostSlots(void* base, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot, bool writer) {
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  auto touch = [writer](char* from, size_t bytes) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(from) + bytes;
    for (uintptr_t p = reinterpret_cast<uintptr_t>(from) / page * page; p < end; p += page) {
      // The page's first word, or the first word of the range where the page starts before it.
      auto* word = reinterpret_cast<uint64_t*>(std::max(p, reinterpret_cast<uintptr_t>(from)));
      if (writer) atomics::fetchAdd(word, uint64_t{0});
      else (void)atomics::loadRelaxed(word);
    }
  };
  auto* header = static_cast<FifoHeader*>(base);
  atomics::fetchAdd(&header->attached, 0u);  // the header's page, which every end writes
  forEachUsedRange(base, nSlots, slotBytes, bytesPerSlot, touch);
}

Status claimGeometry(FifoHeader* header, uint32_t nSlots, uint64_t slotBytes, const ConnectorKey& key) {
  uint64_t mine = fifoGeometry(nSlots, slotBytes), seen = 0;
  if (atomics::compareExchange(&header->geometry, seen, mine) || seen == mine) {
    atomics::fetchAdd(&header->attached, 1u);
    return Status::success();
  }
  (void)poisonHeader(header, occlInvalidUsage, 0);  // the other end, attached already, fails instead of waiting
  return Status::error(
      occlInvalidUsage,
      absl::StrFormat("connector %s: the other end uses %d slots of %d bytes, this rank %d slots of %d bytes; "
                      "the collective (its count, datatype and algorithm) and connectorSlots and connectorSlotBytes decide "
                      "it, and must be the same on all ranks",
                      key.describe(), seen >> 40, seen & ((1ull << 40) - 1), nSlots, slotBytes));
}

}  // namespace occl::transport
