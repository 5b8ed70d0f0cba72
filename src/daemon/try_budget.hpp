// What one try of a block at a submission may spend before it is preempted (SpinBudget, the
// clock of each wait, stickiness's raised thresholds) and what the try returns (TryOutcome).
// Read by the executor (executor.hpp) and set by the daemon pass and the backends.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

enum class TryStatus : uint8_t { Done, Preempted, Failed };

struct TryOutcome {
  TryStatus status;
  // A primitive moved data on this try. Not the same as "the context moved": passing a nop (or
  // a zero-length tile) moves the context without moving data, and the first try of a submission
  // marks it started; those contexts are saved (daemon.hpp) but the block made no progress.
  bool progressed;
  uint32_t failCode;  // occlResult_t when Failed
  bool yielded;       // Preempted because a more urgent submission may be waiting in the SQ
};

struct SpinBudget {
  uint32_t threshold;  // spin rounds a wait may take before the collective is preempted
  uint32_t boost;      // added to the threshold after each primitive that succeeds (stickiness)
  bool unlimited;      // preemption disabled: spin until ready, abort or timeout
  // Nanoseconds one spin round may cost at most, 0 = no bound: a wait also ends after
  // threshold * roundNs. On the host a round yields the core, and with more runnable threads
  // than cores a round costs as much as all of them together, so a bound in rounds alone would
  // let one wait on an absent peer starve the ranks that could progress.
  uint32_t roundNs;
  // Priority order: the try ends (as a preemption) once the SQ holds entries past `sqSeen`, so
  // the pass can put a more urgent arrival in front. nullptr = never.
  const uint64_t* sqPublished;
  uint64_t sqSeen;
  // Priority order: a more urgent task waits ahead of this one, so give way after every tile
  // and let the pass retry it; otherwise a flowing large collective would run to its end first.
  bool yieldEachTile;
  // Host backend: a wait on a FIFO that has spun this many rounds sleeps on the FIFO word
  // instead (queues/fifo_wait.hpp), at most kMaxParkNs at a time and never past the time bound,
  // and checks for failures after every sleep. 0 = never (the GPU and the simt backend).
  // Counts the rounds that yielded, not those that spun in place.
  uint32_t parkAfter;
  // Host backend: for this long from its first unready round a wait spins on its core (the
  // CPU's pause) instead of yielding it, where every rank of this host has a core of its own: a
  // peer on another core is usually a fraction of a microsecond away, and a yield is a system
  // call. 0 = yield from the first round (more ranks than cores, the GPU, the simt backend), except
  // for a peer that is on a CPU (peerOnCpu, queues/yield_board.hpp).
  uint32_t spinInPlaceNs;
  // Between tiles a try looks at sqPublished only before every arrivalEveryTiles-th tile (0 and
  // 1: every tile): on the GPU the SQ is host memory, and each look is a read across PCIe.
  // Waits look every 64 rounds whatever this says.
  uint32_t arrivalEveryTiles;
  // Which round of every 64 a wait that is not ready looks at sqPublished (< 64): 0, at once, where
  // the look is a load of host memory (host backend); 63, with the failure checks, where it is a
  // read across the bus (kernel backends), so a wait that a peer ends within 63 rounds, as in
  // most small collectives of ranks that run together, pays none.
  uint32_t arrivalLookRound = 0;
  // Where the timeline is kept (daemon/timeline.hpp): stamp the try's first and last data
  // (BlockExecutor::stamps).
  bool stampData = false;
};

// The clock of one wait (BlockExecutor::waitFor): when it started, until when it spins on its
// core, and the last reading, shared by the checks of a round. A round that spins in place costs
// about as much as one read of the clock (~40 ns here), so while the wait spins it reads the
// clock once every kSpinRoundsPerClockRead rounds: the move to yielding and the time bound then
// come at most that many rounds late. A yielding round, a system call, reads it every time. It is
// read and written inside broadcastFromLeader, so only the leader's copy holds readings; park(),
// which reads startNs on every lane, runs on the host backend only, whose blocks have one lane.
inline constexpr uint32_t kSpinRoundsPerClockRead = 8;
struct WaitClock {
  uint64_t startNs = 0;
  uint64_t spinEndNs = 0;
  uint64_t peerSpinStartNs = 0;  // the first round that spun for a peer on a CPU (peerOnCpu)
  uint64_t ns = 0;
  uint32_t readAt = 0;    // the round of the last reading (valid once ns != 0)
  bool spinning = false;  // the last round spun in place
  OCCL_HD uint64_t at(uint32_t round) {
    const uint32_t every = spinning ? kSpinRoundsPerClockRead : 1;
    if (ns == 0 || round - readAt >= every) {
      ns = exec::nowNs();
      readAt = round;
    }
    return ns;
  }
};

// Bounds one sleep of a parked wait: an abort (which wakes no FIFO) is seen within this.
inline constexpr uint64_t kMaxParkNs = 1000000;

#if !OCCL_ON_DEVICE
// A host thread that runs a pass for a waiter (Backend::help) must be back by the waiter's
// deadline (steady clock, ns; 0 = none): past it, a wait ends as if its threshold had passed,
// the collective is preempted and the daemon's own thread resumes it. Set only around a helped
// pass (host_backend.cpp), so daemon threads and the simt lanes never see it.
inline thread_local uint64_t tPassDeadlineNs = 0;
#endif

// Stickiness: every primitive that succeeds raises the threshold of the collective's next waits,
// up to kMaxBoostedThreshold rounds (over a minute on either backend, so a higher one would change
// nothing). Saturates instead of wrapping: a wrapped threshold would make a flowing collective the
// easiest one to preempt. A configured threshold above the cap is left as it is.
inline constexpr uint32_t kMaxBoostedThreshold = 1u << 30;
OCCL_HD inline uint32_t boostedThreshold(uint32_t threshold, uint32_t boost) {
  if (threshold >= kMaxBoostedThreshold) return threshold;
  return boost >= kMaxBoostedThreshold - threshold ? kMaxBoostedThreshold : threshold + boost;
}

}  // namespace occl
