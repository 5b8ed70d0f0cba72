// Voluntary quit of the CUDA daemon kernel (OCCL §3.1.3).
//
// A block wants to quit when it has been idle (nothing queued, nothing arriving) for idleNs, or
// stuck (tasks queued, none progressing) for stuckNs — the latter so that a cudaDeviceSynchronize
// issued elsewhere can complete (Fig. 1(c)); the host relaunches the kernel afterwards. Block
// state lives in global memory, so leaving and relaunching loses nothing.
//
// But the kernel can only end as a whole: the host relaunches a grid, never one block, and a
// block that left early would strand its part of every later collective until the others left
// too. So blocks vote. One 64-bit word in device memory per communicator holds
//
//   epoch << 32 | sealed << 31 | left << 20 | joined << 10 | votes
//
// A block joins when it starts, votes when it wants to quit, and withdraws its vote when it
// progresses again. The vote that makes votes == joined == the grid's block count seals the word;
// a sealed word makes every block leave. Every block of the grid must have joined first: blocks
// that started could otherwise seal a stuck launch before a block with work had started (a block
// whose part the others wait for: an MSCCL-IR program's reducing threadblock, a ring's other
// channel), that block would leave unjoined, and if it always started later than the stuck time
// after the others, it would never run and the ranks would preempt in step forever (seen on the
// simt backend under load, where a lane thread can start more than 20 ms late;
// daemon_try_test's ABlockThatStartsAfterTheStuckTimeStillRuns holds it). The grid is sized to
// fit the device (residency.hpp, per process), so every block starts, unless something outside
// the process keeps SMs (another process's kernels under MPS): a launch then ends only once its
// last block has become resident. Each launch passes a new epoch, and a word from an older epoch
// reads as empty, so nothing is reset between launches. A block leaving for the exit SQE votes
// for good, so every launch ends sealed.
//
// A block that joined counts itself out (`left`) when it leaves, sealed or not; the one that
// makes a sealed word's left == joined is the last, and only it tells the host. Blocks finish the
// pass they are in before they see the seal, so the first block to leave is not the end: a host
// that took it for one would read block state (task queues, SQ cursors) still being written.
//
// The word is read-modify-written by the blocks only, in device memory: GPU atomics on host
// memory are not atomic with respect to the host unless the platform says so
// (hostNativeAtomicSupported). The host learns that a launch is over from a second word in
// mapped memory, where a leaving block that saw the seal stores the launch's epoch.
//
// All of this runs on the leader lane only; the kernel broadcasts the decision to its block.
#pragma once

#include <cstdint>

#include "daemon/daemon.hpp"
#include "device/compat.hpp"

namespace occl {

namespace quitword {

inline constexpr uint64_t kSealed = 1ull << 31;
inline constexpr uint32_t kCountBits = 10;
inline constexpr uint32_t kCountMask = (1u << kCountBits) - 1;
static_assert(kMaxDaemonBlocks <= kCountMask, "a block count must fit its field");

struct Fields {
  bool sealed;
  uint32_t left;
  uint32_t joined;
  uint32_t votes;
};

OCCL_HD inline Fields decode(uint64_t word, uint32_t epoch) {
  if (static_cast<uint32_t>(word >> 32) != epoch) return {false, 0, 0, 0};  // an older launch's word
  return {(word & kSealed) != 0, static_cast<uint32_t>(word >> (2 * kCountBits)) & kCountMask,
          static_cast<uint32_t>(word >> kCountBits) & kCountMask, static_cast<uint32_t>(word) & kCountMask};
}

OCCL_HD inline uint64_t encode(uint32_t epoch, const Fields& f) {
  return (static_cast<uint64_t>(epoch) << 32) | (f.sealed ? kSealed : 0) |
         (static_cast<uint64_t>(f.left & kCountMask) << (2 * kCountBits)) |
         (static_cast<uint64_t>(f.joined & kCountMask) << kCountBits) | (f.votes & kCountMask);
}

// Applies `change` to the word of `epoch` with a CAS loop, unless the word is sealed. Returns
// false when it was sealed (the caller must leave), true when the change landed.
template <typename Change>
OCCL_HD inline bool update(uint64_t* word, uint32_t epoch, Change&& change, bool& sealedNow) {
  uint64_t seen = atomics::loadAcquire(word);
  for (;;) {
    Fields f = decode(seen, epoch);
    if (f.sealed) return false;
    change(f);
    if (atomics::compareExchange(word, seen, encode(epoch, f))) {
      sealedNow = f.sealed;
      return true;
    }
  }
}

}  // namespace quitword

// A new block of launch `epoch` counts itself in. False: the launch is already sealed, leave.
OCCL_HD inline bool joinLaunch(uint64_t* word, uint32_t epoch) {
  bool sealedNow = false;
  return quitword::update(word, epoch, [](quitword::Fields& f) { f.joined += 1; }, sealedNow);
}

// Votes to quit. True: the launch is sealed (by this vote or an earlier one), leave. `gridBlocks`
// is the launch's block count: the vote of the last block to vote seals it only once all have
// joined (see the top of the file).
OCCL_HD inline bool castQuitVote(uint64_t* word, uint32_t epoch, uint32_t gridBlocks) {
  bool sealedNow = false;
  bool landed = quitword::update(
      word, epoch,
      [&](quitword::Fields& f) {
        f.votes += 1;
        f.sealed = f.votes >= f.joined && f.joined >= gridBlocks;
      },
      sealedNow);
  return !landed || sealedNow;
}

// Takes a vote back after progress. False: too late, the launch is sealed, leave.
OCCL_HD inline bool withdrawQuitVote(uint64_t* word, uint32_t epoch) {
  bool sealedNow = false;
  return quitword::update(word, epoch, [](quitword::Fields& f) { f.votes -= 1; }, sealedNow);
}

OCCL_HD inline bool launchSealed(uint64_t* word, uint32_t epoch) {
  return quitword::decode(atomics::loadAcquire(word), epoch).sealed;
}

// A block that joined counts itself out. True: the launch is sealed and this was the last block
// in it, so every block's writes before leaving happen before this CAS (each left through one).
OCCL_HD inline bool leaveLaunch(uint64_t* word, uint32_t epoch) {
  uint64_t seen = atomics::loadAcquire(word);
  for (;;) {
    quitword::Fields f = quitword::decode(seen, epoch);
    f.left += 1;
    if (atomics::compareExchange(word, seen, quitword::encode(epoch, f))) return f.sealed && f.left == f.joined;
  }
}

struct QuitLimits {
  uint64_t idleNs;   // nothing queued and no progress for this long: want to quit
  uint64_t stuckNs;  // tasks queued but none progressing for this long: want to quit
};

// The quit decision of one block, kept by its leader across passes.
class BlockQuit {
 public:
  OCCL_HD BlockQuit(uint64_t* word, uint32_t epoch, uint32_t gridBlocks, QuitLimits limits, uint64_t nowNs)
      : word_(word), epoch_(epoch), gridBlocks_(gridBlocks), limits_(limits), lastProgressNs_(nowNs) {}

  // Joins the launch; false when the block must leave at once. (A join never seals: the joining
  // block has not voted.)
  OCCL_HD bool join() {
    joined_ = joinLaunch(word_, epoch_);
    return joined_;
  }

  // On leaving: the last block of a sealed launch tells the host (`endedEpoch`, mapped memory).
  // A block that leaves for the exit SQE before the others have voted leaves that to them, and a
  // block that never joined (the launch was sealed before it started) has nothing to count.
  OCCL_HD void leave(uint32_t* endedEpoch) const {
    if (joined_ && leaveLaunch(word_, epoch_)) atomics::storeRelease(endedEpoch, epoch_);
  }

  // After each pass: true when the block must leave the kernel now.
  OCCL_HD bool afterPass(const PassResult& r, uint64_t nowNs) {
    if (r.exit) {
      // Leaving for good: the vote stays cast, so the other blocks can still seal a quit.
      if (!voted_) castQuitVote(word_, epoch_, gridBlocks_);
      return true;
    }
    if (r.progressed) {
      lastProgressNs_ = nowNs;
      if (!voted_) return false;
      voted_ = false;
      return !withdrawQuitVote(word_, epoch_);
    }
    if (voted_) return launchSealed(word_, epoch_);
    const uint64_t quietNs = nowNs - lastProgressNs_;
    if (quietNs < (r.pending ? limits_.stuckNs : limits_.idleNs)) return false;
    voted_ = true;
    return castQuitVote(word_, epoch_, gridBlocks_);
  }

 private:
  uint64_t* word_;
  uint32_t epoch_;
  uint32_t gridBlocks_;
  QuitLimits limits_;
  uint64_t lastProgressNs_;
  bool voted_ = false;
  bool joined_ = false;
};

}  // namespace occl
