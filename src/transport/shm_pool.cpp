#include "transport/shm_pool.hpp"

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

namespace occl::transport {

size_t pageBytes() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

size_t wholePages(size_t bytes) { return (bytes + pageBytes() - 1) / pageBytes() * pageBytes(); }

namespace {
constexpr size_t kMinPackedBytes = 256;  // kFifoDataOffset's alignment
}  // namespace

size_t rangeBytes(size_t bytes, bool packed) {
  if (!packed || bytes > pageBytes() / 2) return wholePages(bytes);
  size_t range = kMinPackedBytes;
  while (range < bytes) range *= 2;
  return range;
}

Result<std::shared_ptr<ShmPool>> PoolAccess::pool() {
  std::lock_guard<std::mutex> lock(mu_);
  if (pool_ == nullptr) {
    Result<std::shared_ptr<ShmPool>> opened = ShmPool::open(nonce_, timeoutMs_);
    if (!opened.ok()) return opened.status();
    pool_ = opened.value();
  }
  return pool_;
}

uint64_t PoolAccess::nextGeneration(const ConnectorKey& key, ConnectorEnd end) {
  std::lock_guard<std::mutex> lock(mu_);
  return generations_[std::pair{key, end}]++;
}

// Every segment of a job is named /occl-<nonce>-...: glibc's shm_open keeps it as /dev/shm/occl-...
JobSegments::JobSegments(uint64_t nonce) : prefix_(absl::StrFormat("occl-%016x-", nonce)) {}

JobSegments::~JobSegments() {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/dev/shm", ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (file.rfind(prefix_, 0) == 0) shm_unlink(("/" + file).c_str());
  }
}

Status noRoomInDevShm(uint64_t bytes, const std::string& why) {
  struct statvfs fs {};
  const std::string room = statvfs("/dev/shm", &fs) == 0
                               ? absl::StrFormat("%d of its %d bytes free", static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize,
                                                 static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize)
                               : std::string("its size unknown");
  return Status::error(occlSystemError,
                       absl::StrFormat("/dev/shm could not give the %d bytes of pages it needs (%s; %s): "
                                       "give /dev/shm more (docker run --shm-size, a larger tmpfs) or register fewer "
                                       "collectives",
                                       bytes, why, room));
}

Status reservePages(void* from, size_t bytes) {
  const uintptr_t page = pageBytes();
  const uintptr_t start = reinterpret_cast<uintptr_t>(from) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(from) + bytes + page - 1) / page * page;
  if (bytes == 0 || madvise(reinterpret_cast<void*>(start), end - start, MADV_POPULATE_WRITE) == 0 || errno == EINVAL)
    return Status::success();
  // EFAULT: a touch would have raised SIGBUS, i.e. the tmpfs is full (or its memory limit reached).
  return noRoomInDevShm(end - start, errno == EFAULT ? "it is full" : std::strerror(errno));
}

namespace {

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
uint64_t pagesPerArena() { return kArenaBytes / pageBytes(); }
// Last, the ranks' yield board (queues/yield_board.hpp), zeroes until a rank yields.
uint64_t boardOffset() { return kUsesOffset + kMaxArenas * pagesPerArena() * sizeof(uint16_t); }
static_assert(kUsesOffset % alignof(YieldBoard) == 0, "the board after the uses stays aligned");
uint64_t poolBytes() { return boardOffset() + sizeof(YieldBoard); }

// The same in every process (absl::Hash is seeded per process).
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h ^= h >> 31;
  h *= 0xbf58476d1ce4e5b9ull;
  return h ^ (h >> 29);
}
uint64_t hashOf(const PoolKey& k) {
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
bool punch(int fd, uint64_t offset, uint64_t bytes) {
  return fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                   static_cast<off_t>(bytes)) == 0;
}

Status sysError(const std::string& what, const std::string& name) {
  return Status::error(occlSystemError, absl::StrFormat("%s of shared memory %s failed: %s", what, name,
                                                        std::strerror(errno)));
}

}  // namespace

struct ShmPool::Header {
  uint64_t ready;  // kReady, stored last by the creator
  pthread_mutex_t mu;
  // Under mu:
  uint32_t tableLog2;
  uint32_t nArenas;
  uint64_t entries;
  uint64_t arenaBytes[kMaxArenas];
  uint64_t bump;  // bytes handed out of the newest arena
  uint64_t handedOut;
  uint64_t nodes;      // FreeNodes ever used
  uint64_t freeNodes;  // the first unused one, or kNone
  struct SizeClass {
    uint64_t bytes;  // 0: unused
    uint64_t head;   // the node of the last released range of that size, or kNone
  } classes[kSizeClasses];

  FreeNode* node(uint64_t i) {
    return reinterpret_cast<FreeNode*>(reinterpret_cast<char*>(this) + kNodesOffset) + i;
  }

  Entry* table() { return reinterpret_cast<Entry*>(reinterpret_cast<char*>(this) + tableOffset(tableLog2)); }
  uint64_t mask() const { return (uint64_t{1} << tableLog2) - 1; }
  // The slot of `key`, or of the empty slot where it would go.
  uint64_t probe(const PoolKey& key) {
    Entry* t = table();
    uint64_t i = hashOf(key) & mask();
    while (t[i].bytes != 0 && !(t[i].key == key)) i = (i + 1) & mask();
    return i;
  }
  // Linear probing's deletion: later entries of the cluster that could sit at `i` move back, so
  // a probe never meets a hole before its key.
  void erase(uint64_t i) {
    Entry* t = table();
    for (uint64_t j = (i + 1) & mask(); t[j].bytes != 0; j = (j + 1) & mask()) {
      const uint64_t home = hashOf(t[j].key) & mask();
      const bool staysAtJ = i <= j ? (i < home && home <= j) : (i < home || home <= j);
      if (staysAtJ) continue;
      t[i] = t[j];
      i = j;
    }
    t[i] = Entry{};
    entries -= 1;
  }
};
static_assert(sizeof(ShmPool::Header) <= tableOffset(kMinTableLog2), "the header lies below the first table");

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
  pool->header_ = static_cast<Header*>(base);
  pool->fd_ = fd;
  Header* h = pool->header_;
  if (creator) {
    // With no room for the header and the first table the pool goes: a process that opened it
    // meanwhile times out waiting for kReady.
    Status room = reservePages(h, sizeof(Header));
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

// Under the lock: the page-use count of a packed range's page.
uint16_t* ShmPool::pageUses(uint64_t location) {
  const uint64_t page = arenaOf(location) * pagesPerArena() + offsetOf(location) / pageBytes();
  return reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(header_) + kUsesOffset) + page;
}

// Under the lock: a released range of `bytes` off its size's list, or kNone.
uint64_t ShmPool::unlist(uint64_t bytes) {
  Header* h = header_;
  for (auto& c : h->classes) {
    if (c.bytes != bytes || c.head == kNone) continue;
    FreeNode* n = h->node(c.head);
    const uint64_t location = n->location, used = c.head;
    c.head = n->next;
    n->next = h->freeNodes;
    h->freeNodes = used;
    return location;
  }
  return kNone;
}

// Under the lock: a zeroed range of `bytes` (rangeBytes), a released one of that size if any.
Result<uint64_t> ShmPool::allocate(size_t bytes) {
  if (bytes < pageBytes()) return allocatePacked(bytes);
  Header* h = header_;
  if (const uint64_t location = unlist(bytes); location != kNone) return location;  // reads as zeroes
  if (h->nArenas == 0 || h->bump + bytes > h->arenaBytes[h->nArenas - 1]) {
    if (h->nArenas == kMaxArenas)
      return Status::error(occlSystemError,
                           absl::StrFormat("the shm connector pool of job %016x has handed out %d bytes in %d arenas: "
                                           "no more connectors can be registered",
                                           nonce_, h->handedOut, kMaxArenas));
    const uint32_t arena = h->nArenas;
    const std::string name = arenaName(arena);
    const uint64_t size = std::max<uint64_t>(kArenaBytes, bytes);
    // One of that name can only be an uncounted one, of a process that died under the lock, or
    // the arena of a pool whose name JobSegments already unlinked (a late attach made this pool
    // anew): never to be used here.
    shm_unlink(name.c_str());
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return sysError("shm_open", name);
    const bool sized = ftruncate(fd, static_cast<off_t>(size)) == 0;
    const int truncErrno = errno;
    close(fd);
    if (!sized) {
      errno = truncErrno;
      return sysError("ftruncate", name);
    }
    h->arenaBytes[arena] = size;
    h->nArenas = arena + 1;
    h->bump = 0;
  }
  const uint64_t location = locationOf(h->nArenas - 1, h->bump);
  h->bump += bytes;
  h->handedOut += bytes;
  return location;
}

// Under the lock: a packed range (less than a page), a released one if any, else the first of a
// page of them whose others go into their size's list. A page whose use count leaves 0 is
// reserved in /dev/shm first (it is new, or was given back), so every page with a range in use is
// there; the count is counted up before the range is handed out and down after its release, so a
// process that dies in between leaves a page that is never given back, never one given back in
// use or counted without being there.
Result<uint64_t> ShmPool::allocatePacked(size_t bytes) {
  // The range's page: reservePages takes the pages a range touches, and a packed one touches one.
  const auto reserveFor = [&](uint64_t location) -> Status {
    Result<char*> base = at(location);
    if (!base.ok()) return base.status();
    if (Status room = reservePages(base.value(), bytes); !room.ok())
      return room.withContext("shared memory " + arenaName(arenaOf(location)));
    return Status::success();
  };
  if (const uint64_t location = unlist(bytes); location != kNone) {
    if (Status room = *pageUses(location) == 0 ? reserveFor(location) : Status::success(); !room.ok()) {
      list(location, bytes);
      return room;
    }
    *pageUses(location) += 1;
    return location;  // cleared when released, or on a page given back since
  }
  Result<uint64_t> page = allocate(pageBytes());
  if (!page.ok()) return page;
  Status room = reservePages(pageUses(page.value()), sizeof(uint16_t));
  if (!room.ok()) room = room.withContext(absl::StrFormat("shared memory /occl-%016x-pool", nonce_));
  if (room.ok()) room = reserveFor(page.value());
  if (!room.ok()) {
    giveBack(page.value(), pageBytes());
    return room;
  }
  *pageUses(page.value()) = 1;
  for (uint64_t offset = bytes; offset + bytes <= pageBytes(); offset += bytes) list(page.value() + offset, bytes);
  return page.value();
}

// Under the lock: the range's pages go back to /dev/shm (a hole in the arena: it reads as zeroes),
// or a packed range is cleared, and its page goes back once none of its ranges is in use; then
// the range goes into the list of its size.
void ShmPool::giveBack(uint64_t location, uint64_t bytes) {
  const uint32_t arena = arenaOf(location);
  Result<char*> base = at(location);
  if (!base.ok()) return;  // what may still hold data is never handed out again
  if (bytes < pageBytes()) {
    // The last range of its page in use gives the page back; another is cleared, on a page that
    // other ranges in use keep in /dev/shm. A page that cannot be given back keeps this range's
    // bytes, and the range is not used again.
    const uint64_t page = offsetOf(location) / pageBytes() * pageBytes();
    if (--*pageUses(location) != 0) {
      std::memset(base.value(), 0, bytes);
    } else if (!punch(arenaFds_[arena], page, pageBytes())) {
      return;
    }
  } else if (!punch(arenaFds_[arena], offsetOf(location), bytes)) {
    return;
  }
  list(location, bytes);
}

// Under the lock: a zeroed range into its size's list, or else the first empty one (its size had
// no range left to hand out). With all kSizeClasses lists holding ranges of other sizes, or no
// room for a node's page, the range's addresses are not used again.
void ShmPool::list(uint64_t location, uint64_t bytes) {
  Header* h = header_;
  Header::SizeClass* size = nullptr;
  for (auto& c : h->classes) {
    if (c.bytes == bytes || (c.head == kNone && size == nullptr)) size = &c;
    if (c.bytes == bytes) break;
  }
  if (size == nullptr) return;
  uint64_t i = h->freeNodes;
  if (i != kNone) {
    h->freeNodes = h->node(i)->next;
  } else {
    if (h->nodes == kMaxNodes) return;
    if (!reservePages(h->node(h->nodes), sizeof(FreeNode)).ok()) return;
    i = h->nodes++;
  }
  size->bytes = bytes;
  *h->node(i) = FreeNode{location, size->head};
  size->head = i;
}

// Under the lock: moves the table to the region of twice its capacity. The switch is the one
// store of tableLog2 after the copy: a process that dies before it leaves the old table whole
// (and the next grow clears what it had copied).
Status ShmPool::grow() {
  Header* h = header_;
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
    Header* h = header_;
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
  Header* h = header_;
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
