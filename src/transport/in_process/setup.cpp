#include "transport/in_process/setup.hpp"

#include "transport/in_process/connectors.hpp"
#if OCCL_HAVE_CUDA
#include "transport/cuda/connectors.hpp"
#endif

namespace occl::transport::in_process {

std::function<std::unique_ptr<ConnectorFactory>()> connectorsFor(const std::vector<int>& devices) {
#if OCCL_HAVE_CUDA
  if (!devices.empty() && devices.front() >= 0) {
    auto world = makeCudaWorld(devices);
    return [world] { return makeCudaInProcessFactory(world); };
  }
#else
  (void)devices;  // device ranks exist only in CUDA builds
#endif
  auto world = makeInProcessWorld();
  return [world] { return makeInProcessFactory(world); };
}

}  // namespace occl::transport::in_process
