// What one table row runs: element counts and buffer layout of a collective at one size, the
// occlCollDesc_t(s) to register, and nccl-tests' bandwidth conventions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "options.hpp"

namespace occl::bench {

struct SizePlan {
  Coll coll;
  int dtype;
  size_t elemSize;
  uint64_t count;      // occlCollDesc_t.count: NCCL's per-collective meaning
  uint64_t sendElems;  // this rank's send buffer
  uint64_t recvElems;  // this rank's receive buffer
  uint64_t bytes;      // the "size" column: max(send, recv) bytes, as nccl-tests prints it
};

// nccl-tests' rounding: the byte size becomes whole elements, then whole per-rank shares for
// the collectives whose count is per rank (allgather, reducescatter, alltoall).
SizePlan planFor(Coll coll, uint64_t bytes, int dtype, int nRanks);

// busbw = algbw * factor: the fraction of the data each rank must move over its busiest link,
// so that busbw is comparable with the hardware's bandwidth whatever the rank count.
double busBwFactor(Coll coll, int nRanks);

// occlCollType_t of `coll`; SendRecv gives its send half.
int collType(Coll coll);
bool isReducing(Coll coll);
bool usesRoot(Coll coll);
// AllToAll cannot run in place in occl (its buffers must not overlap); SendRecv is two
// collectives that would race on one buffer.
bool supportsInPlace(Coll coll);

// Where, in a single in-place buffer, the send data starts and the result lands (elements).
struct InPlaceOffsets {
  uint64_t send;
  uint64_t recv;
};
InPlaceOffsets inPlaceOffsets(const SizePlan& plan, int rank);

// The registrations of one row: one desc, or two for SendRecv (send to rank+1, recv from rank-1).
struct Registration {
  uint64_t collId;
  occlCollDesc_t desc;
  bool usesSend;  // submitted with the send buffer (false: NULL)
  bool usesRecv;  // submitted with the receive buffer (false: NULL)
  size_t count = OCCL_COUNT_REGISTERED;  // what each submission passes (--max-count: the size's)
};
struct RowKey {
  int dtype;
  int op;
  uint64_t sizeIndex;
};
std::vector<Registration> registrationsFor(const SizePlan& plan, const Options& options, const RowKey& key, int rank,
                                           int nRanks);

// collIds of occl-bench's side channel (result aggregation); they never collide with rows'.
uint64_t sideChannelCollId(uint32_t which);

}  // namespace occl::bench
