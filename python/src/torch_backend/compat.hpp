// The torch-version-specific part of the backend, in one place. torch 1.13 (Debian 12's) has
// backends subclass c10d::ProcessGroup, and Python registers a creator taking (store, rank, size,
// timeout). torch 2.x moved backends to c10d::Backend (Backend.hpp) with the same collective
// signatures; occl/torch.py holds the Python half of the difference. CI builds and tests both
// (Debian's 1.13 in the build tree, PyPI's newest 2.x pip-installed).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/version.h>

#include <optional>

#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

namespace occl::torch_backend {

#if TORCH_VERSION_MAJOR >= 2
using BackendBase = c10d::Backend;
#else
using BackendBase = c10d::ProcessGroup;
#endif

// torch's communicator splitting: Backend::supportsSplitting() and the generic
// Backend::split(store, ranks, options) that dist.split_group calls (2.8 and later). Where torch
// has them, dist.new_group and dist.split_group make occl groups with occlCommSplit instead of a
// rendezvous through the store (process_group_children.cpp).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
#define OCCL_TORCH_SPLITS 1
#else
#define OCCL_TORCH_SPLITS 0
#endif

// PREMUL_SUM's float factor (dist._make_nccl_premul_sum(f)), or nothing for a tensor factor: 1.13
// keeps tensor factors in a list, 2.x in one tensor.
inline std::optional<double> preMulFactor(const c10d::ReduceOp& op) {
  const auto* s = dynamic_cast<const c10d::NCCLPreMulSumSupplement*>(op.supplement_.get());
  if (s == nullptr) return std::nullopt;
#if TORCH_VERSION_MAJOR >= 2
  if (s->tensor_factor.defined()) return std::nullopt;
#else
  if (!s->tensor_factors.empty()) return std::nullopt;
#endif
  return s->double_factor;
}

// torch's 8-bit floating types (float8_e4m3fn, float8_e5m2) arrived in 2.1.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define OCCL_TORCH_FP8 1
#else
#define OCCL_TORCH_FP8 0
#endif

}  // namespace occl::torch_backend
