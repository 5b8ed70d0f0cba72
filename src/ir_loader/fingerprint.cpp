#include "ir_loader/fingerprint.hpp"

#include "util/fnv1a.hpp"

namespace occl::ir {
namespace {

void addStep(Fnv1a& h, const Step& s) {
  h.add(s.op).add(s.srcBuf).add(s.dstBuf).add(s.srcOff).add(s.dstOff).add(s.count);
  h.add(s.depBlock).add(s.depStep).add(s.hasDep).add(s.postOp).add(s.sendPeer).add(s.recvPeer);
}

}  // namespace

uint64_t fingerprint(const Program& p) {
  Fnv1a h;
  h.add(p.name).add(p.protocol).add(p.coll).add(p.inPlace).add(p.outOfPlace).add(p.nRanks).add(p.nChannels);
  h.add(p.nChunksPerLoop).add(p.minBytes).add(p.maxBytes).add(p.raggedChunksAllowed);
  for (const RankProgram& r : p.ranks) {
    h.add(r.inputChunks).add(r.outputChunks).add(r.scratchChunks).add(static_cast<uint64_t>(r.blocks.size()));
    for (const BlockProgram& b : r.blocks) {
      h.add(b.sendPeer).add(b.recvPeer).add(b.channel).add(static_cast<uint64_t>(b.steps.size()));
      for (const Step& s : b.steps) addStep(h, s);
    }
  }
  return h.value();
}

}  // namespace occl::ir
