// Device memory that the daemons of one host's processes share (the `cuda-ipc` and `simt-ipc`
// connectors, transport/ipc/connectors.cpp), in the terms of CUDA's stream-ordered pools:
//
// - Each process allocates from pools of its own, one per GPU the memory lies on. Memory lies on
//   the GPU of the connector's receiver, whichever end allocates it, so a receiver polls its own
//   GPU's memory, and the only read-modify-write a connector can see (FifoHandle::beginPeerAccess,
//   the receiver's, in the peer program, which device ranks do not run between processes today)
//   would stay on its GPU: native atomics across PCIe are not to be had.
// - A pool is exported once per peer process as file descriptors (exportPools), which travel over
//   a Unix socket at communicator set-up (fd_exchange.hpp) and are imported there (importPools).
// - An allocation is exported as a few plain bytes (Export) that travel through the job's shm
//   pool, and imported from them in the peer's process (importPointer).
// - The importer gives its import back (closeImport) before the allocator frees the memory
//   (free): what CUDA asks of imported pool memory.
//
// The host never dereferences this memory: copyIn and copyOut reach it (registration handshake,
// poison). Two implementations: CUDA (cuda_ipc_device_cuda.cpp: cudaMemPool with POSIX file
// descriptor handles) and simt (simt_ipc_device.cpp: a memfd arena per process, registered with
// the emulation as this GPU's memory or a peer's, so that every simt run checks what stays on a
// GPU). Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "transport/rank_info.hpp"
#include "util/status.hpp"

namespace occl::transport::ipc {

// An allocation as its peers import it: the pool it came from and the backend's export data.
struct Export {
  uint32_t pool;      // the allocator's pool id (as exportPools named it)
  uint32_t reserved;  // 0
  uint64_t bytes;
  uint8_t data[64];  // cudaMemPoolPtrExportData, or the offset in the simt arena
};
static_assert(sizeof(Export) == 80, "an Export travels as plain bytes through shared memory");

// A pool's file descriptor, with the id its allocations' Export names.
struct PoolFd {
  uint32_t pool;
  int fd;
};

class IpcDevice {
 public:
  virtual ~IpcDevice() = default;
  // "cuda-ipc" or "simt-ipc" (occlCommPeerTransport).
  virtual const char* name() const = 0;
  // The pools rank `peer` may import from: those on this rank's GPU and on the peer's, as new
  // descriptors for the caller to send and close.
  virtual Result<std::vector<PoolFd>> exportPools(int peer) = 0;
  // Imports the pools rank `peer` exported to this rank; closes the descriptors either way.
  virtual Status importPools(int peer, const std::vector<PoolFd>& pools) = 0;
  // `bytes` of zeroed memory on the GPU of rank `lieOn` (this rank or a peer whose pools were
  // exchanged), and its Export.
  virtual Result<std::pair<void*, Export>> allocate(size_t bytes, int lieOn) = 0;
  virtual void free(void* p) = 0;
  // Rank `owner`'s allocation `e`, which lies on the GPU of rank `lieOn`.
  virtual Result<void*> importPointer(int owner, const Export& e, int lieOn) = 0;
  virtual void closeImport(void* p) = 0;
  // Host copies to and from memory allocated or imported here; done when they return.
  virtual Status copyIn(void* device, const void* host, size_t bytes) = 0;
  virtual Status copyOut(void* host, const void* device, size_t bytes) = 0;
};

// The simt backend's: a memfd arena of `arenaBytes` per process (sparse: only what connectors
// use is memory), registered with the simt emulation. `rank` is this process's rank.
Result<std::shared_ptr<IpcDevice>> makeSimtIpcDevice(int rank, size_t arenaBytes);

// What a CUDA rank on `device` tells its peers (CUDA builds only): its GPU, whether its pools
// export as file descriptors, and the visible GPUs it reaches by peer access.
Result<DaemonInfo> describeCudaDaemon(int device);

// The CUDA backend's (CUDA builds only): pools of cudaMemPoolCreate with POSIX file descriptor
// handles on this rank's `device` and on its peers' GPUs; rankGpus[r] is rank r's GPU
// (DaemonInfo::gpu; 0 for a rank without one), found among this process's devices by identity.
Result<std::shared_ptr<IpcDevice>> makeCudaIpcDevice(int rank, int device, const std::vector<uint64_t>& rankGpus);

}  // namespace occl::transport::ipc
