// Pages of /dev/shm: their size, what a connector's range of the pool takes (packed or whole
// pages), and reserving them so that a full /dev/shm fails with a message instead of a SIGBUS.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "util/status.hpp"

namespace occl::transport {

// The error of `bytes` of pages /dev/shm could not give; callers name the segment (withContext).
Status noRoomInDevShm(uint64_t bytes, const std::string& why);

// Has the tmpfs pages of [from, from + bytes) allocated now (MADV_POPULATE_WRITE, Linux 5.14), so
// that a /dev/shm with no room for them fails here, naming the cause, where the first touch would
// raise SIGBUS and kill the process (Docker's /dev/shm is 64 MiB unless --shm-size says more). The
// pages change nothing: whatever a peer already wrote there stays. A kernel without the advice
// (EINVAL) leaves it to the touches. The error does not name the memory: its caller does.
Status reservePages(void* from, size_t bytes);

size_t pageBytes();
// `bytes` rounded up to whole pages.
size_t wholePages(size_t bytes);
// What a range of the pool for a connector of `bytes` takes. Packed: up to half a page, the power
// of two from 256 bytes that holds it, sharing its page with ranges of that size; whole pages
// above. Not packed: whole pages always (a CUDA rank registers its connectors' pages with the
// driver one connector at a time, so two connectors must not share a page).
size_t rangeBytes(size_t bytes, bool packed);

}  // namespace occl::transport
