// One program step as the daemon executes it, what each of its ops does (kStepOps), and the
// limits every layer shares. The MSCCL-IR loader and the generators (src/ir_loader) build steps
// with these very enums, so the host's programs and the device's steps cannot drift apart.
#pragma once

#include <cstdint>

#include "device/compat.hpp"

namespace occl {

inline constexpr int kMaxDaemonBlocks = 64;
inline constexpr uint32_t kMaxStepsPerBlock = 4096;  // step fits 12 bits of a progress word, and an int16_t
inline constexpr uint32_t kMaxTiles = 1u << 20;      // tile fits 20 bits of a progress word
inline constexpr uint32_t kMaxInflightPerColl = 64;  // submissions of one collective in flight

enum class StepOp : uint8_t {
  Nop, Send, Recv, RecvCopySend, RecvReduceSend, RecvReduceCopy, RecvReduceCopySend, Copy, Reduce,
  // Peer access (primitives/peer_read.hpp): ranks that share an address space read and write
  // each other's buffers in place; their connectors carry notices, not data. Generated programs
  // only (the MSCCL-IR loader has no names for them): an address means nothing in another process.
  PeerPost, PeerReduce, PeerRelease,
  // The peer AllToAll's: offer the receiver its chunk of this rank's input (notice 1), and take
  // the chunk a peer offered into this rank's output.
  PeerOffer, PeerTake,
};
// What each StepOp does, one row per op in enum order: the name messages give it, its MSCCL-IR
// type attribute (nullptr: generated programs only), and its traits. A data op moves one
// chunk-tile through each connector it receives from or sends to; the peer ops move data in place
// and pass notices, not tiles, through theirs (primitives/peer_read.hpp). The executor, the
// validator, the capacity search and the MSCCL-IR reader and writer all ask this table.
enum StepTraits : uint8_t {
  kReceivesTile = 1u << 0,   // takes a tile from its receive connector
  kSendsTile = 1u << 1,      // puts a tile on its send connector
  kReadsSrc = 1u << 2,       // reads its src chunks
  kWritesDst = 1u << 3,      // writes its dst chunks
  kRecvConnector = 1u << 4,  // owns a receive connector (tiles or notices)
  kSendConnector = 1u << 5,  // owns a send connector (tiles or notices)
};

struct StepOpInfo {
  StepOp op;
  const char* name;
  const char* irName;
  uint8_t traits;  // StepTraits
};

inline constexpr uint8_t kRecvData = kReceivesTile | kRecvConnector;
inline constexpr uint8_t kSendData = kSendsTile | kSendConnector;
// rcs forwards what it received, so it reads no local source; rrs reduces into what it forwards,
// so it writes no local destination.
inline constexpr StepOpInfo kStepOps[] = {
    {StepOp::Nop, "nop", "nop", 0},
    {StepOp::Send, "s", "s", kSendData | kReadsSrc},
    {StepOp::Recv, "r", "r", kRecvData | kWritesDst},
    {StepOp::RecvCopySend, "rcs", "rcs", kRecvData | kSendData | kWritesDst},
    {StepOp::RecvReduceSend, "rrs", "rrs", kRecvData | kSendData | kReadsSrc},
    {StepOp::RecvReduceCopy, "rrc", "rrc", kRecvData | kReadsSrc | kWritesDst},
    {StepOp::RecvReduceCopySend, "rrcs", "rrcs", kRecvData | kSendData | kReadsSrc | kWritesDst},
    {StepOp::Copy, "cpy", "cpy", kReadsSrc | kWritesDst},
    {StepOp::Reduce, "re", "re", kReadsSrc | kWritesDst},
    {StepOp::PeerPost, "peer-post", nullptr, kSendConnector},
    {StepOp::PeerReduce, "peer-reduce", nullptr, 0},
    {StepOp::PeerRelease, "peer-release", nullptr, kRecvConnector},
    {StepOp::PeerOffer, "peer-offer", nullptr, kSendConnector},
    {StepOp::PeerTake, "peer-take", nullptr, kRecvConnector},
};
inline constexpr int kNumStepOps = static_cast<int>(StepOp::PeerTake) + 1;
static_assert(sizeof(kStepOps) / sizeof(kStepOps[0]) == kNumStepOps, "one row per StepOp");
static_assert(
    [] {
      for (int i = 0; i < kNumStepOps; ++i)
        if (static_cast<int>(kStepOps[i].op) != i) return false;
      return true;
    }(),
    "kStepOps[op] describes op");

constexpr const StepOpInfo& stepOpInfo(StepOp op) { return kStepOps[static_cast<int>(op)]; }

// The ops with `trait`, one bit per op: scalars, so that device code may read them.
constexpr uint32_t stepOpsWith(uint8_t trait) {
  uint32_t ops = 0;
  for (const StepOpInfo& r : kStepOps)
    if ((r.traits & trait) != 0) ops |= 1u << static_cast<unsigned>(r.op);
  return ops;
}
inline constexpr uint32_t kOpsReceivingTiles = stepOpsWith(kReceivesTile);
inline constexpr uint32_t kOpsSendingTiles = stepOpsWith(kSendsTile);
inline constexpr uint32_t kOpsReadingSrc = stepOpsWith(kReadsSrc);
inline constexpr uint32_t kOpsWritingDst = stepOpsWith(kWritesDst);
inline constexpr uint32_t kOpsWithRecvConnector = stepOpsWith(kRecvConnector);
inline constexpr uint32_t kOpsWithSendConnector = stepOpsWith(kSendConnector);

OCCL_HD constexpr bool stepReceives(StepOp op) { return ((kOpsReceivingTiles >> static_cast<unsigned>(op)) & 1u) != 0; }
OCCL_HD constexpr bool stepSends(StepOp op) { return ((kOpsSendingTiles >> static_cast<unsigned>(op)) & 1u) != 0; }
OCCL_HD constexpr bool stepReadsSrc(StepOp op) { return ((kOpsReadingSrc >> static_cast<unsigned>(op)) & 1u) != 0; }
OCCL_HD constexpr bool stepWritesDst(StepOp op) { return ((kOpsWritingDst >> static_cast<unsigned>(op)) & 1u) != 0; }
// Whether the op owns a connector on that side (a data op's tiles, a peer op's notices).
OCCL_HD constexpr bool stepUsesRecvConnector(StepOp op) {
  return ((kOpsWithRecvConnector >> static_cast<unsigned>(op)) & 1u) != 0;
}
OCCL_HD constexpr bool stepUsesSendConnector(StepOp op) {
  return ((kOpsWithSendConnector >> static_cast<unsigned>(op)) & 1u) != 0;
}
static_assert(stepReceives(StepOp::RecvCopySend) && stepSends(StepOp::RecvCopySend) &&
                  !stepReadsSrc(StepOp::RecvCopySend) && !stepReceives(StepOp::PeerRelease) &&
                  stepUsesRecvConnector(StepOp::PeerRelease) && stepUsesSendConnector(StepOp::PeerPost) &&
                  !stepUsesSendConnector(StepOp::PeerReduce),
              "the traits a data op and a peer op have");

// Notices a peer program posts to each peer per submission; its connectors need this many slots.
inline constexpr uint32_t kPeerNotices = 2;
enum class BufKind : uint8_t { Input, Output, Scratch };

enum StepFlags : uint8_t {
  kStepHasDep = 1u << 0,  // other blocks wait on this step
  kStepPostOp = 1u << 1,  // this step stores a final reduced value: apply avg's division
};

inline constexpr uint16_t kNoConnector = 0xffff;

struct DeviceStep {
  StepOp op;
  BufKind srcBuf;
  BufKind dstBuf;
  uint8_t flags;      // StepFlags
  int32_t srcOff;     // chunks
  int32_t dstOff;     // chunks
  int32_t count;      // chunks
  int16_t depBlock;   // -1 = none
  int16_t depStep;
  uint16_t sendConn;  // index into BlockPlan::sends, kNoConnector when the step sends nothing
  uint16_t recvConn;  // index into BlockPlan::recvs, kNoConnector when it receives nothing
};
static_assert(sizeof(DeviceStep) == 24, "DeviceStep layout is shared by host and device");

}  // namespace occl
