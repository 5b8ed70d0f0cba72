// One program step as the daemon executes it, and the limits every layer shares. The MSCCL-IR
// loader and the generators (src/ir_loader) build steps with these very enums, so the host's
// programs and the device's steps cannot drift apart. Plain data: no device code.
#pragma once

#include <cstdint>

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
};
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
