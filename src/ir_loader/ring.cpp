// Ring and chain generators: AllReduce, AllGather, ReduceScatter, Reduce, Broadcast. The direct
// ones (AllToAll, Send/Recv) are in generators.cpp.
#include "ir_loader/ring.hpp"

#include <functional>

namespace occl::ir {
namespace {

constexpr auto In = BufferKind::Input;
constexpr auto Out = BufferKind::Output;

int mod(int a, int n) { return ((a % n) + n) % n; }

// One block per channel on every rank, built by blockFor(rank, channel).
Program buildPerChannel(const char* name, CollKind coll, int nRanks, int nChannels, int nChunksPerLoop,
                        int inputChunks, int outputChunks,
                        const std::function<BlockProgram(int rank, int channel)>& blockFor) {
  Program p;
  p.name = name;
  p.coll = coll;
  p.nRanks = nRanks;
  p.nChannels = nChannels;
  p.nChunksPerLoop = nChunksPerLoop;
  p.raggedChunksAllowed = true;  // every transfer pairs chunks of equal length (ring.hpp)
  p.inPlace = p.outOfPlace = true;  // reads only input, writes only output (ring.hpp)
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.inputChunks = inputChunks;
    rp.outputChunks = outputChunks;
    for (int c = 0; c < nChannels; ++c) {
      rp.blocks.push_back(blockFor(r, c));
      rp.blocks.back().channel = c;
    }
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

// A lone rank has nobody to talk to: its output is its input.
BlockProgram selfCopy(int inChunk, int outChunk) {
  BlockProgram b;
  b.steps.push_back(stepFromTo(OpType::Copy, In, inChunk, Out, outChunk));
  return b;
}

// A block on the ring rank-1 -> rank -> rank+1.
BlockProgram ringBlock(int rank, int n) {
  BlockProgram b;
  b.sendPeer = mod(rank + 1, n);
  b.recvPeer = mod(rank - 1, n);
  return b;
}

BlockProgram allReduceBlock(int rank, int n, int channel) {
  auto chunk = [&](int k) { return channel * n + mod(k, n); };
  if (n == 1) return selfCopy(chunk(0), chunk(0));
  BlockProgram b = ringBlock(rank, n);
  b.steps.push_back(stepAt(OpType::Send, In, chunk(rank)));
  for (int k = 1; k <= n - 2; ++k) b.steps.push_back(stepAt(OpType::RecvReduceSend, In, chunk(rank - k)));
  b.steps.push_back(stepFromTo(OpType::RecvReduceCopySend, In, chunk(rank + 1), Out, chunk(rank + 1), true));
  for (int k = 1; k <= n - 2; ++k) b.steps.push_back(stepAt(OpType::RecvCopySend, Out, chunk(rank + 1 - k)));
  b.steps.push_back(stepAt(OpType::Recv, Out, chunk(rank + 2)));
  return b;
}

// Rank q's share on channel k of an nRanks*C-chunk buffer (rank-major, see ring.hpp).
int share(int q, int n, int nChannels, int channel) { return mod(q, n) * nChannels + channel; }

BlockProgram allGatherBlock(int rank, int n, int nChannels, int channel) {
  auto chunk = [&](int q) { return share(q, n, nChannels, channel); };
  if (n == 1) return selfCopy(channel, chunk(0));
  BlockProgram b = ringBlock(rank, n);
  b.steps.push_back(stepFromTo(OpType::Copy, In, channel, Out, chunk(rank)));  // no-op in place
  b.steps.push_back(stepAt(OpType::Send, In, channel));
  for (int j = 1; j <= n - 2; ++j) b.steps.push_back(stepAt(OpType::RecvCopySend, Out, chunk(rank - j)));
  b.steps.push_back(stepAt(OpType::Recv, Out, chunk(rank + 1)));
  return b;
}

BlockProgram reduceScatterBlock(int rank, int n, int nChannels, int channel) {
  auto chunk = [&](int q) { return share(q, n, nChannels, channel); };
  if (n == 1) return selfCopy(channel, channel);
  BlockProgram b = ringBlock(rank, n);
  // Rank q's share starts at q+1 and gathers one contribution per hop until it reaches q.
  b.steps.push_back(stepAt(OpType::Send, In, chunk(rank - 1)));
  for (int j = 1; j <= n - 2; ++j) b.steps.push_back(stepAt(OpType::RecvReduceSend, In, chunk(rank - 1 - j)));
  b.steps.push_back(stepFromTo(OpType::RecvReduceCopy, In, chunk(rank), Out, channel, true));
  return b;
}

// Position on the chain that ends at root (Reduce: root+1 first) or starts at it (Broadcast).
BlockProgram reduceBlock(int rank, int n, int root, int channel) {
  if (n == 1) return selfCopy(channel, channel);
  const int pos = mod(rank - root - 1, n);
  BlockProgram b;
  if (pos > 0) b.recvPeer = mod(rank - 1, n);
  if (pos < n - 1) b.sendPeer = mod(rank + 1, n);
  if (pos == 0) b.steps.push_back(stepAt(OpType::Send, In, channel));
  else if (pos < n - 1) b.steps.push_back(stepAt(OpType::RecvReduceSend, In, channel));
  else b.steps.push_back(stepFromTo(OpType::RecvReduceCopy, In, channel, Out, channel, true));
  return b;
}

BlockProgram broadcastBlock(int rank, int n, int root, int channel) {
  if (n == 1) return selfCopy(channel, channel);
  const int pos = mod(rank - root, n);
  BlockProgram b;
  if (pos > 0) b.recvPeer = mod(rank - 1, n);
  if (pos < n - 1) b.sendPeer = mod(rank + 1, n);
  if (pos == 0) {
    b.steps.push_back(stepFromTo(OpType::Copy, In, channel, Out, channel));  // no-op in place
    b.steps.push_back(stepAt(OpType::Send, In, channel));
  } else {
    b.steps.push_back(stepAt(pos < n - 1 ? OpType::RecvCopySend : OpType::Recv, Out, channel));
  }
  return b;
}

}  // namespace

Program makeRingAllReduce(int nRanks, int nChannels) {
  const int chunks = nRanks * nChannels;
  return buildPerChannel("ring", CollKind::AllReduce, nRanks, nChannels, chunks, chunks, chunks,
                         [&](int r, int c) { return allReduceBlock(r, nRanks, c); });
}

Program makeRingAllGather(int nRanks, int nChannels) {
  return buildPerChannel("ring", CollKind::AllGather, nRanks, nChannels, nRanks * nChannels, nChannels,
                         nRanks * nChannels, [&](int r, int c) { return allGatherBlock(r, nRanks, nChannels, c); });
}

Program makeRingReduceScatter(int nRanks, int nChannels) {
  return buildPerChannel("ring", CollKind::ReduceScatter, nRanks, nChannels, nRanks * nChannels,
                         nRanks * nChannels, nChannels,
                         [&](int r, int c) { return reduceScatterBlock(r, nRanks, nChannels, c); });
}

Program makeChainReduce(int nRanks, int nChannels, int root) {
  return buildPerChannel("chain", CollKind::Reduce, nRanks, nChannels, nChannels, nChannels, nChannels,
                         [&](int r, int c) { return reduceBlock(r, nRanks, root, c); });
}

Program makeChainBroadcast(int nRanks, int nChannels, int root) {
  return buildPerChannel("chain", CollKind::Broadcast, nRanks, nChannels, nChannels, nChannels, nChannels,
                         [&](int r, int c) { return broadcastBlock(r, nRanks, root, c); });
}

}  // namespace occl::ir
