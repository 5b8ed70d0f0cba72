// The host half of device/vec_table.hpp: a v-collective's submission (occlSubmitV) checked against
// its registration and turned into the table of blocks the daemon reads, and the memory that
// carries those tables to the daemon.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "device/vec_table.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// What a v-collective's registration fixes about its submissions.
struct VecShape {
  int type;           // occlCollAllToAll, occlCollAllGather, occlCollReduceScatter, occlCollGather, occlCollScatter
  int rank;
  int nRanks;
  int root;           // Gather and Scatter: the rank whose buffer holds the n blocks
  uint64_t maxCount;  // desc.count: the most elements of one block
  uint64_t elemBytes;
};

// One submission's table and what its buffers must hold.
struct VecLayout {
  std::vector<VecBlock> blocks;  // vecTableBlocks(nRanks): the input's, then the output's
  uint64_t sendElems = 0;        // the end of sendbuf's furthest block
  uint64_t recvElems = 0;
  bool inPlace = false;          // occl.h's rule for the type (always false for AllToAll)
};

// The table of a submission of `shape` with `v` and these buffers, into `out` (whose vector keeps
// its memory from one submission to the next: no allocation on the submit path), or an error that
// names the argument and what was expected: an array missing (or given where the type takes none),
// a count over the maximum, a block past the end of memory, recvbuf's blocks overlapping, the
// buffers overlapping other than in place, a NULL buffer that has elements.
Status vecLayout(const VecShape& shape, const occlVectors_t* v, const void* sendbuf, const void* recvbuf,
                 VecLayout& out);

// Whether a registration may be a v-collective (desc.vectorCounts): "" if so, else why not.
std::string vectorCountsRefusal(const occlCollDesc_t& desc);

// A v-collective's tables: one per window slot in shared memory, which the host writes before the
// submission's SQE, and one per part in daemon memory, the daemon's copy (daemon.hpp, copyVecTable).
class VecTables {
 public:
  static Result<std::unique_ptr<VecTables>> create(backend::Backend& backend, uint32_t nRanks, uint32_t window,
                                                   uint32_t nParts);
  ~VecTables();
  VecTables(const VecTables&) = delete;
  VecTables& operator=(const VecTables&) = delete;

  const VecBlock* slots() const { return slots_; }
  VecBlock* cache() const { return cache_; }
  // Writes submission `seq`'s table into its window slot, which the daemon is done with: the
  // submission a window earlier has completed (Comm::checkEntry's window check).
  void write(uint64_t seq, const std::vector<VecBlock>& blocks);

 private:
  VecTables(backend::Backend& backend, uint32_t nRanks, uint32_t window)
      : backend_(backend), nRanks_(nRanks), window_(window) {}
  backend::Backend& backend_;
  uint32_t nRanks_;
  uint32_t window_;
  VecBlock* slots_ = nullptr;
  VecBlock* cache_ = nullptr;
};

}  // namespace occl::host
