// What one daemon block tells the host: one cache line per block, written by the block's leader
// only, read by the host at any time. On the GPU it is host-mapped memory, so the block's side
// is plain stores (defect D5: no device read-modify-write crosses the bus).
#pragma once

#include <cstdint>

namespace occl {

struct alignas(64) BlockReport {
  uint64_t sqNext;       // the next SQ ticket this block reads: it has copied every entry before it
  uint64_t cqPublished;  // CQEs this block has written into its completion ring
  uint32_t held;         // submissions in this block's task queue when it last left a launch
  uint32_t pad0;
  uint64_t pad[5];
};
static_assert(sizeof(BlockReport) == 64, "one report line per daemon block");

}  // namespace occl
