// Test support: the descriptor of a collective whose one daemon block a test runs by hand
// (BlockExecutor without a communicator): float sum, out of place, one chunk of `elems` in
// `tiles` tiles of `tileElems`.
#pragma once

#include <cstdint>

#include "device/coll_desc.hpp"

namespace occl::test {

inline CollDesc oneBlockDesc(const BlockPlan* plan, CollShared* shared, uint32_t nRanks, uint64_t elems,
                             uint32_t tileElems, uint32_t tiles) {
  CollDesc d{};
  d.dtype = occlFloat32;
  d.redOp = occlSum;
  d.nBlocks = 1;
  d.nRanks = nRanks;
  d.totalElems = elems;
  d.tileElems = tileElems;
  d.elemBytes = sizeof(float);
  d.shared = shared;
  ProgramForm& form = d.forms[kFormOutOfPlace];
  form.blocks = plan;
  form.chunkElems = elems;
  form.nChunks = 1;
  form.nTiles = tiles;
  form.nParts = 1;
  return d;
}

}  // namespace occl::test
