// What torch hands the backend, checked and translated for occl (process_group.cpp): a tensor's
// dtype and a reduce op as occl's, the tensors a call takes (CPU, contiguous, dense, matching
// shapes), roots; every failure a torch error that names the call and the argument.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace occl::torch_backend {

// occl's datatype for the tensor's dtype.
int dtypeOf(const at::Tensor& t, const char* call);

// occl's reduction for torch's op (no bitwise ops; PREMUL_SUM with a float factor is
// ops::kOpPreMulSum, its factor given by preMulScalarBits).
int opOf(const c10d::ReduceOp& op, const char* call);
// PREMUL_SUM's factor as one element of t's dtype (torch's own conversion), as bits.
uint64_t preMulScalarBits(const c10d::ReduceOp& op, const at::Tensor& t);

// A CPU tensor, contiguous and dense; `what` names it in the error.
void checkTensor(const at::Tensor& t, const char* call, const char* what);

// The one tensor of a call that takes one per process, checked.
at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call);

// `t` checked, with the dtype and element count of `like`.
void checkSameShape(const at::Tensor& t, const at::Tensor& like, const char* call, const char* what);

// The root rank of a rooted call, a rank of the group's `size`, with its one tensor.
int checkedRoot(int64_t rootRank, int64_t rootTensor, int size, const char* call);

// The _base forms: `all` holds size x `one`'s elements, of the same dtype.
void checkOneToAll(const at::Tensor& one, const char* oneName, const at::Tensor& all, const char* allName, int size,
                   const char* call);

// The list forms' staging tensor: `parts` (equal sizes, checked) one after another.
void fillFrom(at::Tensor& flat, const std::vector<at::Tensor>& parts);

// all_to_all_single's split sizes of `t` (rows of its first dimension; empty: equal shares) as one
// block per rank, in elements, packed in rank order; `what` ("input", "output") names it.
struct Splits {
  std::vector<size_t> counts, displs;
  int64_t rowElems = 1;
};
Splits splitsOf(const at::Tensor& t, const std::vector<int64_t>& splits, int size, const char* what);

// "[1, 2, 3]", for messages.
std::string join(const std::vector<int64_t>& v);

}  // namespace occl::torch_backend
