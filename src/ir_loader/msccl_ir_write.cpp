// Writing half of the MSCCL-IR loader: Program -> XML in the MSCCLang compiler's layout, which
// loadMscclIrString() reads back as the same program (tests/unit/ir_loader/ir_emit_test.cpp).
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir_loader/msccl_ir.hpp"

namespace occl::ir {
namespace {

// The one send or receive peer an MSCCL-IR threadblock names, -1 for none; more is an error.
Result<int32_t> singlePeer(const BlockProgram& b, bool sending, size_t rank, size_t block) {
  const std::vector<int32_t> peers = connectionPeers(b, sending);
  if (peers.size() > 1)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("%s %ss to %d peers; an MSCCL-IR threadblock names one",
                                         blockElement(static_cast<int32_t>(rank), static_cast<int32_t>(block)),
                                         sending ? "send" : "receive", peers.size()));
  return peers.empty() ? -1 : peers[0];
}

void appendAlgo(std::string& out, const Program& p) {
  // inplace alone is what MSCCLang writes; outofplace="1" is occl's way to say both.
  absl::StrAppendFormat(&out,
                        "<algo name=\"%s\" proto=\"%s\" nchannels=\"%d\" nchunksperloop=\"%d\" ngpus=\"%d\" "
                        "coll=\"%s\" inplace=\"%d\"",
                        p.name, p.protocol, p.nChannels, p.nChunksPerLoop, p.nRanks, collName(p.coll),
                        p.inPlace ? 1 : 0);
  if (p.inPlace && p.outOfPlace) absl::StrAppend(&out, " outofplace=\"1\"");
  if (p.minBytes != 0) absl::StrAppend(&out, " minBytes=\"", p.minBytes, "\"");
  if (p.maxBytes != std::numeric_limits<uint64_t>::max()) absl::StrAppend(&out, " maxBytes=\"", p.maxBytes, "\"");
  absl::StrAppend(&out, ">\n");
}

void appendStep(std::string& out, const Step& s, size_t index) {
  absl::StrAppendFormat(&out,
                        "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" "
                        "cnt=\"%d\" depid=\"%d\" deps=\"%d\" hasdep=\"%d\"/>\n",
                        index, opName(s.op), bufferName(s.srcBuf), s.srcOff, bufferName(s.dstBuf), s.dstOff, s.count,
                        s.depBlock, s.depStep, s.hasDep ? 1 : 0);
}

}  // namespace

Result<std::string> writeMscclIr(const Program& p) {
  if (collInfo(p.coll).irName == nullptr)
    return Status::error(occlInvalidArgument,
                         absl::StrCat("program ", p.name, " is point-to-point; MSCCL-IR describes collectives"));
  if (std::vector<LoadError> problems = validateProgram(p); !problems.empty())
    return Status::error(occlInvalidArgument,
                         absl::StrCat("program ", p.name, " is not valid:\n", formatErrors(problems, p.name)));
  std::string out;
  appendAlgo(out, p);
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const RankProgram& rank = p.ranks[r];
    absl::StrAppendFormat(&out, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"%d\">\n", r,
                          rank.inputChunks, rank.outputChunks, rank.scratchChunks);
    for (size_t b = 0; b < rank.blocks.size(); ++b) {
      const BlockProgram& block = rank.blocks[b];
      Result<int32_t> send = singlePeer(block, true, r, b), recv = singlePeer(block, false, r, b);
      if (!send.ok()) return send.status();
      if (!recv.ok()) return recv.status();
      absl::StrAppendFormat(&out, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"%d\">\n", b, send.value(),
                            recv.value(), block.channel);
      for (size_t s = 0; s < block.steps.size(); ++s) appendStep(out, block.steps[s], s);
      absl::StrAppend(&out, "    </tb>\n");
    }
    absl::StrAppend(&out, "  </gpu>\n");
  }
  absl::StrAppend(&out, "</algo>\n");
  return out;
}

}  // namespace occl::ir
