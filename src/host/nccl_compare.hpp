// NCCL next to occl, for `occl-bench --compare nccl`: time an NCCL collective over the GPUs of
// this process, and measure the device-to-device copy bandwidth that expresses a bus bandwidth
// as a fraction of what the GPU's memory system can move.
//
// Built only when CUDA and NCCL are found: link the CMake target occl_nccl_compare, which defines
// OCCL_HAVE_NCCL_COMPARE=1 for its users; without it these declarations do not exist. The
// library proper (libocc) never links NCCL.
#pragma once

#if OCCL_HAVE_NCCL_COMPARE

#include <cstddef>
#include <vector>

#include "host/status.hpp"
#include "occl/occl.h"

namespace occl::host {

struct NcclRunSpec {
  int coll = occlCollAllReduce;  // occlCollType_t, Send/Recv excluded
  // nccl-tests' size: the message of allreduce, reduce and broadcast; the whole receive buffer of
  // allgather; the whole send buffer of reducescatter and alltoall.
  size_t bytes = 0;
  int datatype = occlFloat32;  // occlDataType_t; NCCL numbers types and ops the same way
  int op = occlSum;            // occlRedOp_t, reducing collectives only
  int root = 0;                // reduce and broadcast
  std::vector<int> devices;    // one rank per GPU; distinct (NCCL refuses two ranks on one GPU)
  int warmupIters = 5;
  int iters = 20;
  // false: each iteration is launched on every rank and waited for before the next one, so the
  // time is launch-to-completion latency. true: all iterations are launched back to back and
  // waited for once (nccl-tests' timing; hides the launch overhead).
  bool pipelined = false;
};

struct NcclTiming {
  double meanUs = 0;   // per iteration, host clock: from the launch on the first rank to completion on all
  int ncclVersion = 0;  // ncclGetVersion's code, e.g. 22809
};

// Runs `spec` with ncclCommInitAll over spec.devices, one stream per GPU, on buffers of its own.
Result<NcclTiming> runNcclCollective(const NcclRunSpec& spec);

// GB/s (1e9 bytes per second) of cudaMemcpyAsync device-to-device copies of `bytes` on
// `device`, timed with events over `iters` copies. Each byte counts once, although it is read
// and written (CUDA's bandwidthTest reports twice this figure).
Result<double> deviceCopyBandwidthGBs(int device, size_t bytes, int iters);

}  // namespace occl::host

#endif  // OCCL_HAVE_NCCL_COMPARE
