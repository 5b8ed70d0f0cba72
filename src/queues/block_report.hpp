// What one daemon block tells the host: one cache line per block, written by the block's leader
// only, read by the host at any time. On the GPU it is host-mapped memory, so the block's side
// is plain stores (defect D5: no device read-modify-write crosses the bus), and few of them: a
// block writes its line as it leaves a launch, and its SQ cursor besides when the SQ asks
// (queues/sq.hpp), not for every entry or completion (issue 40).
#pragma once

#include <cstdint>

namespace occl {

struct alignas(64) BlockReport {
  uint64_t sqNext;       // the block has copied every entry of its queue before this ticket (the SQ, or
                         // the relay where the daemon fans out: daemon.hpp)
  uint64_t cqPublished;  // CQEs this block had written into its completion ring when it last left a launch
  uint32_t held;         // submissions in this block's task queue when it last left a launch
  uint32_t pad0;
  uint64_t relayed;      // block 0 of a daemon that fans out: entries it had relayed when it last left a launch
  uint64_t pad[4];
};
static_assert(sizeof(BlockReport) == 64, "one report line per daemon block");

}  // namespace occl
