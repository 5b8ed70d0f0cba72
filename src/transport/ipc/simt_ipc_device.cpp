// The simt backend's IPC device memory (ipc_device.hpp): one memfd arena per process, handed out
// in whole pages, first fit. A freed range's pages go back (a hole punched in the memfd), so it
// reads as zeroes in every process that maps the arena. Peers map the whole arena once
// (importPools); an Export is the range's offset in it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "device/compat.hpp"
#include "device/simt_memory.hpp"
#include "transport/ipc/ipc_device.hpp"

namespace occl::transport::ipc {
namespace {

namespace simt = exec::simt;

size_t pageBytes() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

class SimtIpcDevice : public IpcDevice {
 public:
  SimtIpcDevice(int rank, char* arena, size_t bytes, int fd) : rank_(rank), arena_(arena), arenaBytes_(bytes), fd_(fd) {
    free_[0] = bytes;
  }
  ~SimtIpcDevice() override {
    for (const auto& [p, local] : registered_) (local ? simt::removeDeviceRange : simt::removePeerRange)(p);
    for (const auto& [peer, mapping] : imports_) simt::unmapSharedDeviceMemory(mapping.first, mapping.second);
    simt::unmapSharedDeviceMemory(arena_, arenaBytes_);
    close(fd_);
  }

  const char* name() const override { return "simt-ipc"; }

  Result<std::vector<PoolFd>> exportPools(int) override {
    const int copy = fcntl(fd_, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) return Status::systemError("dup of the simt IPC arena's memfd", errno);
    return std::vector<PoolFd>{{0, copy}};
  }

  Status importPools(int peer, const std::vector<PoolFd>& pools) override {
    Status s = importArena(peer, pools);
    for (const PoolFd& p : pools) close(p.fd);
    return s;
  }

  Result<std::pair<void*, Export>> allocate(size_t bytes, int lieOn) override {
    const size_t rounded = (bytes + pageBytes() - 1) / pageBytes() * pageBytes();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.begin();
    while (it != free_.end() && it->second < rounded) ++it;
    if (it == free_.end())
      return Status::error(occlSystemError,
                           absl::StrFormat("the simt IPC arena of rank %d (%d bytes) has no %d bytes left for a "
                                           "connector: register fewer collectives at once",
                                           rank_, arenaBytes_, rounded));
    const uint64_t offset = it->first, left = it->second - rounded;
    free_.erase(it);
    if (left > 0) free_[offset + rounded] = left;
    used_[offset] = rounded;
    char* p = arena_ + offset;
    registerRange(p, rounded, lieOn == rank_);
    Export e{};
    e.bytes = rounded;
    std::memcpy(e.data, &offset, sizeof(offset));
    return std::pair<void*, Export>{p, e};
  }

  void free(void* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    const uint64_t offset = static_cast<uint64_t>(static_cast<char*>(p) - arena_);
    auto used = used_.find(offset);
    if (used == used_.end()) return;
    const uint64_t bytes = used->second;
    used_.erase(used);
    unregisterRange(p);
    // Zeroes for every process that maps it, and the pages back; a range whose hole cannot be
    // punched is never handed out again.
    if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(bytes)) != 0)
      return;
    auto next = free_.lower_bound(offset);
    uint64_t start = offset, length = bytes;
    if (next != free_.begin()) {
      auto before = std::prev(next);
      if (before->first + before->second == start) {
        start = before->first;
        length += before->second;
        free_.erase(before);
      }
    }
    if (next != free_.end() && next->first == offset + bytes) {
      length += next->second;
      free_.erase(next);
    }
    free_[start] = length;
  }

  Result<void*> importPointer(int owner, const Export& e, int lieOn) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = imports_.find(owner);
    if (it == imports_.end())
      return Status::error(occlInternalError,
                           absl::StrFormat("rank %d has not imported rank %d's simt IPC arena", rank_, owner));
    uint64_t offset = 0;
    std::memcpy(&offset, e.data, sizeof(offset));
    if (e.pool != 0 || offset > it->second.second || e.bytes > it->second.second - offset)
      return Status::error(occlInternalError,
                           absl::StrFormat("rank %d's simt IPC export (pool %d, offset %d, %d bytes) lies outside its "
                                           "%d-byte arena",
                                           owner, e.pool, offset, e.bytes, it->second.second));
    char* p = it->second.first + offset;
    registerRange(p, e.bytes, lieOn == rank_);
    return static_cast<void*>(p);
  }

  void closeImport(void* p) override {
    std::lock_guard<std::mutex> lock(mu_);
    unregisterRange(p);
  }

  // Words the daemon reads and writes atomically are copied as atomic words, as a GPU's copy
  // engine writes them whole (and ThreadSanitizer sees no race with the lanes).
  Status copyIn(void* device, const void* host, size_t bytes) override {
    simt::DeviceAccess access;
    if (bytes == 8 && reinterpret_cast<uintptr_t>(device) % 8 == 0) {
      uint64_t v;
      std::memcpy(&v, host, 8);
      atomics::storeRelease(static_cast<uint64_t*>(device), v);
    } else if (bytes == 4 && reinterpret_cast<uintptr_t>(device) % 4 == 0) {
      uint32_t v;
      std::memcpy(&v, host, 4);
      atomics::storeRelease(static_cast<uint32_t*>(device), v);
    } else {
      std::memcpy(device, host, bytes);
    }
    return Status::success();
  }
  Status copyOut(void* host, const void* device, size_t bytes) override {
    simt::DeviceAccess access;
    if (bytes == 8 && reinterpret_cast<uintptr_t>(device) % 8 == 0) {
      const uint64_t v = atomics::loadAcquire(static_cast<const uint64_t*>(device));
      std::memcpy(host, &v, 8);
    } else if (bytes == 4 && reinterpret_cast<uintptr_t>(device) % 4 == 0) {
      const uint32_t v = atomics::loadAcquire(static_cast<const uint32_t*>(device));
      std::memcpy(host, &v, 4);
    } else {
      std::memcpy(host, device, bytes);
    }
    return Status::success();
  }

 private:
  // Maps `peer`'s arena, the one pool it exports.
  Status importArena(int peer, const std::vector<PoolFd>& pools) {
    if (pools.size() != 1 || pools[0].pool != 0)
      return Status::error(occlInternalError,
                           absl::StrFormat("rank %d sent %d simt IPC pools: expected its one arena", peer, pools.size()));
    struct stat st {};
    if (fstat(pools[0].fd, &st) != 0) return Status::systemError("fstat of a peer's simt IPC arena", errno);
    const size_t bytes = static_cast<size_t>(st.st_size);
    void* base = simt::mapSharedDeviceMemory(pools[0].fd, bytes);
    if (base == nullptr) return Status::systemError(absl::StrFormat("mapping rank %d's simt IPC arena", peer), errno);
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = imports_.try_emplace(peer, static_cast<char*>(base), bytes);
    if (!added) {
      simt::unmapSharedDeviceMemory(base, bytes);
      return Status::error(occlInternalError, absl::StrFormat("rank %d's simt IPC arena imported twice", peer));
    }
    return Status::success();
  }
  // Under mu_.
  void registerRange(void* p, size_t bytes, bool local) {
    (local ? simt::addDeviceRange : simt::addPeerRange)(p, bytes);
    registered_[p] = local;
  }
  void unregisterRange(void* p) {
    auto it = registered_.find(p);
    if (it == registered_.end()) return;
    (it->second ? simt::removeDeviceRange : simt::removePeerRange)(p);
    registered_.erase(it);
  }

  const int rank_;
  char* const arena_;
  const size_t arenaBytes_;
  const int fd_;
  std::mutex mu_;
  std::map<uint64_t, uint64_t> free_;  // offset -> bytes, coalesced
  std::map<uint64_t, uint64_t> used_;  // offset -> bytes
  absl::flat_hash_map<int, std::pair<char*, size_t>> imports_;  // peer -> its arena, mapped here
  absl::flat_hash_map<void*, bool> registered_;                 // ranges registered: as this GPU's (true)
};

}  // namespace

Result<std::shared_ptr<IpcDevice>> makeSimtIpcDevice(int rank, size_t arenaBytes) {
  int fd = -1;
  void* arena = exec::simt::createSharedDeviceMemory(arenaBytes, &fd);
  if (arena == nullptr)
    return Status::systemError(absl::StrFormat("a %d-byte simt IPC arena (memfd)", arenaBytes), errno);
  return std::shared_ptr<IpcDevice>(std::make_shared<SimtIpcDevice>(rank, static_cast<char*>(arena), arenaBytes, fd));
}

}  // namespace occl::transport::ipc
