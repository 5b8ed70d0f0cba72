#include "host/coll_registry.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace occl::host {

std::vector<Registration> CollRegistry::registrations() const {
  std::vector<Registration> out;
  for (const auto& [collId, coll] : byId_) out.push_back(Registration{collId, coll->userDesc(), coll->requestedAlgorithm()});
  std::sort(out.begin(), out.end(), [](const Registration& a, const Registration& b) { return a.collId < b.collId; });
  return out;
}

// An index freed by deregistration is reused at once: no daemon block reads a CollDesc it has no
// part of (pollSubmissions, daemon.hpp), and every part of every submission of a deregistered
// collective has completed.
Result<uint32_t> CollRegistry::allocateIndex() {
  if (!freeIndices_.empty()) {
    const uint32_t index = freeIndices_.back();
    freeIndices_.pop_back();
    return index;
  }
  if (nextFreshIndex_ >= CollTable::kPageSize * CollTable::kMaxPages)
    return Status::error(occlInvalidUsage, absl::StrFormat("more than %d collectives registered at once",
                                                           CollTable::kPageSize * CollTable::kMaxPages));
  return nextFreshIndex_++;
}

// The table is daemon memory (the daemon reads an entry on every try): the host keeps its own
// list of the pages and writes through copies. A page's pointer is copied in before any SQE can
// name an index on it, so the daemon never reads a slot the host is writing.
Result<CollDesc*> CollRegistry::tableEntry(uint32_t index, backend::Backend& backend, CollDesc** daemonTable) {
  const uint32_t p = index >> CollTable::kPageBits;
  if (daemonPages_[p] == nullptr) {
    Result<void*> mem = backend.allocDaemon(sizeof(CollDesc) * CollTable::kPageSize);
    if (!mem.ok()) return mem.status().withContext("allocating a page of the collective table");
    auto* page = static_cast<CollDesc*>(mem.value());
    if (Status s = backend.copyToDaemon(&daemonTable[p], &page, sizeof(page)); !s.ok()) {
      backend.freeDaemon(page);
      return s.withContext("publishing a page of the collective table");
    }
    daemonPages_[p] = page;
  }
  return &daemonPages_[p][index & (CollTable::kPageSize - 1)];
}

void CollRegistry::add(uint64_t collId, uint32_t index, std::unique_ptr<Collective> coll) {
  std::lock_guard<std::mutex> lock(indexMu_);
  setByIndex(index, coll.get());
  byId_.emplace(collId, std::move(coll));
}

void CollRegistry::remove(uint64_t collId) {
  auto it = byId_.find(collId);
  std::lock_guard<std::mutex> lock(indexMu_);
  uint32_t index = it->second->index();
  setByIndex(index, nullptr);
  freeIndices_.push_back(index);
  byId_.erase(it);
}

void CollRegistry::setByIndex(uint32_t index, Collective* c) {
  auto& page = hostPages_[index >> CollTable::kPageBits];
  if (!page) page = std::make_unique<std::array<Collective*, CollTable::kPageSize>>();
  (*page)[index & (CollTable::kPageSize - 1)] = c;
}

void CollRegistry::clear(backend::Backend& backend) {
  byId_.clear();
  for (auto& page : hostPages_) page.reset();
  for (CollDesc*& page : daemonPages_) {
    if (page != nullptr) backend.freeDaemon(page);
    page = nullptr;
  }
}

void CollRegistry::leak() {
  for (auto& entry : byId_) (void)entry.second.release();
}

}  // namespace occl::host
