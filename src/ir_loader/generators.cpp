// Direct generators: AllToAll, Gather, Scatter and point-to-point Send/Recv (see ring.hpp).
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
    // Every rank deals distance d to block (d-1) % blocks; a block sends to all its peers, then
    // receives from them, the distances in the same order on every rank. A receive then waits
    // only for its sender to have started the submission, never for that sender's own earlier
    // receives (sends and receives alternating, rank r's receive from r-d waited for r-d's
    // receives from r-d-1 .. r-2d+1 first, a chain of turns of other ranks): with more ranks than
    // cores, a step of 8 processes on 2 cores at 8 KiB a peer took 35-37 us instead of 60-78
    // (bench/results/moe-2026-12-01b.md). A tile's sends need one free slot each, which the
    // receiver freed when it finished the tile before, so sends before receives cannot deadlock.
    for (int b = 0; b < blocks; ++b) {
      std::vector<Step>& steps = rp.blocks[static_cast<size_t>(b)].steps;
      for (int d = b + 1; d < nRanks; d += blocks) {
        Step send = stepAt(OpType::Send, In, mod(r + d, nRanks));
        send.sendPeer = mod(r + d, nRanks);
        steps.push_back(send);
      }
      for (int d = b + 1; d < nRanks; d += blocks) {
        Step recv = stepAt(OpType::Recv, Out, mod(r - d, nRanks));
        recv.recvPeer = mod(r - d, nRanks);
        steps.push_back(recv);
      }
    }
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

Program makePeerAllToAll(int nRanks) {
  Program p;
  p.name = "peer";
  p.coll = CollKind::AllToAll;
  p.nRanks = nRanks;
  p.nChannels = 1;
  p.nChunksPerLoop = nRanks;  // chunk q = the elements for (or from) rank q, as makeAllToAll's
  p.raggedChunksAllowed = true;
  p.inPlace = p.outOfPlace = true;
  p.minConnectorSlots = static_cast<int32_t>(kPeerNotices);
  p.peerReads = true;
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = nRanks;
    rp.blocks.resize(1);
    std::vector<Step>& steps = rp.blocks[0].steps;
    // Every peer in the same order, rank r+1 first, so that no two ranks take from one peer first.
    const auto everyPeer = [&](OpType op, bool sending, BufferKind buf) {
      for (int d = 1; d < nRanks; ++d) {
        const int q = mod(r + d, nRanks);
        Step s = stepAt(op, buf, q);
        (sending ? s.sendPeer : s.recvPeer) = q;
        steps.push_back(s);
      }
    };
    everyPeer(OpType::PeerOffer, true, In);   // 1: chunk q of my input is yours
    steps.push_back(stepFromTo(OpType::Copy, In, r, Out, r));
    everyPeer(OpType::PeerTake, false, Out);  // q's chunk for me, into my chunk q
    everyPeer(OpType::PeerPost, true, Out);   // 2: done with yours
    everyPeer(OpType::PeerRelease, false, Out);
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

namespace {

// Gather (`gathering`) or Scatter: root and each other rank exchange one chunk, one hop each.
Program rootedDirect(CollKind coll, int nRanks, int root, bool gathering) {
  Program p;
  p.name = "direct";
  p.coll = coll;
  p.nRanks = nRanks;
  p.nChannels = 1;
  p.nChunksPerLoop = nRanks;  // chunk q = the count elements of (or for) rank q
  p.raggedChunksAllowed = true;
  p.inPlace = p.outOfPlace = true;  // reads only input, writes only output (ring.hpp)
  for (int r = 0; r < nRanks; ++r) {
    RankProgram rp;
    rp.blocks.resize(1);
    std::vector<Step>& steps = rp.blocks[0].steps;
    // Root's side of the buffers holds every rank's chunk, each other rank's side one.
    const int rootSide = r == root ? nRanks : 0;
    rp.inputChunks = gathering ? 1 : rootSide;
    rp.outputChunks = gathering ? rootSide : 1;
    if (r == root) {
      steps.push_back(gathering ? stepFromTo(OpType::Copy, In, 0, Out, root) : stepFromTo(OpType::Copy, In, root, Out, 0));
      for (int d = 1; d < nRanks; ++d) {
        const int q = mod(root + d, nRanks);
        Step s = gathering ? stepAt(OpType::Recv, Out, q) : stepAt(OpType::Send, In, q);
        (gathering ? s.recvPeer : s.sendPeer) = q;
        steps.push_back(s);
      }
    } else {
      Step s = gathering ? stepAt(OpType::Send, In, 0) : stepAt(OpType::Recv, Out, 0);
      (gathering ? s.sendPeer : s.recvPeer) = root;
      steps.push_back(s);
    }
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

}  // namespace

Program makeGather(int nRanks, int root) { return rootedDirect(CollKind::Gather, nRanks, root, /*gathering=*/true); }

Program makeScatter(int nRanks, int root) { return rootedDirect(CollKind::Scatter, nRanks, root, /*gathering=*/false); }

namespace {

// What a generated AllReduce of either placement on one channel declares.
Program allReduceProgram(const char* name, int nRanks, int nChunksPerLoop) {
  Program p;
  p.name = name;
  p.coll = CollKind::AllReduce;
  p.nRanks = nRanks;
  p.nChannels = 1;
  p.nChunksPerLoop = nChunksPerLoop;
  p.raggedChunksAllowed = true;
  p.inPlace = p.outOfPlace = true;
  return p;
}

}  // namespace

Program makePeerAllReduce(int nRanks) {
  const int n = nRanks;
  Program p = allReduceProgram("peer", n, n);
  p.minConnectorSlots = static_cast<int32_t>(kPeerNotices);
  p.peerReads = true;
  for (int r = 0; r < n; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = n;
    rp.blocks.resize(1);
    std::vector<Step>& steps = rp.blocks[0].steps;
    // One step per other rank, in rank order: the receiving ones make the block's receive
    // connectors (and the fold order of PeerReduce after its own input) the other ranks ascending.
    const auto everyPeer = [&](OpType op, bool sending) {
      for (int q = 0; q < n; ++q) {
        if (q == r) continue;
        Step s = stepFromTo(op, Out, q, Out, q);
        (sending ? s.sendPeer : s.recvPeer) = q;
        steps.push_back(s);
      }
    };
    everyPeer(OpType::PeerPost, true);  // 1: my buffers
    Step reduce = stepFromTo(OpType::PeerReduce, In, r, Out, r);
    reduce.postOp = true;
    steps.push_back(reduce);
    everyPeer(OpType::PeerPost, true);  // 2: done with yours (my slice is in your output)
    everyPeer(OpType::PeerRelease, false);
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

Program makeDirectAllReduce(int nRanks) {
  const int n = nRanks;
  Program p = allReduceProgram("direct", n, 1);
  const auto fromPeer = [](OpType op, BufferKind src, BufferKind dst, int peer) {
    Step s = stepFromTo(op, src, 0, dst, 0);
    s.recvPeer = peer;
    return s;
  };
  for (int r = 0; r < n; ++r) {
    RankProgram rp;
    rp.inputChunks = rp.outputChunks = 1;
    rp.scratchChunks = r > 0 ? 1 : 0;
    rp.blocks.resize(1);
    std::vector<Step>& steps = rp.blocks[0].steps;
    for (int d = 1; d < n; ++d) {
      Step send = stepAt(OpType::Send, In, 0);
      send.sendPeer = mod(r + d, n);
      steps.push_back(send);
    }
    if (r > 0) {  // scratch = x0 op x1 op ... x(r-1); then output = x(r) op scratch
      steps.push_back(fromPeer(OpType::Recv, BufferKind::Scratch, BufferKind::Scratch, 0));
      for (int q = 1; q < r; ++q)
        steps.push_back(fromPeer(OpType::RecvReduceCopy, BufferKind::Scratch, BufferKind::Scratch, q));
    }
    steps.push_back(stepFromTo(OpType::Copy, In, 0, Out, 0));
    if (r > 0) steps.push_back(stepFromTo(OpType::Reduce, BufferKind::Scratch, 0, Out, 0));
    for (int q = r + 1; q < n; ++q) steps.push_back(fromPeer(OpType::RecvReduceCopy, Out, Out, q));
    steps.back().postOp = true;  // the n-th contribution: the value is complete
    p.ranks.push_back(std::move(rp));
  }
  return p;
}

Program makeAllPairsAllReduce(int nRanks) {
  const int n = nRanks;
  Program p;
  p.name = "allpairs";
  p.coll = CollKind::AllReduce;
  p.nRanks = n;
  p.nChannels = 1;
  p.nChunksPerLoop = n * n;
  p.inPlace = true;  // reads and writes the input buffer, as MSCCLang's program does
  p.outOfPlace = false;
  // Step numbers the dependencies name: block 0 has n-1 nops, then n-1 reductions; a peer
  // block has its send and receive, n-2 nops, then its n-1 reductions.
  constexpr int kReceived = 1;
  const auto lastReduce = [n](int block) { return block == 0 ? 2 * n - 3 : 2 * n - 2; };
  const auto nop = [](int block, int step) {
    return Step{.op = OpType::Nop, .srcOff = -1, .dstOff = -1, .count = 0, .depBlock = block, .depStep = step};
  };
  const auto transfer = [](OpType op, BufferKind src, int srcOff, BufferKind dst, int dstOff, int count) {
    return Step{.op = op, .srcBuf = src, .dstBuf = dst, .srcOff = srcOff, .dstOff = dstOff, .count = count};
  };
  for (int r = 0; r < n; ++r) {
    std::vector<int> peers;  // block k serves peers[k - 1]
    for (int q = 0; q < n; ++q)
      if (q != r) peers.push_back(q);
    // Where rank q keeps rank r's copy in its scratch: r's index among q's peers.
    const auto slotAt = [](int q, int r) { return r < q ? r : r - 1; };
    RankProgram rp;
    rp.inputChunks = n * n;
    rp.scratchChunks = (n - 1) * n;
    rp.blocks.resize(static_cast<size_t>(n));
    for (int k = 1; k < n; ++k) {
      BlockProgram& b = rp.blocks[static_cast<size_t>(k)];
      const int q = peers[static_cast<size_t>(k - 1)];
      b.sendPeer = b.recvPeer = q;
      b.steps.push_back(transfer(OpType::Send, In, q * n, BufferKind::Scratch, slotAt(q, r) * n, n));
      b.steps.push_back(transfer(OpType::Recv, In, r * n, BufferKind::Scratch, (k - 1) * n, n));
      b.steps.back().hasDep = true;
    }
    for (int j = 0; j < n; ++j) {  // block j reduces chunk j of r's share once every copy is in
      std::vector<Step>& steps = rp.blocks[static_cast<size_t>(j)].steps;
      for (int k = 1; k < n; ++k)
        if (k != j) steps.push_back(nop(k, kReceived));
      for (int m = 0; m < n - 1; ++m)
        steps.push_back(transfer(OpType::Reduce, BufferKind::Scratch, m * n + j, In, r * n + j, 1));
      steps.back().hasDep = j == 0 || n > 2;  // the other peer blocks wait for it, if any
      steps.back().postOp = true;  // the n-th contribution: the value is complete
    }
    for (int k = 1; k < n; ++k) {  // then the reduced share goes to each peer
      std::vector<Step>& steps = rp.blocks[static_cast<size_t>(k)].steps;
      const int q = peers[static_cast<size_t>(k - 1)];
      for (int j = 0; j < n; ++j)
        if (j != k) steps.push_back(nop(j, lastReduce(j)));
      steps.push_back(transfer(OpType::Send, In, r * n, In, r * n, n));
      steps.push_back(transfer(OpType::Recv, In, q * n, In, q * n, n));
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
