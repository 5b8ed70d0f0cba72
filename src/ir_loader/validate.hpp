// Static checks of a Program, whether parsed from MSCCL-IR or generated: limits, buffer bounds,
// peers, send/receive matching across ranks, dependencies, and deadlock freedom of one tile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir_loader/program.hpp"

namespace occl::ir {

// Limits a Program must respect. They mirror the daemon's (64 blocks per rank, 4096 steps per
// block) and keep validation of hostile input bounded in time and memory.
inline constexpr int32_t kMaxRanks = 1024;
inline constexpr int32_t kMaxChannels = 64;
inline constexpr int32_t kMaxChunksPerLoop = 65536;
inline constexpr int32_t kMaxBlocksPerRank = 64;
inline constexpr int32_t kMaxStepsPerBlock = static_cast<int32_t>(occl::kMaxStepsPerBlock);  // the daemon's
inline constexpr int32_t kMaxScratchChunks = 1 << 20;
inline constexpr size_t kMaxErrors = 50;

// One problem found in a program. `line` is 1-based in the source file, 0 when unknown (generated
// programs); `element` names the XML element, e.g. "<gpu id=1>/<tb id=0>/<step s=3>".
struct LoadError {
  int line = 0;
  std::string element;
  std::string message;
};

// "line 12, <gpu id=1>/<tb id=0>/<step s=3>: attribute 'cnt' must be >= 0, got -2"
std::string formatError(const LoadError& e);
std::string formatErrors(const std::vector<LoadError>& errors, std::string_view sourceName);
// The same for warnings: "SOURCE: warning: line 12, <step>: ...", one line each.
std::string formatWarnings(const std::vector<LoadError>& warnings, std::string_view sourceName);

// Collects errors up to kMaxErrors; past that it records one final note and drops the rest, so
// a hostile input cannot make the report (or the time spent building it) unbounded.
class ErrorList {
 public:
  void add(int line, std::string element, std::string message);
  bool full() const { return truncated_; }
  bool empty() const { return errors_.empty(); }
  size_t size() const { return errors_.size(); }
  std::vector<LoadError> take() { return std::move(errors_); }

 private:
  std::vector<LoadError> errors_;
  bool truncated_ = false;
};

// Names used in messages, in the XML's terms so a user can find the element in the file.
std::string rankElement(int32_t rank);
std::string blockElement(int32_t rank, int32_t block);
std::string stepElement(int32_t rank, int32_t block, int32_t step);
const char* opName(OpType op);
const char* bufferName(BufferKind b);
const char* collName(CollKind c);

bool opSends(OpType op);
bool opReceives(OpType op);
bool opReadsSrc(OpType op);
bool opWritesDst(OpType op);

// The peers a block sends to (sending) or receives from, in the order it first names them: the
// block's own peer first, then those of its steps. The block owns one connector for each.
std::vector<int32_t> connectionPeers(const BlockProgram& b, bool sending);

// Chunks of the user's input/output buffer one loop covers, or -1 when nChunksPerLoop does not
// divide into whole per-rank chunks for this collective.
int64_t userBufferChunks(const Program& p, BufferKind b);

// Every check: limits, per-step bounds and peers, then (only if those pass) connection matching,
// dependencies and acyclicity of one tile's waits with unbounded connectors. Empty result = the
// program is safe to run on connectors of at least minConnectorSlots(p) slots.
std::vector<LoadError> validateProgram(const Program& p);

// The fewest connector slots (occlConfig_t::connectorSlots) with which one tile of `p` cannot
// deadlock. A connector holds that many chunk-tiles, so the k-th chunk a tile sends on a
// connection waits until its receiver has consumed chunk k - slots; sends that run ahead of the
// matching receives (all-pairs exchanges) or fused steps that hold a received chunk while they
// wait for room (rings) need more than one. 0 exactly when validateProgram(p) reports a problem.
int32_t minConnectorSlots(const Program& p);

// Sets Step::postOp on the steps whose reduction completes a value (all ranks' inputs summed):
// where avg divides. Needs a program that passes validateProgram(); the MSCCL-IR loader calls it,
// generators set postOp themselves. Returns false (marking nothing) for an invalid program or one
// too large to replay.
bool markPostOps(Program& p);

// The root a rooted program was written for: the one rank that writes its output buffer
// (Reduce) or the one rank that receives nothing (Broadcast). nullopt for other collectives, or
// when no single rank is (MSCCL-IR carries no root, so this is how a registration's root is
// checked against the program's).
std::optional<int32_t> programRoot(const Program& p);

// Human-readable overview: ranks, threadblocks per rank, steps, connector slots needed
// (Program::minConnectorSlots), connections (peer, channel, dir).
std::string summarize(const Program& p);

}  // namespace occl::ir
