// A communicator's registered collectives: collId -> Collective for the user's calls, table index
// -> Collective for the thread that fires callbacks, the pages of the daemon's collective table
// (CollTable) behind each index, and the allocation of indices. Two locks, one per side:
//
// - The communicator's submit lock (Comm::submitMu_, also the SQ's producer lock, so that a
//   submission's look-up and push take one lock) guards the collId map, the daemon's pages and
//   index allocation: every call here but byIndex is made under it. The registry does not own it.
// - indexMu() guards what the thread firing callbacks touches: the index pages, which add and
//   remove change under it (so that thread never finds a collective half registered or half
//   gone), and the collectives' callback slots. That thread calls byIndex under indexMu() alone.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/backend.hpp"
#include "device/coll_desc.hpp"
#include "host/collective.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// What a registration asked for, for a shrink to register it again.
struct Registration {
  uint64_t collId;
  occlCollDesc_t desc;    // desc.algorithm NULL: see `algorithm`
  std::string algorithm;  // as registered, "" for NULL
};

class CollRegistry {
 public:
  using Map = absl::flat_hash_map<uint64_t, std::unique_ptr<Collective>>;

  // Under the submit lock.
  Collective* find(uint64_t collId) const {
    auto it = byId_.find(collId);
    return it == byId_.end() ? nullptr : it->second.get();
  }
  bool contains(uint64_t collId) const { return byId_.contains(collId); }
  size_t size() const { return byId_.size(); }
  Map::const_iterator begin() const { return byId_.begin(); }
  Map::const_iterator end() const { return byId_.end(); }
  // Sorted by collId.
  std::vector<Registration> registrations() const;

  // Under the submit lock: a free table index, and its entry in daemon memory (`daemonTable`:
  // DaemonEnv::colls.pages), for Collective::publish. An index whose registration then fails goes
  // back by freeIndex; one that succeeds is given to add.
  Result<uint32_t> allocateIndex();
  void freeIndex(uint32_t index) { freeIndices_.push_back(index); }
  Result<CollDesc*> tableEntry(uint32_t index, backend::Backend& backend, CollDesc** daemonTable);
  // Under the submit lock; both take indexMu(). remove frees the collective's index for reuse.
  void add(uint64_t collId, uint32_t index, std::unique_ptr<Collective> coll);
  void remove(uint64_t collId);

  std::mutex& indexMu() { return indexMu_; }
  // Under indexMu(): the collective at a table index, or nullptr.
  Collective* byIndex(uint32_t index) const {
    const auto& page = hostPages_[index >> CollTable::kPageBits];
    return page ? (*page)[index & (CollTable::kPageSize - 1)] : nullptr;
  }

  // Once the daemon has stopped: frees the collectives and the daemon's pages.
  void clear(backend::Backend& backend);
  // A daemon whose stop timed out may still read the collectives' connectors, plans and tables:
  // they leak with the backend's own memory instead of being freed under it.
  void leak();

 private:
  void setByIndex(uint32_t index, Collective* c);

  Map byId_;
  std::mutex indexMu_;
  std::array<std::unique_ptr<std::array<Collective*, CollTable::kPageSize>>, CollTable::kMaxPages> hostPages_{};
  std::array<CollDesc*, CollTable::kMaxPages> daemonPages_{};  // what DaemonEnv::colls.pages holds
  uint32_t nextFreshIndex_ = 0;
  std::vector<uint32_t> freeIndices_;  // table indices of deregistered collectives, reused first
};

}  // namespace occl::host
