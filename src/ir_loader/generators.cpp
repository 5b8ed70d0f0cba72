// Direct generators: AllToAll and point-to-point Send/Recv (see ring.hpp).
#include <algorithm>

#include "ir_loader/ring.hpp"

namespace occl::ir {
namespace {

constexpr auto In = BufferKind::Input;
constexpr auto Out = BufferKind::Output;

int mod(int a, int n) { return ((a % n) + n) % n; }

}  // namespace

Program makeAllToAll(int nRanks, int nBlocks) {
  Program p;
  p.name = "direct";
  p.coll = CollKind::AllToAll;
  p.nRanks = nRanks;
  p.nChannels = 1;
  p.nChunksPerLoop = nRanks;  // chunk q = the count elements for (or from) rank q: uniform
  p.raggedChunksAllowed = true;
  p.inPlace = p.outOfPlace = true;  // reads only input, writes only output (ring.hpp)
  const int blocks = std::max(1, std::min(nBlocks, nRanks - 1));
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = nRanks;
    rp.blocks.resize(static_cast<size_t>(blocks));
    rp.blocks[0].steps.push_back(stepFromTo(OpType::Copy, In, r, Out, r));
    // Every rank deals distance d to block (d-1) % blocks and walks the distances in the same
    // order, so a receive's matching send is the step just before it on the sending rank.
    for (int d = 1; d < nRanks; ++d) {
      std::vector<Step>& steps = rp.blocks[static_cast<size_t>((d - 1) % blocks)].steps;
      Step send = stepAt(OpType::Send, In, mod(r + d, nRanks));
      send.sendPeer = mod(r + d, nRanks);
      Step recv = stepAt(OpType::Recv, Out, mod(r - d, nRanks));
      recv.recvPeer = mod(r - d, nRanks);
      steps.push_back(send);
      steps.push_back(recv);
    }
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

Program makeSendRecv(int nRanks, int nChannels, int sender, int receiver) {
  Program p;
  p.name = "p2p";
  p.coll = CollKind::Send;
  p.nRanks = nRanks;
  p.nChannels = nChannels;
  p.nChunksPerLoop = nChannels;
  p.raggedChunksAllowed = true;  // channel k sends chunk k into chunk k
  p.inPlace = p.outOfPlace = true;  // reads only input, writes only output (ring.hpp)
  p.ranks.resize(static_cast<size_t>(nRanks));
  RankProgram& from = p.ranks[static_cast<size_t>(sender)];
  RankProgram& to = p.ranks[static_cast<size_t>(receiver)];
  from.inputChunks = to.outputChunks = nChannels;
  for (int c = 0; c < nChannels; ++c) {
    BlockProgram s;
    s.sendPeer = receiver;
    s.channel = c;
    s.steps.push_back(stepAt(OpType::Send, In, c));
    from.blocks.push_back(std::move(s));
    BlockProgram r;
    r.recvPeer = sender;
    r.channel = c;
    r.steps.push_back(stepAt(OpType::Recv, Out, c));
    to.blocks.push_back(std::move(r));
  }
  return p;
}

}  // namespace occl::ir
