// Which ranks of a host have given up their CPU (host only). With more ranks than cores, a rank
// that waits for a peer yields its core round after round, and that is right when the peer waits
// for the core: only then can it run. But when the peer is running on another core, about to
// publish what the waiter needs, the yield hands the core to a core-mate that, as often as not,
// waits for the same peer and yields straight back: two context switches for nothing. Linux's
// mutexes spin while the owner is on a CPU for the same reason.
//
// So each rank has a word on the board its communicator's ranks of this host share (the in-process
// world's, or in the job's shm pool): how many of its daemon-pass threads (the daemon thread, or the
// waiter that runs passes for it) are inside a yield now. A waiter whose peer's word is 0 spins on
// its core (the CPU's pause), at most kPeerOnCpuSpinNs a wait, instead of yielding: the peer is on
// a CPU, or was preempted while running, which the bound covers. A FIFO names the ranks of its two
// ends in its header (FifoHeader::senderRank, receiverRank) where the communicator has a board, so
// a wait knows whose word to read. Measured (4 processes on 2 cores, 8 B AllReduce, 200,000 of them
// a placement, perf stat): sched_yield calls -19 to -25%, context switches -21 to -23%, and a small
// AllReduce 10-22% faster (bench/results/host-2026-11-28.md).
//
// Not on the board, and so never spun for: ranks behind NET (their proxies' threads matter too),
// CUDA ranks (device code never yields), the simt backend's lanes, and ranks from kYieldBoardRanks up.
#pragma once

#include <cstdint>
#include <thread>

#include "device/compat.hpp"

namespace occl {

struct alignas(64) YieldWord {
  uint32_t threadsInYield;  // of this rank, inside countedYield now
};
static_assert(sizeof(YieldWord) == 64, "a rank's word fills a cache line of its own");

inline constexpr int kYieldBoardRanks = 1024;
struct YieldBoard {
  YieldWord ranks[kYieldBoardRanks];

  // Rank `rank`'s word; nullptr where the board has none.
  YieldWord* of(int rank) { return rank >= 0 && rank < kYieldBoardRanks ? &ranks[rank] : nullptr; }
};

// How long one wait spins on its core while the peer it waits for is on a CPU: a rank on the other
// core publishes within a pass (~1 us for a small collective on this project's VM); a peer that
// takes longer was doing something else, and the waiter yields as before.
inline constexpr uint64_t kPeerOnCpuSpinNs = 3000;

// A FIFO header's rank fields hold rank + 1; 0 = not named.
OCCL_HD inline uint32_t namedRank(int rank) { return static_cast<uint32_t>(rank) + 1; }

#if !OCCL_ON_DEVICE
// The board of the communicator whose daemon pass this thread runs, and this rank's word on it;
// set by the host backend around its passes (nullptr elsewhere: no board, nothing counted).
inline thread_local YieldBoard* tYieldBoard = nullptr;
inline thread_local YieldWord* tYieldWord = nullptr;

// Yields the core; a word, if any, counts this thread inside the yield.
inline void countedYield(YieldWord* word) {
  if (word == nullptr) {
    std::this_thread::yield();
    return;
  }
  atomics::fetchAdd(&word->threadsInYield, 1u);
  std::this_thread::yield();
  atomics::fetchAdd(&word->threadsInYield, ~0u);
}

// Whether the rank behind `named` (a FifoHeader rank field) is on the board and has no thread in a
// yield: then a wait for it spins in place.
inline bool namedRankOnCpu(YieldBoard* board, uint32_t named) {
  if (board == nullptr || named == 0 || named > static_cast<uint32_t>(kYieldBoardRanks)) return false;
  return atomics::loadRelaxed(&board->ranks[named - 1].threadsInYield) == 0;
}
#endif

// One yielding round of a wait: the GPU's short sleep (exec::spinPause), the host's yield, counted
// on this thread's rank's word where it has one.
OCCL_HD inline void yieldRound() {
#if OCCL_ON_DEVICE
  exec::spinPause();
#else
  countedYield(tYieldWord);
#endif
}

}  // namespace occl
