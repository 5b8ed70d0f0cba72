// Generators of the built-in algorithms, in the same Program form the MSCCL-IR loader produces.
//
// Every generated program reads only from the input buffer and writes only to the output buffer
// (plus scratch), so one program serves in-place and out-of-place submissions (NCCL's in-place
// positions: AllGather sendbuf == recvbuf + rank*count, ReduceScatter recvbuf == sendbuf +
// rank*count). Every program allows ragged chunks and works for any count: each transfer pairs
// chunks of equal length on both ends of its connector. The ring programs number chunks rank-major
// (chunk q*C + k is rank q's share on channel k), and with total = count*nRanks split in
// nRanks*C chunks, chunk q*C + k spans [q*count + k*count/C, q*count + (k+1)*count/C) (floors):
// its length depends on k only, so pairing chunks of one channel is always exact.
#pragma once

#include "ir_loader/program.hpp"

namespace occl::ir {

// Step builders shared by the generators. A step that only reads (s, rrs) or only writes (r, rcs)
// names one chunk, kept in both src and dst so that either field gives its length.
inline Step stepAt(OpType op, BufferKind buf, int chunk, bool postOp = false) {
  return Step{.op = op, .srcBuf = buf, .dstBuf = buf, .srcOff = chunk, .dstOff = chunk, .postOp = postOp};
}
inline Step stepFromTo(OpType op, BufferKind src, int srcChunk, BufferKind dst, int dstChunk, bool postOp = false) {
  return Step{.op = op, .srcBuf = src, .dstBuf = dst, .srcOff = srcChunk, .dstOff = dstChunk, .postOp = postOp};
}

// Ring AllReduce over nRanks ranks on nChannels channels (one daemon block each): a
// reduce-scatter phase (s, rrs..., rrcs) followed by an all-gather phase (rcs..., r).
Program makeRingAllReduce(int nRanks, int nChannels);

// Ring AllGather: each rank copies its input into its output share and sends it around the ring
// (s, rcs..., r).
Program makeRingAllGather(int nRanks, int nChannels);

// Ring ReduceScatter: partial sums travel the ring (s, rrs...) and the last hop stores the final
// value into the owner's output (rrc, where avg divides).
Program makeRingReduceScatter(int nRanks, int nChannels);

// Chain Reduce to `root`: root+1 sends, the ranks after it reduce and forward, root stores.
// Tiles pipeline the chain, so one chunk per channel keeps every link busy.
Program makeChainReduce(int nRanks, int nChannels, int root);

// Chain Broadcast from `root`: root copies and sends, the others store and forward, the last
// rank before root only stores.
Program makeChainBroadcast(int nRanks, int nChannels, int root);

// Direct AllToAll: every rank sends chunk q of its input straight to rank q, which stores it as
// chunk `rank` of its output, one hop per pair. The n-1 peers are dealt round-robin to at most
// n-1 blocks; a block owns a connector per peer it serves, so one block suffices. A block sends
// to each of its peers, then receives from each.
Program makeAllToAll(int nRanks, int nBlocks);

// Peer AllToAll for ranks that share an address space (primitives/peer_read.hpp): rank r offers
// each peer q chunk q of its input (a notice with its address), copies its own chunk, takes each
// peer's chunk for it straight into chunk q of its output, then posts "done with yours" and
// releases the peers' notices. Each byte is copied once, by its receiver, against twice through a
// slot for makeAllToAll. One block, two notices per peer and submission. nRanks >= 2.
Program makePeerAllToAll(int nRanks);

// Direct Gather to `root`: every other rank sends its input (one chunk) straight to root, which
// stores rank q's as chunk q of its output and copies its own into chunk root. n-1 times the
// count moves into root, once per byte: against the AllGather torch's gather ran before, n times
// fewer bytes. One block on every rank: a rank's tiles are sized by its block count
// (host/collective.cpp, tileBytes), so root and senders must have as many, and the senders have
// one transfer each. The root's block owns a connector per sender, as AllToAll's blocks do.
Program makeGather(int nRanks, int root);

// Direct Scatter from `root`, Gather's mirror: root sends chunk q of its input to rank q, which
// stores it as its output, and copies chunk root into its own.
Program makeScatter(int nRanks, int root);

// Direct AllReduce for small counts, one block per rank and one hop: every rank sends its whole
// input (one chunk per tile) to each other rank, then folds the n inputs in rank order,
// ((x0 op x1) op x2) op ..., so every rank computes the same value bit for bit: rank r first
// receives and folds x0..x(r-1) into scratch, adds its own input (op is commutative), then folds
// x(r+1).. into its output. A rank's sends come before any write to its output, so the in-place
// form reads its input intact. Per rank it moves (n-1) times the count each way against the ring's
// 2(n-1)/n, but waits on one round of sends instead of 2(n-1) hops in sequence.
// The library chooses it by size (host/algorithms.cpp). nRanks >= 2.
Program makeDirectAllReduce(int nRanks);

// Peer AllReduce for ranks that share an address space (primitives/peer_read.hpp): chunk q is
// rank q's slice. Rank r posts its buffers to every peer, folds slice r of every rank's input
// where the inputs are and writes it into every rank's output, posts "done with yours" and
// releases the peers' notices. One block, one tile per chunk, no data through connectors:
// kPeerNotices notices per peer and submission. Each slice is folded once, by its owner, so every
// rank holds the same bits; slice r of any buffer is touched by rank r alone, so in place is
// safe. nRanks >= 2.
Program makePeerAllReduce(int nRanks);

// All-pairs AllReduce (in place, one channel), the shape of MSCCLang's allreduce_allpairs with one
// instance: rank r's input is n*n chunks, chunks [q*n, q*n + n) are rank q's share. Threadblock k
// (1..n-1) serves the k-th other rank: it sends that rank's share there in one n-chunk step and
// receives its copy of r's share into scratch; threadblock j reduces chunk j of r's share from the
// n-1 copies (nops wait for every receive); each peer threadblock then sends the reduced share to
// its peer and receives the peer's. A connection carries n chunks before its first receive, so
// it needs n connector slots; n threadblocks per rank. The library never chooses it: occl-ir emit
// writes it as MSCCL-IR, a starting point for programs of one's own. nRanks >= 2.
Program makeAllPairsAllReduce(int nRanks);

// Point-to-point: `sender` sends its input to `receiver`'s output over nChannels blocks, each
// carrying one ragged chunk. Every other rank has no blocks: it takes no part.
Program makeSendRecv(int nRanks, int nChannels, int sender, int receiver);

}  // namespace occl::ir
