// The body of the persistent daemon kernel, one daemon block's whole launch: join the launch's
// quit vote, run daemon passes until the vote is sealed or the exit SQE has been read, leave.
// Written once: the CUDA kernel (daemon_kernel.cu) calls it from every thread of every block,
// the simt backend (backend/simt_backend.cpp) from every lane thread of every emulated block.
#pragma once

#include <cstdint>

#include "daemon/daemon.hpp"
#include "daemon/quit_vote.hpp"
#include "device/compat.hpp"

namespace occl {

// What one launch needs besides the environment.
struct DaemonLaunch {
  uint64_t* quitWord;     // daemon memory, see quit_vote.hpp
  uint32_t* endedEpoch;   // shared memory: the epoch of the last launch that ended
  uint32_t epoch;         // new for every launch, never 0
  uint32_t pad;
  QuitLimits limits;
};
static_assert(sizeof(DaemonLaunch) == 40, "DaemonLaunch is a kernel argument: one layout on both sides");

// Every lane of block `block` calls this; the quit decisions are the leader's, broadcast.
//
// A block that has read the exit SQE and holds no task is done for good: it still joins every
// later launch, and its first pass votes (exit) and leaves. A launch seals only once every block
// of the grid has joined (quit_vote.hpp), so its vote cannot seal the launch before a block that
// still has work has started (that race once made a relaunch storm in which the last exit SQE was
// never read, under ThreadSanitizer, where a lane thread is slow to start).
OCCL_HD inline void daemonBlockMain(const DaemonEnv& env, const DaemonLaunch& launch, int block) {
  BlockQuit quit(launch.quitWord, launch.epoch, env.nBlocks, launch.limits, exec::nowNs());
  bool stay = exec::broadcastFromLeader([&] { return quit.join(); });
  while (stay) {
    const PassResult r = daemonPass(env, block);
    stay = !exec::broadcastFromLeader([&] { return quit.afterPass(r, exec::nowNs()); });
  }
  if (exec::isLeader()) {
    reportOnLeaving(env.blocks[block]);  // before leave(): the host reads it once the launch is over
    quit.leave(launch.endedEpoch);
  }
}

}  // namespace occl
