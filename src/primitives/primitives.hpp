// The primitives: one program step applied to one tile of one chunk. A primitive either runs
// to completion (its connector slots committed) or does nothing at all, so a preempted
// collective's context is just "which step, which chunk, which tile" and nothing is sent twice.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/chunk_geometry.hpp"
#include "device/coll_desc.hpp"
#include "device/step.hpp"
#include "occl/occl.h"
#include "primitives/dispatch.hpp"
#include "primitives/reduce_copy.hpp"
#include "device/compat.hpp"
#include "queues/fifo.hpp"

namespace occl {

// The three buffers a step addresses, as seen by this rank for the current submission.
struct TaskBuffers {
  char* input;
  char* output;
  char* scratch;

  OCCL_HD char* get(BufKind kind) const {
    switch (kind) {
      case BufKind::Input: return input;
      case BufKind::Output: return output;
      default: return scratch;
    }
  }
};

// Chunk c of buffer `kind`, tile t of that chunk, in geometry `g` (device/chunk_geometry.hpp): a
// v-collective's Input and Output chunks are pieces of the submission's blocks (device/vec_table.hpp).
OCCL_HD inline uint64_t chunkStart(const ChunkGeometry& g, BufKind kind, uint64_t c) {
  if (g.vec != nullptr && kind != BufKind::Scratch)
    return vecPieceStart(vecBlocksOf(g.vec, g.vecRanks, kind)[c / g.groupChunks], c % g.groupChunks, g.groupChunks);
  return g.ragged ? c * g.totalElems / g.nChunks : c * g.chunkElems;
}
OCCL_HD inline uint64_t chunkLength(const ChunkGeometry& g, BufKind kind, uint64_t c) {
  if (g.vec != nullptr && kind != BufKind::Scratch)
    return vecPieceLength(vecBlocksOf(g.vec, g.vecRanks, kind)[c / g.groupChunks], c % g.groupChunks, g.groupChunks);
  return g.ragged ? chunkStart(g, kind, c + 1) - chunkStart(g, kind, c) : g.chunkElems;
}
// Elements of tile `t` of chunk `c`; 0 when the chunk is shorter (both ends of a connector
// compute the same length and skip the slot together).
OCCL_HD inline uint64_t tileLength(const ChunkGeometry& g, BufKind kind, uint64_t c, uint32_t t) {
  uint64_t len = chunkLength(g, kind, c), first = static_cast<uint64_t>(t) * g.tileElems;
  if (len <= first) return 0;
  return len - first < g.tileElems ? len - first : g.tileElems;
}
OCCL_HD inline uint64_t tileOffset(const ChunkGeometry& g, BufKind kind, uint64_t c, uint32_t t) {
  return chunkStart(g, kind, c) + static_cast<uint64_t>(t) * g.tileElems;
}

struct ReduceCopyCall {
  const void* a;
  const void* b;
  void* d0;
  void* d1;
  size_t n;
  uint64_t opArg;  // reduce_copy.hpp: Avg's divisor, PreMulSum's scalar

  template <typename T, typename Op>
  OCCL_HD void operator()() const {
    reduceCopy<T, Op>(static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(d0),
                      static_cast<T*>(d1), n, opArg);
  }
};

// PreMulSum's scalar for this rank, as the bits of one element: the registered value, or read
// from where the registration pointed (occlScalarDevice) when the step runs.
OCCL_HD inline uint64_t preMulScalarBits(const CollDesc& d) {
  if (d.preMulScalarPtr == nullptr) return d.preMulScalar;
  switch (d.elemBytes) {
    case 1: return *static_cast<const uint8_t*>(d.preMulScalarPtr);
    case 2: return *static_cast<const uint16_t*>(d.preMulScalarPtr);
    case 4: return *static_cast<const uint32_t*>(d.preMulScalarPtr);
    default: return *static_cast<const uint64_t*>(d.preMulScalarPtr);
  }
}

// A step's data op and argument. Avg divides by the rank count at its final reduction step
// (kStepPostOp on a step that reduces and stores). PreMulSum scales the operand a step reads from
// the rank's input; a step that reads no input runs as Sum.
struct StepOpArg {
  int op;
  uint64_t arg;
};

OCCL_HD inline StepOpArg stepOpArg(const CollDesc& d, const DeviceStep& step) {
  if (d.redOp == occlAvg) {
    const bool stores = step.op == StepOp::RecvReduceCopy || step.op == StepOp::RecvReduceCopySend ||
                        step.op == StepOp::Reduce;
    return {occlAvg, stores && (step.flags & kStepPostOp) != 0 ? d.nRanks : 0u};
  }
  if (d.redOp != ops::kOpPreMulSum) return {d.redOp, 0};
  if (stepReadsSrc(step.op) && step.srcBuf == BufKind::Input) return {ops::kOpPreMulSum, preMulScalarBits(d)};
  return {occlSum, 0};
}

// Performs the data movement of `step` on tile `t` of its `sub`-th chunk, once its connectors
// (`recv`, `send`: nullptr when the step has none) are ready: the caller has waited. It cannot fail.
// Never inlined: on the GPU the tile loop is a function of its own with the whole register budget
// (the kernel's control path is live around the call, not inside the loop), and ptxas reports its
// spills apart from the kernel's (tests/policy/kernel_resources_test.cpp pins them at zero).
OCCL_HD OCCL_NOINLINE inline void applyStep(const CollDesc& d, const ChunkGeometry& g, const DeviceStep& step, const FifoHandle* recv,
                              const FifoHandle* send, const TaskBuffers& bufs, uint32_t sub, uint32_t tile,
                              uint64_t n) {
  const uint64_t eb = d.elemBytes;
  char* src = bufs.get(step.srcBuf) + tileOffset(g, step.srcBuf, step.srcOff + sub, tile) * eb;
  char* dst = bufs.get(step.dstBuf) + tileOffset(g, step.dstBuf, step.dstOff + sub, tile) * eb;
  const StepOpArg opArg = stepOpArg(d, step);
  const uint64_t post = opArg.arg;
  const void* recvSlot = recv != nullptr ? recv->recvSlot() : nullptr;
  void* sendSlot = send != nullptr ? send->sendSlot() : nullptr;

  ReduceCopyCall call{nullptr, nullptr, nullptr, nullptr, static_cast<size_t>(n), 0};
  switch (step.op) {
    case StepOp::Send: call = {src, nullptr, sendSlot, nullptr, call.n, post}; break;
    case StepOp::Recv: call = {recvSlot, nullptr, dst, nullptr, call.n, 0}; break;
    case StepOp::RecvCopySend: call = {recvSlot, nullptr, dst, sendSlot, call.n, 0}; break;
    case StepOp::RecvReduceSend: call = {recvSlot, src, sendSlot, nullptr, call.n, post}; break;
    case StepOp::RecvReduceCopy: call = {recvSlot, src, dst, nullptr, call.n, post}; break;
    case StepOp::RecvReduceCopySend: call = {recvSlot, src, dst, sendSlot, call.n, post}; break;
    case StepOp::Copy:
      // In-place AllGather copies a chunk onto itself; PreMulSum still scales its input there.
      if (src == dst && opArg.op != ops::kOpPreMulSum) return;
      call = {src, nullptr, dst, nullptr, call.n, post};
      break;
    case StepOp::Reduce: call = {dst, src, dst, nullptr, call.n, post}; break;
    case StepOp::Nop: return;
    case StepOp::PeerPost:  // peer access moves no tile through slots: the executor runs it (peer_read.hpp)
    case StepOp::PeerReduce:
    case StepOp::PeerRelease:
    case StepOp::PeerOffer:
    case StepOp::PeerTake: return;
  }
  if (call.n != 0) dispatchTypeOp(d.dtype, opArg.op, call);  // an empty message of a variable count (executor.hpp)
  exec::blockSync();  // every lane's stores land before the leader publishes the slots
}

}  // namespace occl
