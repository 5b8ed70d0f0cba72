// User buffers that the ranks in other processes of this host can map (occlMemAlloc): what lets
// the peer AllReduce (primitives/peer_read.hpp) run between processes, as NCCL's ncclMemAlloc
// buffers let its kernels reach a peer's memory directly.
//
// Each allocation is a memfd of its own, mapped shared. Another process reaches it through the
// owner's /proc/<pid>/fd/<fd> (same user; the kernel's ptrace read check, which Yama does not
// restrict) and checks that what it opened is the same file (its inode), so a pid that names
// another process (a pid namespace between the ranks) fails instead of mapping a stranger's memory.
// Nothing is named in /dev/shm, so nothing is left behind when a process dies: a region lives
// while its owner keeps the fd or any process maps it.
//
// resolve() pins what it returns and unpin() lets go; a pinned mapping is never unmapped, so a
// fold that outlives its owner's failure (the bounded drain between processes, daemon.hpp) never
// faults. release() of a pinned region of this process unmaps it at the last unpin; a peer's
// region is unmapped once its owner's fd no longer holds that file (the owner freed it or died),
// found at a later miss for the same owner, and nothing pins it. A peer AllReduce that fails
// between resolve and unpin unpins as it fails (peer_read.hpp, releasePeerNoticesOnFailure).
#pragma once

#include <cstddef>
#include <cstdint>

#include "util/status.hpp"

namespace occl::memory {

// Where a buffer is for another process of this host. inode == 0: not memory from allocate(),
// valid in its own process only.
struct SharedRef {
  uint64_t inode;   // of the region's memfd
  uint64_t offset;  // of the buffer from the region's start
  int32_t pid;      // the owner, as it sees itself
  int32_t fd;       // the region's memfd in the owner
};
static_assert(sizeof(SharedRef) == 24, "a SharedRef travels in a peer notice (peer_read.hpp)");

// Page-aligned, zeroed, shared memory of at least `bytes` (> 0) bytes.
Result<void*> allocate(size_t bytes);
// `ptr` must be what allocate() returned and not yet released.
Status release(void* ptr);

// The region of this process that holds all of [ptr, ptr + bytes), or inode 0.
SharedRef describe(const void* ptr, size_t bytes);
// How many times this process has released a region so far: a buffer describe() found stays
// found while this count stays the same (a lookup saved per submission of the same buffers).
uint64_t releases();

// `ref` (inode != 0) as an address of this process, valid for `bytes` bytes and pinned: the
// owner's region mapped here on first use and kept. Thread-safe.
Result<char*> resolve(const SharedRef& ref, size_t bytes);
// Lets go of one pin of the region holding `p`, an address resolve() returned.
void unpin(const char* p);

// Peer regions this process keeps mapped (for tests).
size_t peerMappings();
// Pins held on every region, own and peers' (for tests: 0 once no peer AllReduce is running).
size_t pins();

}  // namespace occl::memory
