// Phase stamps of each submission a daemon block runs (issue 40: where a small collective's time
// goes on a GPU), kept when config.timelineDepth > 0 and read by occlCommGetTimeline. Each part
// that finishes a submission writes one record into its block's ring in daemon memory: when the
// block took the SQE, when its first try loaded the context, when a primitive of the try that
// finished it first and last moved data (a submission preempted on the way shows the time it
// waited between its start and that try's first data), and when the part was done (after the
// CQE, for the part that wrote it). Kept per try rather than across tries: a stamp carried with
// the task grew the daemon kernel's stack frame by 16 bytes (kernel_resources_test). Stamps are the
// daemon's clock (exec::nowNs: the GPU's globaltimer, the host's steady clock), so only their
// differences mean something on the host.
//
// The block's leader writes record `count % slots` (slots = depth + 1), then stores count + 1 with
// release; a release fence before the record's words keeps them from being seen before the
// previous count. A reader that copies the count, then the records, then the count again keeps
// record i only if i < the first count (it was complete) and i + slots > the second (nothing
// overwrote it during the copy: the writer of record i + slots starts once the count is
// i + slots), and at most the newest `depth`: a quiet ring gives back all `depth`.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

inline constexpr uint32_t kTimelineWroteCqe = 1u << 0;

// A record's words, in order. Each is written with a relaxed store, as the host reads them.
enum TimelineWord : int {
  kTlCollId,
  kTlSeq,        // the collective's submission number
  kTlTaken,      // the block took the SQE
  kTlStarted,    // its first try: context loaded
  kTlFirstData,  // a primitive of the try that finished the part first moved data; 0 if none did
  kTlLastData,   // ... and last
  kTlDone,       // the part finished (after writing the CQE, if it did)
  kTlPartFlags,  // part | kTimelineWroteCqe << 32
  kTlWords,
};
struct alignas(64) TimelineRecord {
  uint64_t words[kTlWords];
};
static_assert(sizeof(TimelineRecord) == 64, "a timeline record is one line");

// One block's ring: its count on a line of its own, then depth + 1 record slots. Daemon memory.
struct alignas(64) TimelineRing {
  uint64_t count;  // records written so far
  uint64_t pad[7];
  // TimelineRecord records[depth + 1] follow.
  OCCL_HD TimelineRecord* records() { return reinterpret_cast<TimelineRecord*>(this + 1); }
};
static_assert(sizeof(TimelineRing) == 64, "a ring's count is one line");

// A ring's geometry, for `depth` records kept: one slot more (above), and the count's line before
// them. The writer, the reader and the allocation all take it from here.
OCCL_HD constexpr uint64_t timelineSlots(uint32_t depth) { return uint64_t{depth} + 1; }
OCCL_HD constexpr uint64_t timelineRingLines(uint32_t depth) { return timelineSlots(depth) + 1; }

// The first and last time a try's primitives moved data (BlockExecutor::markProgress), where the
// timeline is kept.
struct DataStamps {
  uint64_t firstNs = 0;
  uint64_t lastNs = 0;
  OCCL_HD void mark(uint64_t now) {
    if (firstNs == 0) firstNs = now;
    lastNs = now;
  }
};

// Leader only. Out of line, with the words as arguments rather than a record built on the
// stack: the daemon kernel's frame is what its tile loop spills into (kernel_resources_test).
OCCL_HD OCCL_NOINLINE inline void appendTimeline(TimelineRing& ring, uint32_t depth, uint64_t collId, uint64_t seq,
                                                 uint64_t takenNs, uint64_t startedNs, uint64_t firstDataNs,
                                                 uint64_t lastDataNs, uint64_t partFlags) {
  using atomics::Scope;  // daemon memory, which the host reads by copies
  const uint64_t n = atomics::loadRelaxed<Scope::Device>(&ring.count);
  atomics::fence<atomics::FenceOrder::Release, Scope::Device>();
  uint64_t* w = ring.records()[n % timelineSlots(depth)].words;
  atomics::storeRelaxed<Scope::Device>(&w[kTlCollId], collId);
  atomics::storeRelaxed<Scope::Device>(&w[kTlSeq], seq);
  atomics::storeRelaxed<Scope::Device>(&w[kTlTaken], takenNs);
  atomics::storeRelaxed<Scope::Device>(&w[kTlStarted], startedNs);
  atomics::storeRelaxed<Scope::Device>(&w[kTlFirstData], firstDataNs);
  atomics::storeRelaxed<Scope::Device>(&w[kTlLastData], lastDataNs);
  atomics::storeRelaxed<Scope::Device>(&w[kTlDone], exec::nowNs());
  atomics::storeRelaxed<Scope::Device>(&w[kTlPartFlags], partFlags);
  atomics::storeRelease<Scope::Device>(&ring.count, n + 1);
}

}  // namespace occl
