// What a Program's parts mean, for every pass over one: the limits it must respect, the errors
// the passes collect, the names messages give its elements, which steps send, receive, read and
// write, and the connectors a block owns. The validator (validate.cpp), the cross-rank checks
// (validate_graph.cpp) and the capacity search (capacity.cpp) all read it; none of them reads
// another's header for these, so their files include each other in one direction only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "device/step.hpp"
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

// What each op does is device/step.hpp's table (kStepOps): stepUsesSendConnector,
// stepUsesRecvConnector (a block's connections), stepReadsSrc, stepWritesDst, ...

// The peers a block sends to (sending) or receives from, in the order it first names them: the
// block's own peer first, then those of its steps. The block owns one connector for each.
std::vector<int32_t> connectionPeers(const BlockProgram& b, bool sending);

// Chunks of the user's input/output buffer one loop covers, or -1 when nChunksPerLoop does not
// divide into whole per-rank chunks for this collective.
int64_t userBufferChunks(const Program& p, BufferKind b);

}  // namespace occl::ir
