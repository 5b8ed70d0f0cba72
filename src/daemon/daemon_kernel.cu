// The CUDA daemon: one persistent kernel per rank, block b running daemonBlockMain(env, launch, b)
// (daemon_main.hpp: passes until the quit vote says the launch is over or the exit SQE has been
// read). All scheduling, preemption and completion logic is the shared header code, which the
// simt backend runs on host threads too; this file only owns the launch.
//
// Where state lives: the environment is copied into shared memory once per launch (it is
// immutable and read on every pass). Block states, task queues, collective contexts and shared
// progress words are device memory, which only the daemon touches after the host's initial copy;
// that memory outlives a launch, which is what makes a voluntary quit and a relaunch lossless.
// Only the SQ, the CQ rings, the BlockReport lines, the abort flag and the launch's end epoch are
// pinned host memory, and the daemon crosses the bus to them with loads and stores only (D5).
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
