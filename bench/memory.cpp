#include "memory.hpp"

#include "devices.hpp"

namespace occl::bench {

std::unique_ptr<RunBuffer> makeBuffer(int device) {
  if (device < 0) return std::make_unique<HostBuffer>();
  return makeDeviceBuffer(device);
}

}  // namespace occl::bench
