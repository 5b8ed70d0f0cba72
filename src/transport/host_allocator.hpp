// Where a connector's host memory comes from when the transport does not map it itself (the NET
// connector's local FIFOs): plain anonymous memory, or, for a CUDA daemon, pinned memory mapped
// into the device (transport/cuda/connectors.hpp).
#pragma once

#include <cstddef>
#include <functional>

namespace occl::transport {

// Both calls may happen on any thread, also after the factory that took the allocator is gone (a
// ConnectorMemory outlives it); `allocate` returns nullptr on failure. Memory need not be zeroed.
struct HostAllocator {
  std::function<void*(size_t bytes)> allocate;
  std::function<void(void* base, size_t bytes)> release;
};

// Page-aligned anonymous memory (mmap), returned to the system on release.
HostAllocator defaultHostAllocator();

// Keeps what is released for the next allocation of the same size, and hands it to `underlying`'s
// release only once the returned allocator and every copy of it are gone. For memory whose release
// must not happen while a kernel runs: cudaFreeHost synchronises the device, which waits for the
// persistent daemon kernel, i.e. forever. A communicator that registers and deregisters
// collectives reuses the same few FIFOs instead of growing.
HostAllocator recyclingAllocator(HostAllocator underlying);

}  // namespace occl::transport
