// NCCL next to occl, for `occl-bench --compare nccl`: time NCCL collectives over the GPUs of
// this process, and measure the device-to-device copy bandwidth that expresses a bus bandwidth
// as a fraction of what the GPU's memory system can move.
//
// Built only when CUDA and NCCL are found: link the CMake target occl_nccl_compare, which defines
// OCCL_HAVE_NCCL_COMPARE=1 for its users; without it these declarations do not exist. The
// library proper (liboccl) never links NCCL.
#pragma once

#if OCCL_HAVE_NCCL_COMPARE

#include <cstddef>
#include <memory>
#include <vector>

#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

struct NcclRunSpec {
  int coll = occlCollAllReduce;  // occlCollType_t, Send/Recv excluded
  // nccl-tests' size: the message of allreduce, reduce and broadcast; the whole receive buffer of
  // allgather; the whole send buffer of reducescatter and alltoall.
  size_t bytes = 0;
  int datatype = occlFloat32;  // occlDataType_t; NCCL numbers types and ops the same way
  int op = occlSum;            // occlRedOp_t, reducing collectives only
  int root = 0;                // reduce and broadcast
  int warmupIters = 5;
  int iters = 20;
  // false: each iteration is launched on every rank and waited for before the next one, so the
  // time is launch-to-completion latency. true: all iterations are launched back to back and
  // waited for once (nccl-tests' timing; hides the launch overhead).
  bool pipelined = false;
};

struct NcclRank;

// One NCCL communicator per GPU of `devices` (ncclCommInitAll), each with a stream and buffers
// that grow to the largest size run so far: communicator set-up, which takes far longer than a
// collective, is paid once per sweep rather than once per size.
class NcclSession {
 public:
  // `devices`: one rank per GPU, all distinct (NCCL refuses two ranks on one GPU).
  static Result<std::unique_ptr<NcclSession>> open(const std::vector<int>& devices);
  ~NcclSession();
  NcclSession(const NcclSession&) = delete;
  NcclSession& operator=(const NcclSession&) = delete;

  // Mean time of one iteration in microseconds, host clock: from the launch on the first rank
  // to completion on all.
  Result<double> timeUs(const NcclRunSpec& spec);
  int ncclVersion() const { return version_; }  // ncclGetVersion's code, e.g. 22809

 private:
  NcclSession();
  Status launchOnce(const NcclRunSpec& spec, size_t count);
  Status waitAll();

  std::vector<NcclRank> ranks_;
  int version_ = 0;
};

// GB/s (1e9 bytes per second) of cudaMemcpyAsync device-to-device copies of `bytes` on
// `device`, timed with events over `iters` copies. Each byte counts once, although it is read
// and written (CUDA's bandwidthTest reports twice this figure).
Result<double> deviceCopyBandwidthGBs(int device, size_t bytes, int iters);

}  // namespace occl::host

#endif  // OCCL_HAVE_NCCL_COMPARE
