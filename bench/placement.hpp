// Where this process's ranks run: host threads, or a CUDA device per rank (--backend, --devlist),
// decided once before any communicator exists so that each rank allocates its buffers where its
// daemon reads them.
#pragma once

#include <string>
#include <vector>

#include "options.hpp"

namespace occl::bench {

struct Placement {
  occlBackend_t backend = occlBackendHost;  // host, simt or cuda: what config.backend gets
  int deviceCount = 0;                      // CUDA devices this process sees (cuda only)
  std::vector<int> devlist;                 // --devlist; empty: rank r on device r % deviceCount

  // The CUDA device of `rank` (its index among ranks as threads, or its rank under a launcher,
  // where occlCommInitFromEnv places it on rank % device count), or -1 for host ranks.
  int device(int rank) const;
  std::vector<int> devices(int nRanks) const;
};

struct PlacementResult {
  Placement placement;
  std::string error;  // empty on success; names the option that asked for a GPU
  int exitCode = 0;   // kExitUsage for a bad value, kExitFailed where the machine lacks the GPU
};

// --backend auto means host ranks unless --devlist or --compare nccl asks for GPUs.
PlacementResult placeRanks(const Options& options, bool launcher);

// --compare nccl: NCCL runs one rank per GPU. "" or the error naming the two ranks that share one.
std::string ncclDeviceClash(const std::vector<int>& devices, int deviceCount);

}  // namespace occl::bench
