// A communicator's PreMulSum ops (occlRedOpCreatePreMulSum / occlRedOpDestroy, NCCL's
// ncclRedOpCreatePreMulSum): handles occlNumOps, occlNumOps + 1, ... in creation order, each a
// scalar of one datatype, held by value (occlScalarHostImmediate: read when the op is created) or
// by address (occlScalarDevice: read by the daemon whenever a step of the collective reads this
// rank's input). A collective registered with such a handle keeps the op's scalar or address:
// destroying the op afterwards does not change it. Thread-safe.
#pragma once

#include <cstdint>
#include <mutex>
#include <vector>

#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// What the daemon needs of a PreMulSum op (CollDesc::preMulScalar, preMulScalarPtr).
struct PreMulScalar {
  uint64_t bits = 0;
  const void* address = nullptr;
};

// A registration with its op resolved: desc.op is ops::kOpPreMulSum for a PreMulSum handle.
struct ResolvedOp {
  occlCollDesc_t desc;
  PreMulScalar scalar;
};

class PreMulSumOps {
 public:
  struct Op {
    int datatype;
    PreMulScalar scalar;
    bool live;
  };

  Result<int> create(const void* scalar, int datatype, int residence);
  Status destroy(int op);
  // desc with its op resolved; an unknown or destroyed handle, or one of another datatype, is an
  // error naming desc.op. Collectives that do not reduce ignore the op, as NCCL's do.
  Result<ResolvedOp> resolve(const occlCollDesc_t& desc) const;

  // Every op, for a communicator made from this one (occlCommShrink carries registrations).
  std::vector<Op> snapshot() const;
  void adopt(std::vector<Op> ops);

 private:
  mutable std::mutex mu_;
  std::vector<Op> ops_;  // [handle - occlNumOps]
};

}  // namespace occl::host
