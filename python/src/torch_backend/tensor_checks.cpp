#include "torch_backend/tensor_checks.hpp"

#include <cstring>
#include <sstream>

#include "occl/occl.h"
#include "primitives/reduce_ops.hpp"
#include "torch_backend/compat.hpp"

namespace occl::torch_backend {

int dtypeOf(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kChar: return occlInt8;
    case at::kByte: return occlUint8;
    case at::kInt: return occlInt32;
    case at::kLong: return occlInt64;
    case at::kHalf: return occlFloat16;
    case at::kFloat: return occlFloat32;
    case at::kDouble: return occlFloat64;
    case at::kBFloat16: return occlBfloat16;
#if OCCL_TORCH_FP8
    case at::kFloat8_e4m3fn: return occlFloat8e4m3;
    case at::kFloat8_e5m2: return occlFloat8e5m2;
#endif
    default:
      TORCH_CHECK(false, "occl: ", call, ": dtype ", t.scalar_type(),
                  " is not supported (occl has float32, float64, float16, bfloat16, float8_e4m3fn, float8_e5m2, int8, "
                  "uint8, int32, int64)");
  }
}

uint64_t preMulScalarBits(const c10d::ReduceOp& op, const at::Tensor& t) {
  const at::Tensor factor = at::scalar_tensor(*preMulFactor(op), at::TensorOptions().dtype(t.scalar_type()));
  uint64_t bits = 0;
  std::memcpy(&bits, factor.data_ptr(), factor.element_size());
  return bits;
}

int opOf(const c10d::ReduceOp& op, const char* call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return occlSum;
    case c10d::ReduceOp::PRODUCT: return occlProd;
    case c10d::ReduceOp::MIN: return occlMin;
    case c10d::ReduceOp::MAX: return occlMax;
    case c10d::ReduceOp::AVG: return occlAvg;
    case c10d::ReduceOp::BAND: TORCH_CHECK(false, "occl: ", call, ": reduce op BAND is not supported");
    case c10d::ReduceOp::BOR: TORCH_CHECK(false, "occl: ", call, ": reduce op BOR is not supported");
    case c10d::ReduceOp::BXOR: TORCH_CHECK(false, "occl: ", call, ": reduce op BXOR is not supported");
    case c10d::ReduceOp::PREMUL_SUM:
      TORCH_CHECK(preMulFactor(op).has_value(), "occl: ", call,
                  ": reduce op PREMUL_SUM with a tensor factor is not supported (a float factor is)");
      return ops::kOpPreMulSum;
    default: TORCH_CHECK(false, "occl: ", call, ": unknown reduce op ", static_cast<int>(op.op_));
  }
}

void checkTensor(const at::Tensor& t, const char* call, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), "occl: ", call, ": ", what, " is on ", t.device(), "; occl takes CPU tensors");
  TORCH_CHECK(t.is_contiguous(), "occl: ", call, ": ", what, " is not contiguous");
  TORCH_CHECK(!t.is_sparse(), "occl: ", call, ": ", what, " is sparse");
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(tensors.size() == 1, "occl: ", call, " takes one tensor per process, got ", tensors.size());
  checkTensor(tensors[0], call, "the tensor");
  return tensors[0];
}

void checkSameShape(const at::Tensor& t, const at::Tensor& like, const char* call, const char* what) {
  checkTensor(t, call, what);
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "occl: ", call, ": ", what, " has dtype ", t.scalar_type(),
              ", expected ", like.scalar_type());
  TORCH_CHECK(t.numel() == like.numel(), "occl: ", call, ": ", what, " has ", t.numel(), " elements, expected ",
              like.numel());
}

int checkedRoot(int64_t rootRank, int64_t rootTensor, int size, const char* call) {
  TORCH_CHECK(rootRank >= 0 && rootRank < size, "occl: ", call, ": root ", rootRank,
              " is not a rank of this group of ", size);
  TORCH_CHECK(rootTensor == 0, "occl: ", call, ": root tensor ", rootTensor, ": there is one tensor");
  return static_cast<int>(rootRank);
}

// The _base forms: `all` holds size x `one`'s elements, of the same dtype.
void checkOneToAll(const at::Tensor& one, const char* oneName, const at::Tensor& all, const char* allName, int size,
                   const char* call) {
  checkTensor(one, call, oneName);
  checkTensor(all, call, allName);
  TORCH_CHECK(all.scalar_type() == one.scalar_type(), "occl: ", call, ": ", allName, " has dtype ",
              all.scalar_type(), ", ", oneName, " ", one.scalar_type());
  TORCH_CHECK(all.numel() == size * one.numel(), "occl: ", call, ": ", allName, " has ", all.numel(),
              " elements, expected ", size, " x ", one.numel());
}

// The list forms' staging tensor: `parts` (equal sizes, checked) one after another.
void fillFrom(at::Tensor& flat, const std::vector<at::Tensor>& parts) {
  auto* dst = static_cast<char*>(flat.data_ptr());
  for (const at::Tensor& p : parts) {
    const size_t bytes = static_cast<size_t>(p.numel()) * p.element_size();
    std::memcpy(dst, p.data_ptr(), bytes);
    dst += bytes;
  }
}

std::string join(const std::vector<int64_t>& v) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < v.size(); ++i) out << (i ? ", " : "") << v[i];
  out << ']';
  return out.str();
}

Splits splitsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  Splits s;
  s.rowElems = rows == 0 ? 1 : t.numel() / rows;
  std::vector<int64_t> byRank = splits;
  if (byRank.empty()) {
    TORCH_CHECK(rows % size == 0, "occl: alltoall_base: the ", what, "'s ", rows, " rows do not split evenly over ",
                size, " ranks; give its split sizes");
    byRank.assign(static_cast<size_t>(size), rows / size);
  }
  TORCH_CHECK(static_cast<int>(byRank.size()) == size, "occl: alltoall_base: ", byRank.size(), " ", what,
              " split sizes ", join(byRank), "; expected one per rank (", size, ")");
  int64_t total = 0;
  for (int64_t r : byRank) {
    TORCH_CHECK(r >= 0, "occl: alltoall_base: ", what, " split sizes ", join(byRank), " has a negative size");
    s.displs.push_back(static_cast<size_t>(total * s.rowElems));
    s.counts.push_back(static_cast<size_t>(r * s.rowElems));
    total += r;
  }
  TORCH_CHECK(total == rows, "occl: alltoall_base: ", what, " split sizes ", join(byRank), " add up to ", total,
              " rows; the ", what, " has ", rows);
  return s;
}

}  // namespace occl::torch_backend
