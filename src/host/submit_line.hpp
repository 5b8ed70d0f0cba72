// What a submission reads and writes of its collective, on one cache line (Comm::checkEntry,
// Comm::prepareEntry, Comm::submitGroup). A thread that submits after doing other work finds its
// collectives' lines cold, and one that shares its core with the daemon or the poller finds them
// moved: a check that read eight lines spread over the Collective waited for each (measured: 32
// AllReduces of 8 B as one group with the daemon on its own thread took 64-68 ns an entry, 50
// with those eight lines prefetched first; bench/results/submit-group-2026-12-01.md).
//
// The registration's values are copies made once, before the collective is published (the
// Collective keeps the originals for the daemon's table). nextSeq is written under the
// communicator's submit lock and read by the completion side; the other mutable fields are the
// submit lock's alone. What the completion side writes (completedSeq, the callback slots) lives
// on lines of its own (Collective), so that a completion does not take this line away.
#pragma once

#include <atomic>
#include <cstdint>

#include "device/step.hpp"

namespace occl::host {

enum SubmitLineFlags : uint8_t {
  kLineVectorCounts = 1u << 0,   // desc.vectorCounts: submitted with occlSubmitV
  kLineVariableCount = 1u << 1,  // desc.variableCount (or vectorCounts): the SQE carries a count
  kLineSharedBuffers = 1u << 2,  // desc.sharedBuffers: the buffers must be occlMemAlloc memory
  kLineInPlaceDefined = 1u << 3, // the type has an in-place form (AllToAll has none)
  kLineSmallForm = 1u << 4,      // a small form for counts up to CollDesc::smallCount
};

// The form class of the last submission queued (Collective::changesForm). Unknown at first: the
// first submission's wait costs one look, since nothing is before it.
enum class LastForm : uint8_t { Unknown, Small, Large };

struct alignas(64) SubmitLine {
  std::atomic<uint64_t> nextSeq{0};  // submissions queued, the next one's number (addByOneWriter)
  uint64_t completedSeen = 0;        // the completion side's count as Collective::windowFits last read it
  uint64_t count = 0;                // the registered count
  uint64_t sendBytes = 0;            // the registered count's buffers (Collective::BufferExtents)
  uint64_t recvBytes = 0;
  uint64_t inPlaceShift = 0;         // recvAt - sendAt, mod 2^64: an in-place call's recvbuf - sendbuf
  uint32_t index = 0;                // the table index its SQEs name
  uint32_t tasks = 1;                // task-queue entries one submission takes (tasksPerSubmission)
  uint16_t window = 0;               // submissions in flight at most
  uint16_t nParts = 0;               // the parts a large-form SQE names
  uint8_t groupScratch = 0;          // Comm::submitGroup's entries of it checked so far, <= window
  uint8_t flags = 0;                 // SubmitLineFlags
  LastForm lastForm = LastForm::Unknown;
};
static_assert(sizeof(SubmitLine) == 64, "a submission reads one cache line of its collective");
static_assert(kMaxInflightPerColl <= UINT8_MAX, "SubmitLine::groupScratch counts up to the window in 8 bits");

}  // namespace occl::host
