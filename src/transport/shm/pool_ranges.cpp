// The arenas' ranges of the job's shm pool (pool.hpp): handing out zeroed ranges, whole pages or
// packed, and taking back released ones into the lists of their sizes. All under the pool's lock.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_format.h"
#include "transport/shm/pool.hpp"
#include "transport/shm/pool_layout.hpp"

namespace occl::transport {

using namespace pool_layout;

// Under the lock: the page-use count of a packed range's page.
uint16_t* ShmPool::pageUses(uint64_t location) {
  const uint64_t page = arenaOf(location) * pagesPerArena() + offsetOf(location) / pageBytes();
  return reinterpret_cast<uint16_t*>(reinterpret_cast<char*>(header_) + kUsesOffset) + page;
}

// Under the lock: a released range of `bytes` off its size's list, or kNone.
uint64_t ShmPool::unlist(uint64_t bytes) {
  PoolHeader* h = header_;
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
  PoolHeader* h = header_;
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
  PoolHeader* h = header_;
  PoolHeader::SizeClass* size = nullptr;
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

}  // namespace occl::transport
