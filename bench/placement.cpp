#include "placement.hpp"

#include "bench.hpp"
#include "devices.hpp"

namespace occl::bench {
namespace {

bool wantsGpu(const Options& o) {
  if (o.backend != occlBackendAuto) return o.backend == occlBackendCuda;
  return !o.devlist.empty() || o.compareNccl;
}

// The option that made this a GPU run, for error messages.
std::string gpuOption(const Options& o) {
  if (o.backend == occlBackendCuda) return "--backend cuda";
  return o.devlist.empty() ? "--compare nccl" : "--devlist";
}

PlacementResult failure(int code, std::string message) {
  PlacementResult r;
  r.error = std::move(message);
  r.exitCode = code;
  return r;
}

}  // namespace

int Placement::device(int rank) const {
  if (backend != occlBackendCuda) return -1;
  if (!devlist.empty()) return devlist[static_cast<size_t>(rank)];
  return rank % deviceCount;
}

std::vector<int> Placement::devices(int nRanks) const {
  std::vector<int> out;
  for (int r = 0; r < nRanks; ++r) out.push_back(device(r));
  return out;
}

PlacementResult placeRanks(const Options& o, bool launcher) {
  PlacementResult result;
  if (!wantsGpu(o)) {
    if (o.backend == occlBackendSimt) result.placement.backend = occlBackendSimt;
    return result;
  }
  if (launcher && !o.devlist.empty())
    return failure(kExitUsage,
                   "--devlist: ranks as threads only (-g); under mpirun/torchrun/--mpi rank r runs on CUDA device "
                   "r % (devices this process sees)");
  const DeviceCount devices = cudaDevices();
  if (devices.count == 0) return failure(kExitFailed, gpuOption(o) + ": " + devices.error);
  for (size_t r = 0; r < o.devlist.size(); ++r)
    if (o.devlist[r] >= devices.count)
      return failure(kExitUsage, "--devlist: device " + std::to_string(o.devlist[r]) + " (rank " + std::to_string(r) +
                                     ") does not exist; expected 0.." + std::to_string(devices.count - 1) + " (" +
                                     std::to_string(devices.count) + " CUDA device(s) visible)");
  result.placement.backend = occlBackendCuda;
  result.placement.deviceCount = devices.count;
  result.placement.devlist = o.devlist;
  return result;
}

std::string ncclDeviceClash(const std::vector<int>& devices, int deviceCount) {
  for (size_t a = 0; a < devices.size(); ++a)
    for (size_t b = a + 1; b < devices.size(); ++b)
      if (devices[a] == devices[b])
        return "--compare nccl: NCCL runs one rank per GPU, but ranks " + std::to_string(a) + " and " +
               std::to_string(b) + " both run on CUDA device " + std::to_string(devices[a]) +
               "; expected -g/--ngpus at most " + std::to_string(deviceCount) + " or a --devlist without repeats";
  return "";
}

}  // namespace occl::bench
