// A v-collective's blocks (occlSubmitV, CollDesc::vecGroups): for each submission, where each
// rank's block of the input and of the output lies and how long it is. The host writes a table per
// submission into the collective's window slot (CollDesc::vecSlots, shared memory: host/vec_layout.hpp
// fills it); the first try of each part copies its slot into the part's cache in daemon memory
// (CollDesc::vecCache), so a GPU daemon crosses the bus for it once per submission, and every
// chunk address after that is a read of daemon memory.
//
// A table is 2n blocks: the input's n (sendCounts, sendDispls), then the output's n. A buffer
// that holds one block (AllGatherv's input, ReduceScatterv's output) uses its entry 0. Programs
// number chunks block-major with C chunks per block (the ring's chunk q*C + k is rank q's share on
// channel k; the direct AllToAll has C = 1), so chunk c of a buffer is piece c % C of block c / C,
// which splits the block as a ragged chunk splits a count: piece k spans [k*len/C, (k+1)*len/C).
// Both ends of a connector compute the same length when the ranks' counts agree; a sender stamps
// each message with its piece's length and the receiver checks it against its own (executor.hpp).
#pragma once

#include <cstdint>

#include "device/compat.hpp"
#include "device/step.hpp"

namespace occl {

struct VecBlock {
  uint64_t offset;  // elements from the buffer's start
  uint64_t length;  // elements
};
static_assert(sizeof(VecBlock) == 16, "VecBlock layout is shared by host and device");

// Blocks of one table: 2 per rank.
OCCL_HD inline uint64_t vecTableBlocks(uint32_t nRanks) { return 2ull * nRanks; }

// The first of `kind`'s blocks in a table of `nRanks` ranks (Input or Output).
OCCL_HD inline const VecBlock* vecBlocksOf(const VecBlock* table, uint32_t nRanks, BufKind kind) {
  return kind == BufKind::Output ? table + nRanks : table;
}

// Piece `k` of `pieces` of block `b`: its first element and its length.
OCCL_HD inline uint64_t vecPieceStart(const VecBlock& b, uint64_t k, uint32_t pieces) {
  return b.offset + k * b.length / pieces;
}
OCCL_HD inline uint64_t vecPieceLength(const VecBlock& b, uint64_t k, uint32_t pieces) {
  return (k + 1) * b.length / pieces - k * b.length / pieces;
}

}  // namespace occl
