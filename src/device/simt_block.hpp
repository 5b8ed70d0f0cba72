// The simt backend's emulated CUDA block: W host threads run the daemon's device code path, each
// with its own lane id (exec::lane()), meeting at a barrier (exec::blockSync()) that is stricter
// than __syncthreads: every lane reports the call site of the barrier it waits at, and lanes at
// different sites abort the process with both sites named, where a GPU would pair the two
// barriers up silently and desynchronise the block. A lane that returns while the others wait at
// a barrier aborts the same way. The barrier is a mutex and a condition variable, so
// ThreadSanitizer sees every happens-before edge the block relies on.
//
// Optional jitter delays non-leader lanes after a barrier now and then, as a warp stalled on a
// load from host memory would be, so that a lane reading state the leader has moved on from is
// caught by ThreadSanitizer instead of hidden by lock-step timing.
//
// Host code only; compat.hpp's hooks call barrier() and broadcastSlot() through exec::simt::tLane.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "device/compat.hpp"

namespace occl::exec::simt {

class Block {
 public:
  // `jitterSeed` 0 disables the jitter.
  Block(int lanes, uint32_t jitterSeed);
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  int lanes() const { return lanes_; }

  // Runs body() once per lane, lane 0 on the calling thread and the others on threads of their
  // own, each with exec::lane() set; returns when every lane has returned.
  void run(const std::function<void()>& body);

  void barrier(int lane, SyncSite site);
  // broadcastFromLeader's __shared__ word: the leader writes it before a barrier, every lane
  // reads it between that barrier and the next.
  int* slot() { return &slot_; }

 private:
  void runLane(int lane, const std::function<void()>& body);
  [[noreturn]] void divergence(const char* what, int lane, SyncSite site, int other, SyncSite otherSite) const;
  void maybeDelay(int lane);

  const int lanes_;
  const uint32_t jitterSeed_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  int returned_ = 0;
  uint64_t generation_ = 0;
  std::vector<SyncSite> sites_;  // where each lane waits in the current generation
  int slot_ = 0;
};

}  // namespace occl::exec::simt
