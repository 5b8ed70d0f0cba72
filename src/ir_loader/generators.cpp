// Direct generators: AllToAll over stride rings, and point-to-point Send/Recv (see ring.hpp).
#include <algorithm>
#include <vector>

#include "ir_loader/ring.hpp"

namespace occl::ir {
namespace {

constexpr auto In = BufferKind::Input;
constexpr auto Out = BufferKind::Output;
constexpr auto Scratch = BufferKind::Scratch;

int mod(int a, int n) { return ((a % n) + n) % n; }

// 1, n-1, 2, n-2, ...: a block in each direction first, so two blocks already halve the hops.
std::vector<int> blockStrides(int n, int nBlocks) {
  std::vector<int> strides;
  for (int s = 1; static_cast<int>(strides.size()) < std::min(nBlocks, n - 1); ++s) {
    strides.push_back(s);
    if (n - s != s && static_cast<int>(strides.size()) < std::min(nBlocks, n - 1)) strides.push_back(n - s);
  }
  return strides;
}

// Fewest hops k >= 1 with k*stride = distance (mod n), or 0 when the stride ring never gets there.
int hopsOver(int stride, int distance, int n) {
  for (int k = 1; k < n; ++k)
    if (mod(k * stride, n) == distance) return k;
  return 0;
}

struct Phase {
  int distance;
  int hops;
};

// Every distance 1..n-1 goes to the block that reaches it in the fewest hops; ties go to the block
// carrying the least traffic so far. Depends on (n, strides) only, so every rank agrees.
std::vector<std::vector<Phase>> assignDistances(int n, const std::vector<int>& strides) {
  std::vector<std::vector<Phase>> phases(strides.size());
  std::vector<int> load(strides.size(), 0);
  for (int d = 1; d < n; ++d) {
    size_t best = strides.size();
    int bestHops = 0;
    for (size_t b = 0; b < strides.size(); ++b) {
      int k = hopsOver(strides[b], d, n);
      if (k == 0) continue;
      if (best == strides.size() || k < bestHops || (k == bestHops && load[b] < load[best])) {
        best = b;
        bestHops = k;
      }
    }
    phases[best].push_back({d, bestHops});  // stride 1 is always there and reaches everything
    load[best] += bestHops;
  }
  return phases;
}

// One phase on rank r: send the chunk for rank r+d, forward the hops-1 chunks passing through
// (they arrive in the order their origins are upstream: r-s, r-2s, ...), keep the last one, which
// left rank r-d hops*s = d ago. Each rank sends at most one item ahead of what it has received,
// so two connector slots never deadlock the stride ring.
void appendPhase(BlockProgram& b, int rank, int n, const Phase& ph) {
  b.steps.push_back(stepAt(OpType::Send, In, mod(rank + ph.distance, n)));
  for (int k = 1; k < ph.hops; ++k) b.steps.push_back(stepAt(OpType::RecvCopySend, Scratch, 0));
  b.steps.push_back(stepAt(OpType::Recv, Out, mod(rank - ph.distance, n)));
}

}  // namespace

Program makeAllToAll(int nRanks, int nBlocks) {
  Program p;
  p.name = "stride";
  p.coll = CollKind::AllToAll;
  p.nRanks = nRanks;
  p.nChannels = 1;
  p.nChunksPerLoop = nRanks;  // chunk q = the count elements for (or from) rank q: uniform
  p.raggedChunksAllowed = true;
  const std::vector<int> strides = blockStrides(nRanks, nBlocks);
  const std::vector<std::vector<Phase>> phases = assignDistances(nRanks, strides);
  const bool relays = std::any_of(phases.begin(), phases.end(), [](const std::vector<Phase>& v) {
    return std::any_of(v.begin(), v.end(), [](const Phase& ph) { return ph.hops > 1; });
  });
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = nRanks;
    rp.scratchChunks = relays ? 1 : 0;  // a write-only sink for forwarded chunks
    rp.blocks.resize(std::max<size_t>(strides.size(), 1));
    rp.blocks[0].steps.push_back(stepFromTo(OpType::Copy, In, r, Out, r));
    for (size_t b = 0; b < strides.size(); ++b) {
      rp.blocks[b].sendPeer = mod(r + strides[b], nRanks);
      rp.blocks[b].recvPeer = mod(r - strides[b], nRanks);
      for (const Phase& ph : phases[b]) appendPhase(rp.blocks[b], r, nRanks, ph);
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
