// occl-bench's view of CUDA: the devices this process sees and buffers in their memory. Two
// implementations with the same declarations: devices_cuda.cpp in CUDA builds, devices_host.cpp
// otherwise (where every query answers that the build has no CUDA). bench/CMakeLists.txt picks
// one, so no caller needs to know which build it is in.
#pragma once

#include <memory>
#include <string>

#include "memory.hpp"

namespace occl::bench {

// The CUDA devices this process sees: count > 0, or count 0 and `error` saying why there are
// none ("no CUDA device: ..."), including "this build has no CUDA backend".
struct DeviceCount {
  int count = 0;
  std::string error;
};
DeviceCount cudaDevices();

// Whether this build has the CUDA backend (device buffers, --backend cuda).
bool buildHasCuda();

// Memory of CUDA device `device` with a host staging copy. Allocates nothing until the first
// reserve(); its operations throw std::runtime_error naming the CUDA call that failed. In a build
// without CUDA there is no device memory: it throws at once (callers check cudaDevices() first).
std::unique_ptr<RunBuffer> makeDeviceBuffer(int device);

// A stream of CUDA device `device` for --submit stream: what occlSubmitOnStream takes, and its
// synchronisation. Both throw std::runtime_error naming the CUDA call that failed; in a build
// without CUDA, making one throws at once.
class RunStream {
 public:
  virtual ~RunStream() = default;
  virtual void* handle() = 0;
  virtual void synchronize() = 0;
};
std::unique_ptr<RunStream> makeRunStream(int device);

}  // namespace occl::bench
