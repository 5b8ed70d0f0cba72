// Connectors for ranks whose daemon is a CUDA kernel (CUDA builds only): in_process_cuda.cpp,
// shm_cuda.cpp and pinned_cuda.cpp.
//
// Ranks of one process (occlCommInitAll with a devlist): a FIFO lives in device memory of the
// receiver's GPU when the sender runs on the same GPU or can reach it by peer access, so the
// receiver polls local memory and the sender writes across. GPU pairs without peer access share
// pinned, mapped host memory instead.
//
// Ranks in different processes whose GPUs cannot share device memory (transport/select.cpp): the POSIX shm
// mapping of makeShmFactory, registered with CUDA (pinned and mapped), so the daemon kernel reads
// and writes it at its host address. Where they can, transport/ipc/ (cuda-ipc) carries them.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "transport/connector.hpp"
#include "transport/host_allocator.hpp"
#include "util/status.hpp"

namespace occl::transport {

// The connector memory of one process's device ranks; devices[r] is rank r's CUDA device.
class CudaWorld;
std::shared_ptr<CudaWorld> makeCudaWorld(std::vector<int> devices);
std::unique_ptr<ConnectorFactory> makeCudaInProcessFactory(std::shared_ptr<CudaWorld> world);

// makeShmFactory's connectors, usable by a daemon kernel on `device`.
std::unique_ptr<ConnectorFactory> makeCudaShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs, int device);

// Pinned host memory mapped into `device` (cudaHostAlloc, mapped and portable; with unified
// addressing, which this checks, its host address is its device address), recycled
// (host_allocator.hpp): cudaFreeHost runs only once nothing holds the allocator any more, after
// the communicator stopped its daemon kernel, since it would wait for that kernel. For the NET
// connector's FIFOs of a CUDA rank.
Result<HostAllocator> makeCudaPinnedAllocator(int device);

}  // namespace occl::transport
