// Device-visible description of a registered collective: its static context (program, buffers
// layout, connectors), the shared per-collective state its blocks update, and the per-block
// dynamic context the daemon saves on preemption. The host builds these at registration
// (src/host/collective.cpp); the daemon only reads the static parts.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/compat.hpp"
#include "device/step.hpp"

namespace occl {

struct FifoHandle;  // queues/fifo.hpp: a block plan only points at its connectors
struct VecBlock;    // device/vec_table.hpp: a v-collective's blocks

// A block's steps and its connectors: one per peer it sends to and one per peer it receives
// from (an MSCCL-IR threadblock has at most one of each; a direct AllToAll block has one per peer).
struct BlockPlan {
  const DeviceStep* steps;
  const FifoHandle* sends;  // [nSends]
  const FifoHandle* recvs;  // [nRecvs]
  uint32_t nSteps;
  uint16_t nSends;
  uint16_t nRecvs;
};
static_assert(sizeof(BlockPlan) == 32, "BlockPlan layout is shared by host and device");

// Dynamic context of one (collective, block): where the block stands in the current submission.
// Saved only when it changed since it was loaded (lazy save).
struct alignas(16) BlockContext {
  uint64_t seq;   // submission this context belongs to
  uint32_t tile;
  uint32_t step;
  uint32_t sub;   // chunk within a multi-chunk step
  uint32_t started;  // 1 once the submission has executed anything (for statistics)
  uint64_t startNs;  // first execution of this submission on this block
};
static_assert(sizeof(BlockContext) == 32, "BlockContext layout is shared by host and device");

// Counters one block keeps for one collective; the host sums them over blocks.
struct alignas(64) BlockStats {
  uint64_t completions;
  uint64_t preemptions;
  uint64_t contextLoads;
  uint64_t contextSaves;
  uint64_t queueWaitNs;
  uint64_t executionNs;
  uint64_t pad[2];
};
static_assert(sizeof(BlockStats) == 64, "BlockStats layout is shared by host and device");

// Written by the daemon blocks of this rank while the collective runs.
struct alignas(64) CollShared {
  uint64_t progress[kMaxDaemonBlocks];  // dependency words: seq<<32 | tile<<12 | steps done
  uint32_t failStatus;                  // sticky occlResult_t once a submission failed
  uint32_t failedWhere;                 // where the first failure was seen (failedWhereWord), 0 = unknown
  uint32_t finished[kMaxInflightPerColl];  // blocks done with submission seq, at seq % window
  // A count mismatch (FailedAt::CountMismatch): this rank's count and the peer's, written by the
  // block that set failedWhere to it, right after (the host reads them once the failed CQE is in).
  uint64_t mismatchOwnCount;
  uint64_t mismatchPeerCount;
  // Submissions before this one have all completed (their CQE published), for a collective with a
  // small form (CollDesc::smallCount). A submission whose form differs from its predecessor's
  // (kSqeBarrier) starts once this reaches its seq: a small submission's part 0 covers the whole
  // buffer, where the large form's parts cover pieces of it, so the two forms' submissions on the
  // same buffers would otherwise overlap. Completions come in seq order as long as every change of
  // form waits (a form's parts each run its submissions in order), so the stores rise.
  uint64_t doneThrough;
};
static_assert(sizeof(CollShared) == 832, "CollShared layout is shared by host and device");
static_assert(offsetof(CollShared, failStatus) % 8 == 0 && offsetof(CollShared, failedWhere) == offsetof(CollShared, failStatus) + 4,
              "failStatus and failedWhere share one word, which the host reads whole");

// What a block was doing when it saw its collective fail, so that the host's message can name the
// peer (Collective::failurePlace): the connector it waited on, the connector a peer had poisoned,
// or the block of this rank whose step it waited for.
// CountMismatch: a receive connector's message came with another count than this rank's
// (CollDesc::variableCount; CollShared::mismatchOwnCount and mismatchPeerCount say which).
enum class FailedAt : uint32_t {
  Unknown = 0, Receive = 1, Send = 2, OtherBlock = 3, PoisonedReceive = 4, PoisonedSend = 5, CountMismatch = 6
};
// at << 28 | form << 26 | block << 16 | index (a connector of the block's plan, or a block).
OCCL_HD inline uint32_t failedWhereWord(FailedAt at, uint32_t form, uint32_t block, uint32_t index) {
  return static_cast<uint32_t>(at) << 28 | (form & 3u) << 26 | (block & 0x3ffu) << 16 | (index & 0xffffu);
}

// One executable form of a collective on this rank: a program flattened into block plans, with
// the chunk geometry and scratch it needs. A collective has one form per placement; both are the
// same when one program serves in-place and out-of-place calls (every built-in one does). A
// variable count may have a third, for its small submissions (kFormSmall).
struct ProgramForm {
  const BlockPlan* blocks;  // [CollDesc::nBlocks]; nSteps == 0 for a block with no part in this form
  char* scratch;
  uint64_t chunkElems;      // uniform chunk size (or the largest, when ragged)
  uint32_t nChunks;         // chunks per loop
  uint32_t nTiles;          // tiles per chunk
  uint32_t ragged;          // chunk c spans [c*total/nChunks, (c+1)*total/nChunks)
  uint32_t peerReads;       // the peer program: its connectors carry notices (primitives/peer_read.hpp)
  uint32_t raggedAllowed;   // the program's chunks may differ in size (a count per submission needs it
                            // unless the count splits evenly: device/chunk_geometry.hpp)
  uint32_t nParts;          // the parts a submission of this form runs: parts 0..nParts-1 of the
                            // collective's (an SQE of the form names this many: SqeView::nParts)
};
static_assert(sizeof(ProgramForm) == 48, "ProgramForm layout is shared by host and device");

inline constexpr uint32_t kFormOutOfPlace = 0;
inline constexpr uint32_t kFormInPlace = 1;
// A variable count's small submissions (count <= CollDesc::smallCount), either placement: a
// built-in program of fewer parts, or a cheaper one, that uses only connectors of the
// out-of-place form's (its FIFOs, so a count mismatch between a rank that took it and one that
// did not is still seen at the first receive: docs/design.md, "The small-message form").
inline constexpr uint32_t kFormSmall = 2;
inline constexpr uint32_t kForms = 3;
static_assert(kForms <= 4, "failedWhereWord gives the form two bits");

// Static context: immutable while the collective is registered.
struct CollDesc {
  uint64_t collId;
  uint64_t signature;    // hash of the registration; peers must agree
  uint32_t collIndex;
  uint8_t dtype;
  uint8_t redOp;
  uint8_t collType;
  uint8_t peerShared;    // the peer program between processes (primitives/peer_read.hpp)
  uint32_t nBlocks;      // parts (program blocks) that take part, in any form: daemonParts()
  uint32_t nRanks;       // avg divides by this
  uint64_t totalElems;   // count * multiplier: what the chunks divide
  uint64_t tileElems;    // elements per connector slot
  uint64_t elemBytes;
  uint64_t timeoutNs;    // 0 = none
  ProgramForm forms[kForms];  // kFormOutOfPlace, kFormInPlace, kFormSmall (nParts 0: none)
  CollShared* shared;
  BlockContext* contexts;   // [nBlocks]
  BlockStats* stats;        // [nBlocks]
  // Gates (device/gate.hpp), in shared memory: [inflightWindow] open words, then [inflightWindow]
  // done words. Not daemon memory: a CUDA stream's 32-bit writes and waits refuse memory from a
  // stream-ordered pool (cudaMallocAsync), which daemon memory is; they take mapped pinned memory.
  uint32_t* gateWords;
  uint16_t inflightWindow;  // submissions in flight at most, <= kMaxInflightPerColl
  uint8_t peerStream;       // out of place, a peer fold's copies to peers stream (peerCopiesStream)
  uint8_t variableCount;    // each submission carries its count, up to the registered one; the
                            // geometry is then the submission's (device/chunk_geometry.hpp)
  int32_t priority;
  uint64_t countMultiplier; // totalElems per element of count (ir::chunkMultiplier)
  // PreMulSum (redOp == ops::kOpPreMulSum): this rank's scalar, as the bits of one element; or,
  // when preMulScalarPtr is set (occlScalarDevice), where to read it when a step runs.
  uint64_t preMulScalar;
  const void* preMulScalarPtr;
  // A v-collective (occlSubmitV; device/vec_table.hpp): the rank count its tables describe, else 0;
  // the host's table per window slot (shared memory, [inflightWindow][2 * vecGroups]) and each
  // part's copy of its submission's (daemon memory, [nBlocks][2 * vecGroups]).
  uint32_t vecGroups;
  uint32_t pad;
  const VecBlock* vecSlots;
  VecBlock* vecCache;
  // A variable count's submissions of at most this count run forms[kFormSmall]; 0 = no small form.
  // Its parts then skip submissions, so a part's next submission is not always the one after its
  // last: the daemon moves the part's context to the seq it runs next (daemon.hpp, nextOnPart).
  uint64_t smallCount;
};
static_assert(kMaxInflightPerColl <= UINT16_MAX, "CollDesc::inflightWindow holds it");
static_assert(sizeof(CollDesc) == 304, "CollDesc layout is shared by host and device");

// Submission seq's slot in the per-window arrays (finished, gates, v-tables, callbacks). The
// window is a power of two (Config's maxInflightPerColl is checked to be one), so this is a mask:
// a 64-bit `%` is a division on the host's submit path and a long emulated sequence on a GPU.
OCCL_HD inline uint32_t windowSlot(uint64_t seq, uint32_t window) { return static_cast<uint32_t>(seq & (window - 1)); }

// Submission seq's gate words in CollDesc::gateWords: its opener's, and its completion's.
OCCL_HD inline uint32_t* gateOpenWord(const CollDesc& d, uint64_t seq) {
  return d.gateWords + windowSlot(seq, d.inflightWindow);
}
OCCL_HD inline uint32_t* gateDoneWord(const CollDesc& d, uint64_t seq) {
  return d.gateWords + d.inflightWindow + windowSlot(seq, d.inflightWindow);
}

// A collective's program blocks ("parts") are dealt round-robin to the daemon's blocks: daemon
// block b runs parts b, b + nDaemonBlocks, ... as tasks of their own. A program may have more parts
// than the daemon has blocks (an MSCCL-IR program with a threadblock per peer on a one-block
// daemon); the block then moves between them, when one waits, as it moves between collectives.
// Returns how many parts daemon block `block` runs.
OCCL_HD inline uint32_t daemonParts(uint32_t nParts, uint32_t nDaemonBlocks, uint32_t block) {
  return block < nParts ? (nParts - block + nDaemonBlocks - 1) / nDaemonBlocks : 0;
}

// Two-level table of registered collectives: pages are allocated on demand and never move, so
// the daemon can read an entry while the host registers another one.
struct CollTable {
  static constexpr uint32_t kPageBits = 10;
  static constexpr uint32_t kPageSize = 1u << kPageBits;
  static constexpr uint32_t kMaxPages = 1024;  // 1M collectives
  CollDesc** pages;  // [kMaxPages], each nullptr or [kPageSize] entries

  OCCL_HD const CollDesc* get(uint32_t index) const {
    // Daemon memory: the host writes a page pointer by a copy before any SQE names the page.
    CollDesc* page = atomics::loadAcquire<atomics::Scope::Device>(&pages[index >> kPageBits]);
    return page == nullptr ? nullptr : &page[index & (kPageSize - 1)];
  }
};
static_assert(sizeof(CollTable) == 8, "CollTable layout is shared by host and device");

}  // namespace occl
