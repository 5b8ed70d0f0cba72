#include "check.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "primitives/dispatch.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl::bench {
namespace {

// Calls f(T{}) with the C++ type of `dtype` (occl's own storage types for the narrow floats); an
// invalid dtype (the options reject one first) calls nothing.
template <typename F>
decltype(auto) withType(int dtype, F&& f) {
  return dispatchType(dtype, [&]<typename T>() { return f(T{}); });
}

// Largest integer up to which every integer is exact in T: partial sums must stay below it for a
// floating sum to be independent of the order. Integer types wrap, which is order-independent.
template <typename T>
int64_t exactIntegerLimit() {
  if constexpr (std::is_same_v<T, Half>) return 2048;
  if constexpr (std::is_same_v<T, BFloat16>) return 256;
  if constexpr (std::is_same_v<T, Fp8E4M3>) return 16;
  if constexpr (std::is_same_v<T, Fp8E5M2>) return 8;
  if constexpr (std::is_same_v<T, float>) return int64_t{1} << 24;
  return int64_t{1} << 40;
}

template <typename T>
T bitwiseNot(T v) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  for (unsigned char& b : bytes) b = static_cast<unsigned char>(~b);
  std::memcpy(&v, bytes, sizeof(T));
  return v;
}

template <typename T>
T combine(int op, T a, T b) {
  switch (op) {
    case occlProd: return ops::Prod{}(a, b);
    case occlMax: return ops::Max{}(a, b);
    case occlMin: return ops::Min{}(a, b);
    default: return ops::Sum{}(a, b);  // Sum, and Avg before its final division
  }
}

template <typename T>
class Values {
 public:
  explicit Values(const CheckSpec& s)
      : s_(s), spread_(std::clamp<int64_t>(exactIntegerLimit<T>() / std::max(s.nRanks, 1), 1, 8)) {}

  T input(int rank, uint64_t idx) const {
    const uint64_t r = static_cast<uint64_t>(rank);
    if (!isReducing(s_.plan.coll)) return fromInt<T>(static_cast<int64_t>((r * 37 + idx) % 113));
    // Prod: powers of two stay exact (or overflow to inf) in any order.
    if (s_.op == occlProd) return fromInt<T>((r + idx) % 3 == 0 ? 2 : 1);
    return fromInt<T>(1 + static_cast<int64_t>((r + idx) % static_cast<uint64_t>(spread_)));
  }

  // Element j of this rank's result window.
  T expected(uint64_t j) const {
    const uint64_t c = s_.plan.count;
    const uint64_t shard = static_cast<uint64_t>(s_.rank) * c;
    switch (s_.plan.coll) {
      case Coll::AllReduce:
      case Coll::Reduce: return reduced(j);
      case Coll::ReduceScatter: return reduced(shard + j);
      case Coll::AllGather: return input(static_cast<int>(j / c), j % c);
      case Coll::Broadcast: return input(s_.root, j);
      case Coll::AllToAll: return input(static_cast<int>(j / c), shard + j % c);
      case Coll::SendRecv: return input((s_.rank + s_.nRanks - 1) % s_.nRanks, j);
      case Coll::Gather: return input(static_cast<int>(j / c), j % c);
      case Coll::Scatter: return input(s_.root, shard + j);
    }
    return T{};
  }

 private:
  T reduced(uint64_t idx) const {
    T acc = input(0, idx);
    for (int k = 1; k < s_.nRanks; ++k) acc = combine(s_.op, acc, input(k, idx));
    if (s_.op == occlAvg && s_.nRanks > 1) acc = ops::postDivide(acc, s_.nRanks);
    return acc;
  }

  const CheckSpec& s_;
  int64_t spread_;  // sum/min/max/avg inputs are 1..spread_
};

// Reduce and Gather leave a non-root's receive buffer alone.
bool hasResult(const CheckSpec& s) { return !rootOnly(collInfo(collType(s.plan.coll)).recv) || s.rank == s.root; }

}  // namespace

void writeInput(const CheckSpec& spec, void* send) {
  withType(spec.plan.dtype, [&](auto tag) {
    using T = decltype(tag);
    Values<T> values(spec);
    T* out = static_cast<T*>(send);
    for (uint64_t i = 0; i < spec.plan.sendElems; ++i) out[i] = values.input(spec.rank, i);
  });
}

void prepareRun(const CheckSpec& spec, const RunBuffers& buffers) {
  withType(spec.plan.dtype, [&](auto tag) {
    using T = decltype(tag);
    Values<T> values(spec);
    T* out = static_cast<T*>(buffers.recv);
    for (uint64_t j = 0; j < spec.plan.recvElems; ++j) out[j] = bitwiseNot(values.expected(j));
  });
  writeInput(spec, buffers.send);
}

int64_t countWrong(const CheckSpec& spec, const void* recv) {
  if (!hasResult(spec)) return 0;
  return withType(spec.plan.dtype, [&](auto tag) {
    using T = decltype(tag);
    Values<T> values(spec);
    const T* got = static_cast<const T*>(recv);
    int64_t wrong = 0;
    for (uint64_t j = 0; j < spec.plan.recvElems; ++j) {
      const T want = values.expected(j);
      if (std::memcmp(&got[j], &want, sizeof(T)) != 0) ++wrong;
    }
    return wrong;
  });
}

}  // namespace occl::bench
