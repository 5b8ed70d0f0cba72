#include "ir_loader/ring.hpp"

namespace occl::ir {
namespace {

int mod(int a, int n) { return ((a % n) + n) % n; }

Step makeStep(OpType op, BufferKind src, int srcChunk, BufferKind dst, int dstChunk) {
  Step s;
  s.op = op;
  s.srcBuf = src;
  s.dstBuf = dst;
  s.srcOff = srcChunk;
  s.dstOff = dstChunk;
  s.count = 1;
  return s;
}

BlockProgram ringAllReduceBlock(int rank, int n, int channel) {
  BlockProgram b;
  b.channel = channel;
  const int base = channel * n;
  auto chunk = [&](int k) { return base + mod(k, n); };
  constexpr auto In = BufferKind::Input;
  constexpr auto Out = BufferKind::Output;
  if (n == 1) {
    b.steps.push_back(makeStep(OpType::Copy, In, chunk(0), Out, chunk(0)));
    return b;
  }
  b.sendPeer = mod(rank + 1, n);
  b.recvPeer = mod(rank - 1, n);
  b.steps.push_back(makeStep(OpType::Send, In, chunk(rank), In, chunk(rank)));
  for (int k = 1; k <= n - 2; ++k)
    b.steps.push_back(makeStep(OpType::RecvReduceSend, In, chunk(rank - k), In, chunk(rank - k)));
  Step final = makeStep(OpType::RecvReduceCopySend, In, chunk(rank + 1), Out, chunk(rank + 1));
  final.postOp = true;
  b.steps.push_back(final);
  for (int k = 1; k <= n - 2; ++k)
    b.steps.push_back(makeStep(OpType::RecvCopySend, Out, chunk(rank + 1 - k), Out, chunk(rank + 1 - k)));
  b.steps.push_back(makeStep(OpType::Recv, Out, chunk(rank + 2), Out, chunk(rank + 2)));
  return b;
}

}  // namespace

Program makeRingAllReduce(int nRanks, int nChannels) {
  Program p;
  p.name = "ring";
  p.coll = CollKind::AllReduce;
  p.inPlace = false;
  p.nRanks = nRanks;
  p.nChannels = nChannels;
  p.nChunksPerLoop = nRanks * nChannels;
  p.raggedChunksAllowed = true;
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = p.nChunksPerLoop;
    for (int c = 0; c < nChannels; ++c) rp.blocks.push_back(ringAllReduceBlock(r, nRanks, c));
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

}  // namespace occl::ir
