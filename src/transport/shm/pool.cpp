#include "transport/shm/pool.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <thread>

#include "absl/strings/str_format.h"
#include "device/compat.hpp"
#include "transport/shm/pool_layout.hpp"

namespace occl::transport {

using namespace pool_layout;

Result<std::shared_ptr<ShmPool>> ShmPool::open(uint64_t nonce, int64_t timeoutMs) {
  const std::string name = absl::StrFormat("/occl-%016x-pool", nonce);
  bool creator = true;
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    creator = false;
    fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  }
  if (fd < 0) return sysError("shm_open", name);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  auto timedOut = [&] { return std::chrono::steady_clock::now() > deadline; };
  if (creator && ftruncate(fd, static_cast<off_t>(poolBytes())) != 0) {
    Status s = sysError("ftruncate", name);
    close(fd);
    shm_unlink(name.c_str());
    return s;
  }
  for (struct stat st {}; !creator;) {  // the creator sizes it before anything else
    if (fstat(fd, &st) != 0) {
      Status s = sysError("fstat", name);
      close(fd);
      return s;
    }
    if (static_cast<uint64_t>(st.st_size) == poolBytes()) break;
    if (st.st_size != 0) {
      close(fd);
      return Status::error(occlInvalidUsage, absl::StrFormat("shared memory %s has %d bytes, this process expects %d: "
                                                             "every rank of a job must run the same occl",
                                                             name, st.st_size, poolBytes()));
    }
    if (timedOut()) {
      close(fd);
      return Status::error(occlTimeout, absl::StrFormat("shared memory %s was never sized by its creator", name));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  void* base = mmap(nullptr, poolBytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = sysError("mmap", name);
    close(fd);
    if (creator) shm_unlink(name.c_str());
    return s;
  }
  std::shared_ptr<ShmPool> pool(new ShmPool(nonce));
  pool->header_ = static_cast<PoolHeader*>(base);
  pool->fd_ = fd;
  PoolHeader* h = pool->header_;
  if (creator) {
    // With no room for the header and the first table the pool goes: a process that opened it
    // meanwhile times out waiting for kReady.
    Status room = reservePages(h, sizeof(PoolHeader));
    if (room.ok()) room = reservePages(reinterpret_cast<char*>(h) + tableOffset(kMinTableLog2), tableOffset(kMinTableLog2));
    if (!room.ok()) {
      shm_unlink(name.c_str());
      return room.withContext("shared memory " + name);
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&h->mu, &attr);
    pthread_mutexattr_destroy(&attr);
    h->tableLog2 = kMinTableLog2;
    h->freeNodes = kNone;
    for (auto& c : h->classes) c = {0, kNone};
    atomics::storeRelease(&h->ready, kReady);
  }
  while (atomics::loadAcquire(&h->ready) != kReady) {
    if (timedOut())
      return Status::error(occlTimeout, absl::StrFormat("shared memory %s was never set up by its creator", name));
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return pool;
}

ShmPool::~ShmPool() {
  for (size_t a = 0; a < arenas_.size(); ++a) {
    if (arenas_[a] == nullptr) continue;
    munmap(arenas_[a], arenaBytes_[a]);
    close(arenaFds_[a]);
  }
  if (header_ != nullptr) munmap(header_, poolBytes());
  if (fd_ >= 0) close(fd_);
}

YieldBoard* ShmPool::yieldBoard() {
  std::call_once(boardOnce_, [this] {
    auto* board = reinterpret_cast<YieldBoard*>(reinterpret_cast<char*>(header_) + boardOffset());
    if (reservePages(board, sizeof(YieldBoard)).ok()) board_ = board;
  });
  return board_;
}

// A process that died holding the lock left at most one operation half done: an entry or a range
// lost to the pool, an entry twice in the table (an erase's shift), or a page of packed ranges
// counted once too often (never given back), never memory two connectors share.
Status ShmPool::lock() {
  const int r = pthread_mutex_lock(&header_->mu);
  if (r == 0) return Status::success();
  if (r == EOWNERDEAD) {
    pthread_mutex_consistent(&header_->mu);
    return Status::success();
  }
  return Status::error(occlSystemError, absl::StrFormat("locking the shm connector pool of job %016x failed: %s",
                                                        nonce_, std::strerror(r)));
}
void ShmPool::unlock() { pthread_mutex_unlock(&header_->mu); }

std::string ShmPool::arenaName(uint32_t arena) const { return absl::StrFormat("/occl-%016x-arena%d", nonce_, arena); }

// Under the lock. Maps an arena another process made, the first time a range of it is met here.
Result<char*> ShmPool::arenaBase(uint32_t arena) {
  if (arena < arenas_.size() && arenas_[arena] != nullptr) return arenas_[arena];
  const std::string name = arenaName(arena);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return sysError("shm_open", name);
  const size_t bytes = header_->arenaBytes[arena];
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status s = sysError("mmap", name);
    close(fd);
    return s;
  }
  if (arenas_.size() <= arena) {
    arenas_.resize(arena + 1, nullptr);
    arenaBytes_.resize(arena + 1, 0);
    arenaFds_.resize(arena + 1, -1);
  }
  arenas_[arena] = static_cast<char*>(base);
  arenaBytes_[arena] = bytes;
  arenaFds_[arena] = fd;
  return arenas_[arena];
}

Result<char*> ShmPool::at(uint64_t location) {
  Result<char*> base = arenaBase(arenaOf(location));
  if (!base.ok()) return base;
  return base.value() + offsetOf(location);
}

// Under the lock: moves the table to the region of twice its capacity. The switch is the one
// store of tableLog2 after the copy: a process that dies before it leaves the old table whole
// (and the next grow clears what it had copied).
Status ShmPool::grow() {
  PoolHeader* h = header_;
  if (h->tableLog2 == kMaxTableLog2)
    return Status::error(occlSystemError,
                         absl::StrFormat("the shm connector pool of job %016x holds %d connectors whose peer has not "
                                         "released them: no room for more",
                                         nonce_, h->entries));
  char* pool = reinterpret_cast<char*>(h);
  const uint32_t from = h->tableLog2;
  auto* fresh = reinterpret_cast<Entry*>(pool + tableOffset(from + 1));
  if (!punch(fd_, tableOffset(from + 1), tableOffset(from + 1)))
    return Status::systemError(absl::StrFormat("clearing the table of the shm connector pool of job %016x", nonce_),
                               errno);
  if (Status room = reservePages(fresh, tableOffset(from + 1)); !room.ok())
    return room.withContext(absl::StrFormat("shared memory /occl-%016x-pool", nonce_));
  const Entry* old = h->table();
  const uint64_t capacity = uint64_t{1} << from, mask = 2 * capacity - 1;
  for (uint64_t i = 0; i < capacity; ++i) {
    if (old[i].bytes == 0) continue;
    uint64_t j = hashOf(old[i].key) & mask;
    while (fresh[j].bytes != 0) j = (j + 1) & mask;
    fresh[j] = old[i];
  }
  atomics::storeRelaxed(&h->tableLog2, from + 1);  // read unlocked by prefetchSlot
  (void)punch(fd_, tableOffset(from), tableOffset(from));
  return Status::success();
}

// Before the lock: the line of `key`'s slot in the table (unless the table moves meanwhile). The
// table is spread over many pages, so a miss there is a TLB walk as well, which on a VM cost
// about a tenth of a registration's time, the lock held (2 processes, occl-register).
void ShmPool::prefetchSlot(const PoolKey& key) const {
  const uint32_t log2 = atomics::loadRelaxed(&header_->tableLog2);
  const uint64_t slot = hashOf(key) & ((uint64_t{1} << log2) - 1);
  __builtin_prefetch(reinterpret_cast<const char*>(header_) + tableOffset(log2) + slot * sizeof(Entry), 1);
}

Result<ShmPool::Range> ShmPool::attach(const PoolKey& key, size_t bytes, bool packed) {
  bytes = rangeBytes(bytes, packed);
  prefetchSlot(key);
  if (Status s = lock(); !s.ok()) return s;
  Result<Range> result = [&]() -> Result<Range> {
    PoolHeader* h = header_;
    uint64_t i = h->probe(key);
    Entry* t = h->table();
    if (t[i].bytes != 0) {
      Result<char*> base = at(t[i].location);
      if (!base.ok()) return base.status();
      return Range{base.value(), t[i].bytes, false};
    }
    if ((h->entries + 1) * 2 > (uint64_t{1} << h->tableLog2)) {
      if (Status s = grow(); !s.ok()) return s;
      i = h->probe(key);
      t = h->table();
    }
    Result<uint64_t> location = allocate(bytes);
    if (!location.ok()) return location.status();
    Result<char*> base = at(location.value());
    if (!base.ok()) return base.status();
    // Its first page now, where the connector's header goes: without room for it the range goes
    // back before any peer could see it. A packed range's page is there already (allocatePacked).
    if (Status room = bytes < pageBytes() ? Status::success() : reservePages(base.value(), pageBytes()); !room.ok()) {
      giveBack(location.value(), bytes);
      return room.withContext("shared memory " + arenaName(arenaOf(location.value())));
    }
    // `bytes` last: a process that dies half way leaves an empty slot, not a range at offset 0.
    t[i] = Entry{key, 0, location.value(), 0, 0, 0};
    t[i].bytes = bytes;
    h->entries += 1;
    return Range{base.value(), bytes, true};
  }();
  unlock();
  return result;
}

void ShmPool::release(const PoolKey& key) {
  prefetchSlot(key);
  if (!lock().ok()) return;  // only an unrecoverable lock: the range stays with the job
  PoolHeader* h = header_;
  const uint64_t i = h->probe(key);
  Entry& e = h->table()[i];
  if (e.bytes != 0 && ++e.released == 2) {
    const uint64_t location = e.location, bytes = e.bytes;
    h->erase(i);
    giveBack(location, bytes);
  }
  unlock();
}

ShmPool::Usage ShmPool::usage() {
  Usage u{};
  if (!lock().ok()) return u;
  u = Usage{header_->entries, header_->handedOut, header_->nArenas, 1u << header_->tableLog2};
  unlock();
  return u;
}

}  // namespace occl::transport
