#include "ir_loader/program_queries.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace occl::ir {

std::string formatError(const LoadError& e) {
  std::string out;
  if (e.line > 0) absl::StrAppend(&out, "line ", e.line, ", ");
  if (!e.element.empty()) absl::StrAppend(&out, e.element, ": ");
  absl::StrAppend(&out, e.message);
  return out;
}

std::string formatErrors(const std::vector<LoadError>& errors, std::string_view sourceName) {
  std::string out;
  for (const LoadError& e : errors) absl::StrAppend(&out, std::string(sourceName), ": ", formatError(e), "\n");
  return out;
}

std::string formatWarnings(const std::vector<LoadError>& warnings, std::string_view sourceName) {
  std::string out;
  for (const LoadError& w : warnings) absl::StrAppend(&out, std::string(sourceName), ": warning: ", formatError(w), "\n");
  return out;
}

void ErrorList::add(int line, std::string element, std::string message) {
  if (truncated_) return;
  if (errors_.size() == kMaxErrors) {
    truncated_ = true;
    errors_.push_back({0, "", absl::StrCat("too many errors; only the first ", kMaxErrors, " are shown")});
    return;
  }
  errors_.push_back({line, std::move(element), std::move(message)});
}

std::string rankElement(int32_t rank) { return absl::StrCat("<gpu id=", rank, ">"); }
std::string blockElement(int32_t rank, int32_t block) {
  return absl::StrCat(rankElement(rank), "/<tb id=", block, ">");
}
std::string stepElement(int32_t rank, int32_t block, int32_t step) {
  return absl::StrCat(blockElement(rank, block), "/<step s=", step, ">");
}

const char* opName(OpType op) { return stepOpInfo(op).name; }
const char* bufferName(BufferKind b) {
  static constexpr const char* kNames[] = {"i", "o", "s"};
  return kNames[static_cast<size_t>(b)];
}
const char* collName(CollKind c) {
  const CollTypeInfo& info = collInfo(c);
  return info.irName != nullptr ? info.irName : info.name;
}

std::vector<int32_t> connectionPeers(const BlockProgram& b, bool sending) {
  std::vector<int32_t> peers;
  auto note = [&](int32_t peer) {
    if (peer >= 0 && std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  };
  note(sending ? b.sendPeer : b.recvPeer);
  for (const Step& s : b.steps) {
    if (sending ? stepUsesSendConnector(s.op) : stepUsesRecvConnector(s.op)) note(sending ? sendPeerOf(b, s) : recvPeerOf(b, s));
  }
  return peers;
}

// The user's buffers hold count (input) and count*mult or count/mult (output) elements, and one
// chunk is count*mult/nChunksPerLoop elements; a program touching more chunks than fit would
// read or write past the user's allocation.
int64_t userBufferChunks(const Program& p, BufferKind b) {
  if (b == BufferKind::Scratch) return kMaxScratchChunks;
  const int64_t perLoop = p.nChunksPerLoop;
  const int64_t perRank = p.nRanks > 0 ? perLoop / p.nRanks : 0;
  // A buffer of count elements where the chunks divide count * n holds a rank's share of them.
  const Extent e = b == BufferKind::Input ? collInfo(p.coll).send : collInfo(p.coll).recv;
  return collInfo(p.coll).chunksByRanks && e == Extent::Count ? perRank : perLoop;
}

}  // namespace occl::ir
