// Host-callable entry points of the CUDA daemon kernel (daemon_kernel.cu). The kernel itself is
// the shared daemonBlockMain (daemon_main.hpp); this header only lets host code that is not
// compiled by nvcc (the CUDA backend) launch and size it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "daemon/daemon_main.hpp"

namespace occl {

// Launches nBlocks = env.nBlocks blocks of `threads` threads on `stream`. `env` is copied into
// the launch (it is immutable once the communicator has started), so every pointer in it must be
// valid on the device: pinned mapped or device memory.
cudaError_t launchDaemonKernel(const DaemonEnv& env, const DaemonLaunch& launch, int threads, cudaStream_t stream);

// How many blocks of `threads` threads of the daemon kernel one SM of the current device holds,
// and the most threads per block it can be launched with (its register use decides).
cudaError_t daemonKernelLimits(int threads, int* blocksPerSm, int* maxThreadsPerBlock);

}  // namespace occl
