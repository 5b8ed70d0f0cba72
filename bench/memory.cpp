#include "memory.hpp"

#include "devices.hpp"

namespace occl::bench {

std::unique_ptr<RunBuffer> makeBuffer(int device) {
  if (device < 0) return std::make_unique<HostBuffer>();
  return makeDeviceBuffer(device);
}

std::unique_ptr<RunBuffer> makeSharedBuffer(int device) {
  if (device >= 0) throw std::invalid_argument("occlMemAlloc memory is host memory: no device buffers");
  return std::make_unique<SharedHostBuffer>();
}

}  // namespace occl::bench
