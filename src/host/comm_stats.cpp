// What a communicator measured: the statistics of a registered collective (occlCollStats_t) and
// the records its daemon blocks kept (the timeline, daemon/timeline.hpp).
#include <algorithm>
#include <atomic>
#include <mutex>

#include "absl/strings/str_format.h"
#include "daemon/daemon.hpp"
#include "daemon/timeline.hpp"
#include "host/comm.hpp"

namespace occl::host {

Result<std::vector<occlTimelineEntry_t>> Comm::timeline() {
  const uint32_t depth = env_->timelineDepth;
  if (depth == 0)
    return Status::error(occlInvalidUsage,
                         "config.timelineDepth = 0: this communicator keeps no timeline (set it, or OCCL_TIMELINE_DEPTH)");
  constexpr size_t kRecordWords = sizeof(TimelineRecord) / sizeof(uint64_t);
  std::vector<occlTimelineEntry_t> out;
  const uint64_t slots = timelineSlots(depth);
  std::vector<uint64_t> words(kRecordWords * slots);
  for (uint32_t b = 0; b < env_->nBlocks; ++b) {
    TimelineRing* ring = timelineOf(*env_, static_cast<int>(b));
    uint64_t before = 0, after = 0;
    // The count, the records, the count again: a record is kept if it was complete before the
    // copy and was not overwritten during it (daemon/timeline.hpp).
    // (A seqlock's reader: the fences order the record loads after the first count and before the
    // second, where the daemon memory is this process's.)
    if (Status s = backend_->readDaemonWords(&before, &ring->count, 1); !s.ok()) return s;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Status s = backend_->readDaemonWords(words.data(), ring->records()[0].words, words.size()); !s.ok()) return s;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Status s = backend_->readDaemonWords(&after, &ring->count, 1); !s.ok()) return s;
    const uint64_t untouched = after >= slots ? after - slots + 1 : 0;
    const uint64_t newest = before >= depth ? before - depth : 0;
    for (uint64_t i = std::max(untouched, newest); i < before; ++i) {
      const uint64_t* w = &words[(i % slots) * kRecordWords];
      occlTimelineEntry_t e{};
      e.collId = w[kTlCollId];
      e.seq = w[kTlSeq];
      e.takenNs = w[kTlTaken];
      e.startedNs = w[kTlStarted];
      e.firstDataNs = w[kTlFirstData];
      e.lastDataNs = w[kTlLastData];
      e.doneNs = w[kTlDone];
      e.part = static_cast<uint32_t>(w[kTlPartFlags]);
      e.completed = (w[kTlPartFlags] >> 32) & kTimelineWroteCqe ? 1 : 0;
      out.push_back(e);
    }
  }
  return out;
}

Result<occlCollStats_t> Comm::collectiveStats(uint64_t collId) {
  std::lock_guard<std::mutex> lock(submitMu_);
  const Collective* c = registry_.find(collId);
  if (c == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  return c->stats(*backend_);
}

}  // namespace occl::host
