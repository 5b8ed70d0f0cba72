// In-process connectors: ranks that are threads of one process (occlCommInitAll) share FIFO
// memory from anonymous mappings. Pages are touched only when used, so a connector costs
// address space, not memory, until traffic flows.
#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/connector.hpp"
#include "transport/end_pairing.hpp"

namespace occl::transport {
namespace {

class AnonymousMemory : public ConnectorMemory {
 public:
  AnonymousMemory(void* base, size_t bytes) : bytes_(bytes) { base_ = base; }
  ~AnonymousMemory() override { munmap(base_, bytes_); }

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

 private:
  std::mutex mu_;
  EndPairing pairing_;
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

Status claimGeometry(FifoHeader* header, uint32_t nSlots, uint64_t slotBytes, const ConnectorKey& key) {
  uint64_t mine = fifoGeometry(nSlots, slotBytes), seen = 0;
  if (atomics::compareExchange(&header->geometry, seen, mine) || seen == mine) {
    atomics::fetchAdd(&header->attached, 1u);
    return Status::success();
  }
  return Status::error(
      occlInvalidUsage,
      absl::StrFormat("connector %s: the other end uses %d slots of %d bytes, this rank %d slots of %d bytes; "
                      "connectorSlots and connectorSlotBytes must be identical on all ranks",
                      key.describe(), seen >> 40, seen & ((1ull << 40) - 1), nSlots, slotBytes));
}

}  // namespace occl::transport
