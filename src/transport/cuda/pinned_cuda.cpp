// Pinned host memory mapped into a CUDA device: the NET connector's FIFOs of a CUDA rank.
#include "transport/cuda/connectors.hpp"

#include "absl/strings/str_format.h"
#include "util/cuda_util.hpp"

namespace occl::transport {

Result<HostAllocator> makeCudaPinnedAllocator(int device) {
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  int unified = 0;
  if (Status s = cudaStatus(cudaDeviceGetAttribute(&unified, cudaDevAttrUnifiedAddressing, device),
                            "cudaDeviceGetAttribute(cudaDevAttrUnifiedAddressing)", device);
      !s.ok())
    return s;
  if (unified == 0)
    return Status::error(occlUnhandledCudaError,
                         absl::StrFormat("CUDA device %d has no unified addressing: the NET connector's pinned FIFOs "
                                         "need host addresses the daemon kernel can use",
                                         device));
  return recyclingAllocator(HostAllocator{
      [device](size_t bytes) -> void* {
        DeviceGuard g(device);
        void* p = nullptr;
        if (!g.status().ok() || cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable) != cudaSuccess) {
          cudaGetLastError();  // reported as a failed allocation (nullptr), not left for a later call
          return nullptr;
        }
        return p;
      },
      [device](void* base, size_t) {
        DeviceGuard g(device);
        cudaFreeHost(base);
      },
  });
}

}  // namespace occl::transport
