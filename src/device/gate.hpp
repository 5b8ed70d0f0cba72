// Gates: a submission that starts only when something outside the daemon says its input is ready
// (occlSubmitGated + occlGateOpen on any backend; a CUDA stream with occlSubmitOnStream), and a
// word that says when it completed, which a stream waits on (issue 41).
//
// The protocol, per collective, in its gate words (CollDesc::gateWords: shared memory, which a
// CUDA stream's 32-bit writes and waits accept where daemon memory from a pool is refused):
// - Submission `seq` of a collective has gate slot seq % window (CollDesc::inflightWindow), the
//   slot of its callback. A gated submission's SQE carries kSqeGated.
// - Its opener writes gateValue(seq) into gateOpen[slot]: the host with a release store or the
//   stream with a 32-bit stream write, ordered after the work that produced the input. A block
//   that takes the task starts it only once gateReached(gateOpen[slot], seq) (an acquire at
//   system scope: the opener is not a daemon thread); until then it is skipped like a task that
//   waits, and preemption keeps every other collective going, so gates opened in any order
//   across ranks cannot deadlock.
// - The block that publishes the submission's CQE first writes gateValue(seq) into gateDone[slot]
//   (a release at system scope), whatever its status: a stream that waits there is released by a
//   failure too. The host writes it for the submissions it fails itself (Comm::abort).
// - Values are 32 bits, compared cyclically as a stream's wait compares them
//   ((int32_t)(word - value) >= 0): a slot's values grow by the window, in order, because a
//   submission may reuse a slot only once the previous one's callback fired (which needed its gate
//   open and its done word written), so neither word is ever ahead of the submission that owns
//   the slot by 2^31.
// - The timeout (config.collTimeoutMs) counts from the moment a block sees the gate open: a
//   submission may wait for its gate as long as the work before it takes.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

// What a block's task knows of its gate (TaskEntry::gate).
enum GateState : uint16_t {
  kGateNone = 0,    // an ordinary submission
  kGateClosed = 1,  // gated, not seen open yet
  kGateOpen = 2,    // gated, seen open: it runs, and writes gateDone when it completes
};

// The word an opener writes, and a completion writes, for submission `seq`.
OCCL_HD inline uint32_t gateValue(uint64_t seq) { return static_cast<uint32_t>(seq + 1); }

// Whether gate word `word` says submission `seq` is open (or done): a cyclic comparison.
OCCL_HD inline bool gateReached(uint32_t word, uint64_t seq) {
  return static_cast<int32_t>(word - gateValue(seq)) >= 0;
}

}  // namespace occl
