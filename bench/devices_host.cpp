// devices.hpp in builds without CUDA: there are no devices, and nothing to allocate on one.
#include <stdexcept>

#include "devices.hpp"

namespace occl::bench {
namespace {

const char* const kNoCuda =
    "no CUDA device: this build has no CUDA backend (configure with -DOCCL_ENABLE_CUDA=ON where nvcc is installed)";

}  // namespace

DeviceCount cudaDevices() { return {0, kNoCuda}; }

bool buildHasCuda() { return false; }

std::unique_ptr<RunBuffer> makeDeviceBuffer(int device) {
  throw std::runtime_error("CUDA device " + std::to_string(device) + ": " + kNoCuda);
}

std::unique_ptr<RunStream> makeRunStream(int device) {
  throw std::runtime_error("CUDA device " + std::to_string(device) + ": " + kNoCuda);
}

}  // namespace occl::bench
