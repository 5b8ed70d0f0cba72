// Runtime (dtype, op) -> compile-time (T, Op). The executor holds the collective's dtype and op as
// ints; these switches instantiate one reduceCopy per pair, and nothing else is generated.
//
//   dispatchTypeOp(dtype, op, f)  calls  f.template operator()<T, Op>()
//   dispatchType(dtype, f)        calls  f.template operator()<T>()
//
// f is a functor with a template call operator or a C++20 template lambda
// ([&]<typename T, typename Op>() { ... }). Every instantiation must return the same type R.
// An invalid dtype or op (the host validates both at registration) calls nothing and returns
// R{} — or nothing for void — rather than running the bytes as some other type.
//
// A build may compile the collectives for some types and ops only (the CMake options
// OCCL_ONLY_DTYPE_MASK and OCCL_ONLY_OP_MASK, as NCCL's ONLY_FUNCS): bit d of the first keeps
// occlDataType_t d, bit o of the second keeps op kind o (ops::OpOf). Every backend's dispatch then
// has only those, and registration refuses the rest (dispatchCompiled, host/algorithms.cpp). It is
// for measuring what the daemon kernel's size costs (1.48 MB of SASS with every pair on sm_90).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "occl/occl.h"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"
#include "device/compat.hpp"

#ifndef OCCL_ONLY_DTYPE_MASK
#define OCCL_ONLY_DTYPE_MASK 0xffffffffu
#endif
#ifndef OCCL_ONLY_OP_MASK
#define OCCL_ONLY_OP_MASK 0xffffffffu
#endif

namespace occl {

inline constexpr uint32_t kDispatchDtypeMask = OCCL_ONLY_DTYPE_MASK;
inline constexpr uint32_t kDispatchOpMask = OCCL_ONLY_OP_MASK;
static_assert(occlNumTypes <= 32 && ops::kNumOpKinds <= 32, "a 32-bit mask names every type and op kind");

// Whether this build runs (dtype, op): both valid, and kept by the masks above.
OCCL_HD constexpr bool dispatchCompiled(int dtype, int op) {
  return dtype >= 0 && dtype < occlNumTypes && op >= 0 && op < ops::kNumOpKinds && ((kDispatchDtypeMask >> dtype) & 1u) != 0 &&
         ((kDispatchOpMask >> op) & 1u) != 0;
}

namespace detail {

template <typename R>
OCCL_HD inline R invalidDispatch() {
  if constexpr (!std::is_void_v<R>) {
    static_assert(std::is_default_constructible_v<R>, "dispatch result must be void or default-constructible");
    return R{};
  }
}

template <typename R, int D, typename F>
OCCL_HD inline R dispatchTypeFrom(int dtype, F& f) {
  if constexpr (((kDispatchDtypeMask >> D) & 1u) != 0)
    if (dtype == D) return f.template operator()<TypeOf_t<static_cast<occlDataType_t>(D)>>();
  if constexpr (D + 1 < occlNumTypes) {
    return dispatchTypeFrom<R, D + 1>(dtype, f);
  } else {
    return invalidDispatch<R>();
  }
}

template <typename R, typename T, int O, typename F>
OCCL_HD inline R dispatchOpFrom(int op, F& f) {
  if constexpr (((kDispatchOpMask >> O) & 1u) != 0)
    if (op == O) return f.template operator()<T, ops::OpOf_t<O>>();
  if constexpr (O + 1 < ops::kNumOpKinds) {
    return dispatchOpFrom<R, T, O + 1>(op, f);
  } else {
    return invalidDispatch<R>();
  }
}

// Adapts f<T, Op> to the one-parameter form, with the op still a runtime value.
template <typename R, typename F>
struct OpStage {
  F& f;
  int op;
  template <typename T>
  OCCL_HD R operator()() const {
    return dispatchOpFrom<R, T, 0>(op, f);
  }
};

}  // namespace detail

template <typename F>
using DispatchTypeResult = decltype(std::declval<F&>().template operator()<int8_t>());
template <typename F>
using DispatchTypeOpResult = decltype(std::declval<F&>().template operator()<int8_t, ops::Sum>());

template <typename F>
OCCL_HD inline DispatchTypeResult<F> dispatchType(int dtype, F&& f) {
  return detail::dispatchTypeFrom<DispatchTypeResult<F>, 0>(dtype, f);
}

template <typename F>
OCCL_HD inline DispatchTypeOpResult<F> dispatchTypeOp(int dtype, int op, F&& f) {
  using R = DispatchTypeOpResult<F>;
  detail::OpStage<R, std::remove_reference_t<F>> stage{f, op};
  return detail::dispatchTypeFrom<R, 0>(dtype, stage);
}

}  // namespace occl
