#include "host/premul_ops.hpp"

#include <cstring>
#include <utility>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl::host {
namespace {

Status invalid(const std::string& message) { return Status::error(occlInvalidArgument, message); }

}  // namespace

Result<int> PreMulSumOps::create(const void* scalar, int datatype, int residence) {
  if (scalar == nullptr) return invalid("scalar is NULL");
  if (!dtypeValid(datatype))
    return invalid(absl::StrFormat("datatype = %d: expected an occlDataType_t (0..%d)", datatype, occlNumTypes - 1));
  if (residence != occlScalarDevice && residence != occlScalarHostImmediate)
    return invalid(absl::StrFormat("residence = %d: expected occlScalarDevice (%d) or occlScalarHostImmediate (%d)",
                                   residence, occlScalarDevice, occlScalarHostImmediate));
  Op op{datatype, {}, true};
  if (residence == occlScalarHostImmediate) {
    std::memcpy(&op.scalar.bits, scalar, dtypeSize(datatype));  // little-endian: the low bytes
  } else {
    op.scalar.address = scalar;
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (ops_.size() >= static_cast<size_t>(INT32_MAX - occlNumOps))
    return Status::error(occlInvalidUsage, "occlRedOpCreatePreMulSum: no handles left on this communicator");
  ops_.push_back(op);
  return occlNumOps + static_cast<int>(ops_.size() - 1);
}

Status PreMulSumOps::destroy(int op) {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t i = static_cast<int64_t>(op) - occlNumOps;
  if (i < 0 || i >= static_cast<int64_t>(ops_.size()) || !ops_[static_cast<size_t>(i)].live)
    return invalid(absl::StrFormat("op = %d: not a PreMulSum op of this communicator (built-in ops are never destroyed)",
                                   op));
  ops_[static_cast<size_t>(i)].live = false;
  return Status::success();
}

Result<ResolvedOp> PreMulSumOps::resolve(const occlCollDesc_t& desc) const {
  ResolvedOp out{desc, {}};
  if (!isCollType(desc.type) || !collInfo(desc.type).reduces || desc.op < occlNumOps) return out;
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t i = static_cast<int64_t>(desc.op) - occlNumOps;
  if (i >= static_cast<int64_t>(ops_.size()) || !ops_[static_cast<size_t>(i)].live)
    return invalid(absl::StrFormat("desc.op = %d: expected an occlRedOp_t (0..%d) or a live PreMulSum op of this "
                                   "communicator (occlRedOpCreatePreMulSum) for %s",
                                   desc.op, occlNumOps - 1, collTypeName(desc.type)));
  const Op& op = ops_[static_cast<size_t>(i)];
  if (op.datatype != desc.datatype)
    return invalid(absl::StrFormat("desc.op = %d: a PreMulSum op of datatype %s; desc.datatype is %s", desc.op,
                                   dtypeName(op.datatype), dtypeName(desc.datatype)));
  out.desc.op = ops::kOpPreMulSum;
  out.scalar = op.scalar;
  return out;
}

std::vector<PreMulSumOps::Op> PreMulSumOps::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ops_;
}

void PreMulSumOps::adopt(std::vector<Op> ops) {
  std::lock_guard<std::mutex> lock(mu_);
  ops_ = std::move(ops);
}

}  // namespace occl::host
