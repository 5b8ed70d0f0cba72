// What the GPU tests share: whether there is a device, CUDA errors as exceptions, and n ranks of
// occlCommInitAll on GPU 0 (destroyed at scope exit).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "support/ranks.hpp"

namespace occl::test {

// The first CUDA call of every GPU test, so it also raises the device's hardware queues
// (CUDA_DEVICE_MAX_CONNECTIONS, read when CUDA initialises, 8 unless set) as an application that
// runs stream-ordered submissions must: with 8, four ranks' daemon streams and sixteen streams of
// the test share queues, and a stream waiting for a collective can hold the queue that a daemon's
// relaunch waits in (seen on an H200: the stream torture hung until the variable was set).
inline int deviceCount() {
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", /*overwrite=*/0);
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

inline void checkCuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw std::runtime_error(what + ": " + cudaGetErrorString(e));
}

class GpuComms {
 public:
  explicit GpuComms(int n, occlConfig_t config = testConfig()) : comms_(static_cast<size_t>(n)) {
    std::vector<int> devlist(static_cast<size_t>(n), 0);
    expectOk(occlCommInitAll(comms_.data(), n, devlist.data(), &config), nullptr, "occlCommInitAll(devlist)");
  }
  ~GpuComms() {
    for (occlComm_t c : comms_)
      if (c != nullptr) occlCommDestroy(c);
  }
  GpuComms(const GpuComms&) = delete;
  GpuComms& operator=(const GpuComms&) = delete;
  occlComm_t operator[](int r) const { return comms_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(comms_.size()); }
  // occlCommAbort freed rank r's communicator: the destructor must not destroy it again.
  void forget(int r) { comms_[static_cast<size_t>(r)] = nullptr; }

 private:
  std::vector<occlComm_t> comms_;
};

}  // namespace occl::test
