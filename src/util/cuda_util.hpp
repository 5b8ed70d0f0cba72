// Small helpers for the host code of the CUDA backend (files *_cuda.cpp only): CUDA errors as
// Status, and a guard that makes a device current for a scope and restores the caller's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string_view>

#include "absl/strings/str_format.h"
#include "util/status.hpp"

namespace occl {

// occlUnhandledCudaError naming the call, the device and CUDA's explanation. Success stays success.
inline Status cudaStatus(cudaError_t e, std::string_view api, int device) {
  if (e == cudaSuccess) return Status::success();
  return Status::error(occlUnhandledCudaError, absl::StrFormat("%s failed on CUDA device %d: %s (%s)", api, device,
                                                               cudaGetErrorString(e), cudaGetErrorName(e)));
}

// Hardware queues per device (CUDA_DEVICE_MAX_CONNECTIONS, 8 unless set, 32 at most): each
// rank's daemon stream keeps one busy for good, so with 8 ranks on a GPU the auxiliary stream
// would share a queue with a daemon and wait behind it. Read once, when the process creates its
// CUDA context: occl raises it before its first CUDA call unless the application has chosen a
// value. An application that initialised CUDA earlier must set it itself to run more than 7
// ranks per GPU (docs/configuration.md).
inline void raiseDeviceConnections() {
  static const bool once = [] { return setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0) == 0; }();
  (void)once;
}

// The number of CUDA devices, or occlUnhandledCudaError "no CUDA device: ..." when there is none
// (no driver, no GPU, or CUDA_VISIBLE_DEVICES hides them all).
inline Result<int> cudaDeviceCount() {
  raiseDeviceConnections();
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    cudaGetLastError();  // a failed device query is not the caller's error to find later
    return Status::error(occlUnhandledCudaError, absl::StrFormat("no CUDA device: cudaGetDeviceCount: %s (%s)",
                                                                 cudaGetErrorString(e), cudaGetErrorName(e)));
  }
  if (count == 0) return Status::error(occlUnhandledCudaError, "no CUDA device: cudaGetDeviceCount found 0 devices");
  return count;
}

// The runtime's current device is per thread, and our entry points run on the application's
// threads: switch for the scope, then put the caller's device back.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    status_ = previous_ == device_ ? cudaSuccess : cudaSetDevice(device_);
  }
  ~DeviceGuard() {
    if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  Status status() const { return cudaStatus(status_, "cudaSetDevice", device_); }

 private:
  int device_;
  int previous_ = -1;
  cudaError_t status_ = cudaSuccess;
};

}  // namespace occl
