// The host-side form of a collective algorithm: what the MSCCL-IR loader parses and what the
// ring/direct generators produce. The host flattens one rank's part into the daemon's
// device-visible block plans (src/device/coll_desc.hpp) at registration.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "device/coll_types.hpp"
#include "device/step.hpp"

namespace occl::ir {

// MSCCL-IR's step types and buffers are the daemon's own (device/step.hpp):
//   Nop (dependency only), Send (s), Recv (r), RecvCopySend (rcs), RecvReduceSend (rrs),
//   RecvReduceCopy (rrc), RecvReduceCopySend (rrcs), Copy (cpy: dst = src), Reduce (re: dst op= src).
using OpType = occl::StepOp;
using BufferKind = occl::BufKind;

// occlCollType_t as a scoped enum: the same values (pinned below), so device/coll_types.hpp's
// table describes both.
enum class CollKind : uint8_t { AllReduce, AllGather, ReduceScatter, Reduce, Broadcast, AllToAll, Send, Recv, Gather, Scatter };
static_assert(static_cast<int>(CollKind::AllReduce) == occlCollAllReduce &&
                  static_cast<int>(CollKind::AllGather) == occlCollAllGather &&
                  static_cast<int>(CollKind::ReduceScatter) == occlCollReduceScatter &&
                  static_cast<int>(CollKind::Reduce) == occlCollReduce &&
                  static_cast<int>(CollKind::Broadcast) == occlCollBroadcast &&
                  static_cast<int>(CollKind::AllToAll) == occlCollAllToAll &&
                  static_cast<int>(CollKind::Send) == occlCollSend && static_cast<int>(CollKind::Recv) == occlCollRecv &&
                  static_cast<int>(CollKind::Gather) == occlCollGather &&
                  static_cast<int>(CollKind::Scatter) == occlCollScatter &&
                  static_cast<int>(CollKind::Scatter) + 1 == occlNumCollTypes,
              "CollKind mirrors occlCollType_t");
inline const CollTypeInfo& collInfo(CollKind c) { return occl::collInfo(static_cast<int>(c)); }

struct Step {
  OpType op = OpType::Nop;
  BufferKind srcBuf = BufferKind::Input;
  BufferKind dstBuf = BufferKind::Output;
  int32_t srcOff = 0;  // in chunks
  int32_t dstOff = 0;  // in chunks
  int32_t count = 1;   // chunks
  int32_t depBlock = -1;  // (block, step) of the same rank that must complete first
  int32_t depStep = -1;
  bool hasDep = false;  // other blocks wait on this step
  bool postOp = false;  // stores a final reduced value: avg divides by nRanks here
  // Generated programs only: the peer this step sends to / receives from, -1 = its block's.
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  int32_t sourceLine = 0;  // line in the IR file, 0 for generated programs
};

// One daemon block's part. An MSCCL-IR threadblock names one send and one recv peer for all its
// steps; a generated block may also let each step name its own (a direct AllToAll on one block).
// A block owns one connector per (peer, direction) on its channel.
struct BlockProgram {
  int32_t sendPeer = -1;
  int32_t recvPeer = -1;
  int32_t channel = 0;
  std::vector<Step> steps;
  int32_t sourceLine = 0;
};

inline int32_t sendPeerOf(const BlockProgram& b, const Step& s) { return s.sendPeer >= 0 ? s.sendPeer : b.sendPeer; }
inline int32_t recvPeerOf(const BlockProgram& b, const Step& s) { return s.recvPeer >= 0 ? s.recvPeer : b.recvPeer; }

struct RankProgram {
  int32_t inputChunks = 0;
  int32_t outputChunks = 0;
  int32_t scratchChunks = 0;
  std::vector<BlockProgram> blocks;
  int32_t sourceLine = 0;  // line of <gpu> in the IR file, 0 for generated programs
};

struct Program {
  std::string name;
  std::string protocol = "Simple";
  CollKind coll = CollKind::AllReduce;
  // MSCCL's placements: a call runs this program only if it is in place and inPlace is set, or
  // out of place and outOfPlace is set; other calls fall back to the built-in algorithm.
  bool inPlace = false;
  bool outOfPlace = true;
  int32_t nRanks = 0;
  int32_t nChannels = 1;
  int32_t nChunksPerLoop = 1;
  uint64_t minBytes = 0;
  uint64_t maxBytes = std::numeric_limits<uint64_t>::max();
  // Generated ring programs map chunk i of a sender to chunk i of its receiver, so the buffer may
  // be split into chunks of unequal size; IR programs need count*mult divisible by nChunksPerLoop.
  bool raggedChunksAllowed = false;
  // Connector slots the program needs so that no tile deadlocks (minConnectorSlots()). The
  // MSCCL-IR loader fills it; generated programs keep the default, uncomputed: they need at most
  // 2, the runtime minimum (checked by the tests).
  int32_t minConnectorSlots = 1;
  // Peer access (primitives/peer_read.hpp): ranks read and write each other's buffers, and
  // connectors carry notices, not tiles. Its form has one tile per chunk (the fold runs its own
  // tiles as sub-steps); only ranks of one process may run it.
  bool peerReads = false;
  std::vector<RankProgram> ranks;
};

// Elements of the logical buffer the chunks of a program divide: count times this multiplier.
inline uint64_t chunkMultiplier(CollKind coll, int32_t nRanks) {
  return occl::chunkMultiplier(static_cast<int>(coll), nRanks);
}

}  // namespace occl::ir
