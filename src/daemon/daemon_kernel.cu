// The CUDA daemon: one persistent kernel per rank, block b running daemonBlockMain(env, launch, b)
// (daemon_main.hpp: passes until the quit vote says the launch is over or the exit SQE has been
// read). All scheduling, preemption and completion logic is the shared header code, which the
// simt backend runs on host threads too; this file only owns the launch.
//
// Where state lives: the environment is copied into shared memory once per launch (it is
// immutable and read on every pass). Block state (task queue, SQ cursor), collective contexts
// and the collective table stay in global memory (pinned host or device), exactly as the host
// backend uses them — that is what makes a voluntary quit and a relaunch lossless. Loading a
// block's state into shared memory for the duration of a launch would save a PCIe round trip per
// field access on every pass, but would change three things: the leader would have to write the
// SQ cursor through to global memory (the host reads it to recycle collective indices), the whole
// state would have to be written back before the block leaves, and daemonPass would need the
// shared copy passed in instead of indexing env.blocks. That is a later optimisation.
#include "daemon/daemon_kernel.hpp"

namespace occl {
namespace {

// 512 threads keep the register budget at 128 per thread, which the data path needs to avoid
// spills; the backend rejects a larger config.threadsPerBlock with a message.
constexpr int kDaemonMaxThreads = 512;

__global__ void __launch_bounds__(kDaemonMaxThreads) daemonKernel(DaemonEnv envArg, DaemonLaunch launch) {
  __shared__ DaemonEnv env;
  if (exec::isLeader()) env = envArg;
  exec::blockSync();

  daemonBlockMain(env, launch, static_cast<int>(blockIdx.x));
}

}  // namespace

cudaError_t launchDaemonKernel(const DaemonEnv& env, const DaemonLaunch& launch, int threads, cudaStream_t stream) {
  DaemonEnv envArg = env;
  DaemonLaunch launchArg = launch;
  void* args[] = {&envArg, &launchArg};
  return cudaLaunchKernel(daemonKernel, dim3(env.nBlocks), dim3(static_cast<unsigned>(threads)), args, 0, stream);
}

cudaError_t daemonKernelLimits(int threads, int* blocksPerSm, int* maxThreadsPerBlock) {
  cudaFuncAttributes attributes{};
  if (cudaError_t e = cudaFuncGetAttributes(&attributes, daemonKernel); e != cudaSuccess) return e;
  *maxThreadsPerBlock = attributes.maxThreadsPerBlock;
  *blocksPerSm = 0;
  if (threads > attributes.maxThreadsPerBlock) return cudaSuccess;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocksPerSm, daemonKernel, threads, 0);
}

}  // namespace occl
