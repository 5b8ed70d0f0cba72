// Per-rank checks of a Program (limits, peers, buffer bounds). The cross-rank checks (connection
// matching, dependencies, deadlock freedom) are in validate_graph.cpp; they run only when these
// pass, so they may index peers and steps without re-checking.
#include "ir_loader/validate.hpp"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir_loader/validate_graph.hpp"

namespace occl::ir {

namespace {

int32_t declaredChunks(const RankProgram& r, BufferKind b) {
  switch (b) {
    case BufferKind::Input: return r.inputChunks;
    case BufferKind::Output: return r.outputChunks;
    default: return r.scratchChunks;
  }
}

class LocalChecker {
 public:
  LocalChecker(const Program& p, ErrorList& errors) : p_(p), errors_(errors) {}

  void run() {
    checkProgram();
    if (!errors_.empty()) return;  // ranks may not even be indexable
    for (int32_t r = 0; r < p_.nRanks && !errors_.full(); ++r) checkRank(r);
  }

 private:
  void checkProgram() {
    auto bad = [&](std::string msg) { errors_.add(0, "<algo>", std::move(msg)); };
    if (p_.nRanks < 1 || p_.nRanks > kMaxRanks) bad(absl::StrCat("ngpus must be in 1..", kMaxRanks, ", got ", p_.nRanks));
    if (p_.nChannels < 1 || p_.nChannels > kMaxChannels)
      bad(absl::StrCat("nchannels must be in 1..", kMaxChannels, ", got ", p_.nChannels));
    if (p_.nChunksPerLoop < 1 || p_.nChunksPerLoop > kMaxChunksPerLoop)
      bad(absl::StrCat("nchunksperloop must be in 1..", kMaxChunksPerLoop, ", got ", p_.nChunksPerLoop));
    if (p_.protocol != "Simple" && p_.protocol != "LL" && p_.protocol != "LL128")
      bad(absl::StrCat("proto must be Simple, LL or LL128, got '", p_.protocol, "'"));
    if (p_.minBytes > p_.maxBytes) bad(absl::StrCat("minBytes ", p_.minBytes, " exceeds maxBytes ", p_.maxBytes));
    if (p_.nRanks >= 1 && static_cast<int64_t>(p_.ranks.size()) != p_.nRanks)
      bad(absl::StrCat("ngpus is ", p_.nRanks, " but the program has ", p_.ranks.size(), " ranks"));
  }

  void checkRank(int32_t r) {
    const RankProgram& rank = p_.ranks[r];
    const int line = rank.sourceLine;
    for (BufferKind b : {BufferKind::Input, BufferKind::Output, BufferKind::Scratch}) {
      const int64_t have = declaredChunks(rank, b), limit = userBufferChunks(p_, b);
      if (have < 0 || have > limit)
        errors_.add(line, rankElement(r),
                    absl::StrFormat("%s_chunks=%d is outside 0..%d (the %s buffer of %s with nchunksperloop=%d, "
                                    "ngpus=%d)", bufferName(b), have, limit, bufferName(b), collName(p_.coll),
                                    p_.nChunksPerLoop, p_.nRanks));
    }
    if (rank.blocks.size() > static_cast<size_t>(kMaxBlocksPerRank))
      errors_.add(line, rankElement(r), absl::StrCat("has ", rank.blocks.size(), " threadblocks, at most ",
                                                     kMaxBlocksPerRank, " are allowed"));
    for (size_t b = 0; b < rank.blocks.size() && !errors_.full(); ++b) checkBlock(r, static_cast<int32_t>(b));
  }

  void checkBlock(int32_t r, int32_t b) {
    const BlockProgram& block = p_.ranks[r].blocks[b];
    auto bad = [&](std::string msg) { errors_.add(block.sourceLine, blockElement(r, b), std::move(msg)); };
    checkPeer(block.sendPeer, r, "send", bad);
    checkPeer(block.recvPeer, r, "recv", bad);
    if (block.channel < 0 || block.channel >= p_.nChannels)
      bad(absl::StrCat("chan must be in 0..", p_.nChannels - 1, " (nchannels=", p_.nChannels, "), got ", block.channel));
    if (block.steps.size() > static_cast<size_t>(kMaxStepsPerBlock))
      bad(absl::StrCat("has ", block.steps.size(), " steps, at most ", kMaxStepsPerBlock, " are allowed"));
    for (size_t s = 0; s < block.steps.size() && !errors_.full(); ++s) checkStep(r, b, static_cast<int32_t>(s));
  }

  template <typename Report>
  void checkPeer(int32_t peer, int32_t self, const char* what, Report& bad) {
    if (peer == -1) return;
    if (peer < 0 || peer >= p_.nRanks) bad(absl::StrCat(what, " peer must be -1 or in 0..", p_.nRanks - 1, ", got ", peer));
    else if (peer == self) bad(absl::StrCat(what, " peer must not be the rank itself (", self, ")"));
  }

  void checkStep(int32_t r, int32_t b, int32_t s) {
    const BlockProgram& block = p_.ranks[r].blocks[b];
    const Step& st = block.steps[s];
    auto bad = [&](std::string msg) { errors_.add(st.sourceLine, stepElement(r, b, s), std::move(msg)); };
    checkPeer(st.sendPeer, r, "step send", bad);
    checkPeer(st.recvPeer, r, "step recv", bad);
    if (stepUsesSendConnector(st.op) && sendPeerOf(block, st) < 0)
      bad(absl::StrCat("'", opName(st.op), "' sends, but its threadblock has no send peer (send=-1)"));
    if (stepUsesRecvConnector(st.op) && recvPeerOf(block, st) < 0)
      bad(absl::StrCat("'", opName(st.op), "' receives, but its threadblock has no recv peer (recv=-1)"));
    const int32_t minCount = st.op == OpType::Nop ? 0 : 1;
    if (st.count < minCount) bad(absl::StrCat("cnt must be >= ", minCount, ", got ", st.count));
    if (st.count >= minCount && st.op != OpType::Nop) {
      if (stepReadsSrc(st.op)) checkRange(r, "src", st.srcBuf, st.srcOff, st.count, bad);
      if (stepWritesDst(st.op)) checkRange(r, "dst", st.dstBuf, st.dstOff, st.count, bad);
    }
    if ((st.depBlock < 0) != (st.depStep < 0) || st.depBlock < -1 || st.depStep < -1)
      bad(absl::StrCat("depid and deps must both be -1 or both >= 0, got depid=", st.depBlock, " deps=", st.depStep));
  }

  template <typename Report>
  void checkRange(int32_t r, const char* which, BufferKind buf, int32_t off, int32_t count, Report& bad) {
    const int64_t have = declaredChunks(p_.ranks[r], buf);
    if (off < 0 || static_cast<int64_t>(off) + count > have)
      bad(absl::StrFormat("%soff=%d cnt=%d is outside buffer '%s' of %d chunks", which, off, count, bufferName(buf), have));
  }

  const Program& p_;
  ErrorList& errors_;
};

}  // namespace

std::optional<ChunkWaitGraph> validatedWaitGraph(const Program& p, ErrorList& errors) {
  LocalChecker(p, errors).run();
  if (!errors.empty()) return std::nullopt;
  return checkCrossRank(p, errors);
}

std::vector<LoadError> validateProgram(const Program& p) {
  ErrorList errors;
  validatedWaitGraph(p, errors);
  return errors.take();
}

// Fewer slots only add waits: the node sending chunk k then waits for the receipt of a later
// chunk, which itself comes after the receipt of the earlier one. So deadlock freedom is monotone
// in the slot count, and with as many slots as the busiest connection carries per tile no send
// waits at all, which is the graph validation found acyclic: bisect between the two.
int32_t minConnectorSlots(const Program& p) {
  ErrorList errors;
  const std::optional<ChunkWaitGraph> graph = validatedWaitGraph(p, errors);
  if (!graph) return 0;
  int32_t enough = std::max(graph->maxChunksPerConnection(), 1), tooFew = 0;
  while (enough - tooFew > 1) {
    const int32_t mid = tooFew + (enough - tooFew) / 2;
    (graph->deadlockFree(mid) ? enough : tooFew) = mid;
  }
  return enough;
}

std::optional<int32_t> programRoot(const Program& p) {
  if (!collInfo(p.coll).rooted) return std::nullopt;
  std::optional<int32_t> root;
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    bool writesOutput = false, receives = false;
    for (const BlockProgram& b : p.ranks[r].blocks)
      for (const Step& s : b.steps) {
        writesOutput = writesOutput || (stepWritesDst(s.op) && s.dstBuf == BufferKind::Output);
        receives = receives || stepUsesRecvConnector(s.op);
      }
    if (p.coll == CollKind::Reduce ? writesOutput : !receives) {
      if (root) return std::nullopt;  // two candidates
      root = static_cast<int32_t>(r);
    }
  }
  return root;
}

namespace {
const char* placementName(const Program& p) {
  if (p.inPlace && p.outOfPlace) return "in-place and out-of-place";
  return p.inPlace ? "in-place" : "out-of-place";
}
}  // namespace

std::string summarize(const Program& p) {
  size_t totalSteps = 0, totalBlocks = 0;
  for (const RankProgram& r : p.ranks) {
    totalBlocks += r.blocks.size();
    for (const BlockProgram& b : r.blocks) totalSteps += b.steps.size();
  }
  std::string out = absl::StrFormat(
      "%s: %s, %s, proto %s, %d ranks, %d channels, %d chunks per loop, %d threadblocks, %d steps\n", p.name,
      collName(p.coll), placementName(p), p.protocol, p.nRanks, p.nChannels,
      p.nChunksPerLoop, totalBlocks, totalSteps);
  absl::StrAppendFormat(&out, "  connectors need >= %d slots (registration gives each max(config.connectorSlots, %d))\n",
                        p.minConnectorSlots, p.minConnectorSlots);
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankProgram& rank = p.ranks[r];
    size_t steps = 0;
    std::string conns;
    for (const BlockProgram& b : rank.blocks) {
      steps += b.steps.size();
      for (int32_t peer : connectionPeers(b, true)) absl::StrAppend(&conns, " (", peer, ",", b.channel, ",send)");
      for (int32_t peer : connectionPeers(b, false)) absl::StrAppend(&conns, " (", peer, ",", b.channel, ",recv)");
    }
    absl::StrAppendFormat(&out, "  rank %d: %d threadblocks, %d steps, chunks i=%d o=%d s=%d; connections (peer,channel,dir):%s\n",
                          r, rank.blocks.size(), steps, rank.inputChunks, rank.outputChunks, rank.scratchChunks,
                          conns.empty() ? " none" : conns);
  }
  return out;
}

}  // namespace occl::ir
