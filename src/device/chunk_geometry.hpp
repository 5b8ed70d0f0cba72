// How a submission's elements divide into chunks and tiles: the geometry every primitive
// addresses by (primitives/primitives.hpp). The host computes it once at registration for the
// registered count (ProgramForm); a collective registered with a variable count
// (CollDesc::variableCount) has its geometry computed again per submission from the submission's
// count, by the same function, on every try: a preempted block resumes its saved tile and step
// (BlockContext) against the same geometry. Connector slots and scratch keep the registered size;
// a smaller count only has shorter chunks and fewer tiles.
#pragma once

#include <cstdint>

#include "device/coll_desc.hpp"
#include "device/compat.hpp"
#include "device/vec_table.hpp"

namespace occl {

struct ChunkGeometry {
  uint64_t totalElems;  // what the chunks divide: count * CollDesc::countMultiplier
  uint64_t chunkElems;  // uniform chunk size (or the largest, when ragged)
  uint64_t tileElems;   // elements per connector slot (CollDesc::tileElems)
  uint32_t nChunks;     // chunks per loop
  uint32_t nTiles;      // tiles per chunk
  uint32_t ragged;      // chunk c spans [c*total/nChunks, (c+1)*total/nChunks)
  uint32_t variable;    // CollDesc::variableCount: tile 0 runs even when empty (executor.hpp)
  // A v-collective (device/vec_table.hpp): the part's table of blocks, or nullptr. Its Input and
  // Output chunks are then pieces of blocks, groupChunks pieces a block; Scratch keeps the above.
  const VecBlock* vec = nullptr;
  uint32_t vecRanks = 0;
  uint32_t groupChunks = 1;
};

// The geometry of `total` elements in `nChunks` chunks of tiles of `tileElems`. A peer program's
// steps cover a whole chunk (its fold runs its own tiles: primitives/peer_read.hpp). A variable
// count keeps one tile when it has no elements, so that every connector carries a message per
// submission, whose count the receiver checks.
OCCL_HD inline ChunkGeometry chunkGeometry(uint64_t total, uint32_t nChunks, uint64_t tileElems, bool peerReads,
                                           bool raggedAllowed, bool variable) {
  const uint64_t chunkElems = (total + nChunks - 1) / nChunks;
  const uint64_t tiles = peerReads ? 1 : (chunkElems + tileElems - 1) / tileElems;
  const uint64_t nTiles = chunkElems == 0 ? (variable ? 1 : 0) : tiles;
  return {total, chunkElems, tileElems, nChunks, static_cast<uint32_t>(nTiles),
          raggedAllowed && total % nChunks != 0 ? 1u : 0u, variable ? 1u : 0u};
}

// Whether a program without ragged chunks can run `total` elements (they split into whole chunks).
OCCL_HD inline bool chunksFit(uint64_t total, uint32_t nChunks, bool raggedAllowed) {
  return raggedAllowed || total % nChunks == 0;
}

// A v-collective's geometry for part `part`'s copy of the submission's table: as many tiles as
// its longest piece needs (at least one, as for a variable count), every piece its own length.
OCCL_HD OCCL_NOINLINE inline ChunkGeometry vectorGeometry(const CollDesc& d, const ProgramForm& f, uint32_t part) {
  const VecBlock* table = d.vecCache + vecTableBlocks(d.vecGroups) * part;
  const uint32_t pieces = f.nChunks / d.vecGroups;
  uint64_t longest = 0;
  for (uint64_t i = 0; i < vecTableBlocks(d.vecGroups); ++i) {
    const uint64_t piece = (table[i].length + pieces - 1) / pieces;
    longest = piece > longest ? piece : longest;
  }
  // A peer program moves whole chunks, one tile (makePeerAllToAll).
  const uint64_t tiles = f.peerReads != 0 ? 1 : (longest + d.tileElems - 1) / d.tileElems;
  ChunkGeometry g{0, longest, d.tileElems, f.nChunks, static_cast<uint32_t>(tiles == 0 ? 1 : tiles), 0u, 1u};
  g.vec = table;
  g.vecRanks = d.vecGroups;
  g.groupChunks = pieces;
  return g;
}

// Submission `count`'s geometry in form `f` of `d`, run by part `part`: the registration's, unless
// the count varies or the collective is a v-collective.
OCCL_HD inline ChunkGeometry geometryOf(const CollDesc& d, const ProgramForm& f, uint64_t count, uint32_t part = 0) {
  if (d.vecGroups != 0) return vectorGeometry(d, f, part);
  if (!d.variableCount) return {d.totalElems, f.chunkElems, d.tileElems, f.nChunks, f.nTiles, f.ragged, 0u};
  return chunkGeometry(count * d.countMultiplier, f.nChunks, d.tileElems, f.peerReads != 0, f.raggedAllowed != 0, true);
}

}  // namespace occl
