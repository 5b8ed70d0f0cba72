// One collective "case" as nccl-tests checks it: inputs that every reduction order reduces to the
// same bits, the user buffers of each rank (in place at NCCL's positions, or out of place), and the
// exact bytes each rank's receive buffer must hold afterwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "occl/occl.h"
#include "primitives/dispatch.hpp"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"
#include "support/ranks.hpp"

namespace occl::test {

// Send/Recv cases use type occlCollSend for the pair: `root` sends to `peer`.
struct Spec {
  int type = occlCollAllReduce;
  int dtype = occlFloat32;
  int op = occlSum;
  size_t count = 0;
  bool inPlace = false;
  int root = 0;
  int peer = 0;
  int nBlocks = 0;  // desc.nBlocks
  const char* algorithm = nullptr;  // desc.algorithm: NULL = built-in
};

// The facts come from the library's table (device/coll_types.hpp); a case of type occlCollSend
// stands for the Send/Recv pair.
inline bool reducing(int type) { return collInfo(type).reduces; }
inline bool hasInPlace(int type) { return collInfo(type).inPlace != InPlaceRule::None; }

// Every case type: the collectives, then the Send/Recv pair (occlCollSend).
inline std::vector<int> caseTypes() {
  std::vector<int> out;
  for (const CollTypeInfo& c : kCollTypes)
    if (c.type != occlCollRecv) out.push_back(c.type);
  return out;
}

inline const char* caseName(int type) {
  if (type == occlCollSend) return "sendrecv";
  return isCollType(type) ? collTypeName(type) : "invalid";
}

inline std::string describe(const Spec& s) {
  return absl::StrFormat("%s %s %s count=%d %s root=%d peer=%d%s", caseName(s.type), dtypeName(s.dtype),
                         reducing(s.type) ? ops::opName(s.op) : "-", s.count, s.inPlace ? "in-place" : "out-of-place",
                         s.root, s.peer, s.algorithm != nullptr ? absl::StrCat(" algorithm=", s.algorithm) : "");
}

inline bool participates(const Spec& s, int rank) { return s.type != occlCollSend || rank == s.root || rank == s.peer; }

// The description rank `rank` registers: the pair's sender registers Send to peer, the peer Recv
// from the sender.
inline occlCollDesc_t descFor(const Spec& s, int rank) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = s.type;
  d.count = s.count;
  d.datatype = s.dtype;
  d.op = s.op;
  d.root = s.root;
  d.nBlocks = s.nBlocks;
  d.algorithm = s.algorithm;
  if (s.type == occlCollSend) {
    d.type = rank == s.root ? occlCollSend : occlCollRecv;
    d.root = rank == s.root ? s.peer : s.root;
  }
  return d;
}

// Elements of rank `rank`'s send and receive buffers (NCCL's meaning of count).
inline std::pair<size_t, size_t> userElems(const Spec& s, int nRanks, int rank) {
  if (s.type == occlCollSend) return {rank == s.root ? s.count : 0, rank == s.peer ? s.count : 0};
  const auto [send, recv] = occl::userElems(s.type, s.count, nRanks, rank == s.root);
  return {static_cast<size_t>(send), static_cast<size_t>(recv)};
}

// Small integers, exact in every type (bfloat16 holds integers up to 256): sums stay within
// +-32, products within +-4 (at most two 2s per element on 8 ranks), so no order rounds or wraps.
// Integer avg sums are arbitrary (truncating division is tested); floating avg sums are n times an
// integer, so the quotient is exact however avg is computed. Periodic in the index (inputPeriod).
// The 8-bit floats hold every integer only up to 8 (e5m2; e4m3 to 16): their inputs are narrower
// (fp8Input), so that on up to 8 ranks every partial sum stays within +-8.
inline bool isFp8(int dtype) { return dtype == occlFloat8e4m3 || dtype == occlFloat8e5m2; }

inline int64_t fp8Input(const Spec& s, int nRanks, int64_t r, int64_t i) {
  if (!reducing(s.type)) return (i * 5 + r * 11 + 1) % 17 - 8;
  switch (s.op) {
    case occlSum: return (r * 3 + i) % 3 - 1;
    case occlMin:
    case occlMax: return (i * 7 + r * 13) % 17 - 8;
    default:  // Avg: pairs of ranks cancel out, and at most four 2s meet in a partial sum
      if (nRanks % 2 == 1 && r == nRanks - 1) return i % 2;
      return i % 2 + (r % 2 == 0 ? 1 : -1);
  }
}

inline int64_t caseInput(const Spec& s, int nRanks, int rank, size_t index) {
  const auto i = static_cast<int64_t>(index), r = static_cast<int64_t>(rank);
  if (isFp8(s.dtype) && !(reducing(s.type) && s.op == occlProd)) return fp8Input(s, nRanks, r, i);
  const int64_t shift = (s.dtype == occlUint8 || s.dtype == occlUint32 || s.dtype == occlUint64) ? 0 : 1;
  if (!reducing(s.type)) return (i * 5 + r * 11 + 1) % 113;
  switch (s.op) {
    case occlSum: return (r * 3 + i) % 5 - 2 * shift;
    case occlProd:
      if ((i + r) % 4 == 0) return 2;
      return (shift != 0 && (i + 2 * r) % 7 == 3) ? -1 : 1;
    case occlMin:
    case occlMax: return (i * 7 + r * 13) % 61 - 30 * shift;
    default:
      if (!dtypeIsFloating(s.dtype)) return (i + r) % 4 - 2 * shift;
      if (nRanks % 2 == 1 && rank == nRanks - 1) return i % 5;
      return i % 5 + (rank % 2 == 0 ? 1 : -1);  // pairs of ranks cancel out
  }
}

// The reduction over all ranks of input element `index`.
inline int64_t reduced(const Spec& s, int nRanks, size_t index) {
  int64_t acc = caseInput(s, nRanks, 0, index);
  for (int r = 1; r < nRanks; ++r) {
    const int64_t v = caseInput(s, nRanks, r, index);
    switch (s.op) {
      case occlProd: acc *= v; break;
      case occlMin: acc = v < acc ? v : acc; break;
      case occlMax: acc = v > acc ? v : acc; break;
      default: acc += v;
    }
  }
  return s.op == occlAvg ? acc / nRanks : acc;  // C++ truncates, as occl's integer avg
}

template <typename T>
double toDouble(T v) {
  if constexpr (kIsReducedFloat<T>) {
    return static_cast<double>(toFloat(v));
  } else {
    return static_cast<double>(v);
  }
}

// caseInput is periodic in the index with this period, so a case evaluates one period per rank.
inline size_t inputPeriod(const Spec& s) {
  if (isFp8(s.dtype)) {
    if (!reducing(s.type)) return 17;
    switch (s.op) {
      case occlSum: return 3;
      case occlProd: return 28;
      case occlMin:
      case occlMax: return 17;
      default: return 2;
    }
  }
  if (!reducing(s.type)) return 113;
  switch (s.op) {
    case occlSum: return 5;
    case occlProd: return 28;
    case occlMin:
    case occlMax: return 61;
    default: return dtypeIsFloating(s.dtype) ? 5 : 4;
  }
}

// One period of every rank's inputs and of their reduction.
template <typename T>
struct Tables {
  size_t period = 1;
  std::vector<std::vector<T>> inputs;  // [rank][index % period]
  std::vector<T> reductions;           // [index % period]; reducing collectives only

  T input(int rank, size_t i) const { return inputs[static_cast<size_t>(rank)][i % period]; }
  T reduction(size_t i) const { return reductions[i % period]; }
};

template <typename T>
Tables<T> tablesFor(const Spec& s, int nRanks) {
  Tables<T> t;
  t.period = inputPeriod(s);
  t.inputs.resize(static_cast<size_t>(nRanks));
  for (int r = 0; r < nRanks; ++r)
    for (size_t i = 0; i < t.period; ++i) t.inputs[static_cast<size_t>(r)].push_back(fromInt<T>(caseInput(s, nRanks, r, i)));
  if (reducing(s.type))
    for (size_t i = 0; i < t.period; ++i) t.reductions.push_back(fromInt<T>(reduced(s, nRanks, i)));
  return t;
}

// What receive element `i` of rank `rank` must hold, or false where the collective leaves it alone.
template <typename T>
bool expectedAt(const Spec& s, const Tables<T>& t, int rank, size_t i, T& out) {
  const size_t c = s.count;
  switch (s.type) {
    case occlCollAllReduce: out = t.reduction(i); return true;
    case occlCollReduce: out = t.reduction(i); return rank == s.root;
    case occlCollReduceScatter: out = t.reduction(static_cast<size_t>(rank) * c + i); return true;
    case occlCollAllGather: out = t.input(static_cast<int>(i / c), i % c); return true;
    case occlCollBroadcast: out = t.input(s.root, i); return true;
    case occlCollAllToAll: out = t.input(static_cast<int>(i / c), static_cast<size_t>(rank) * c + i % c); return true;
    case occlCollGather: out = t.input(static_cast<int>(i / c), i % c); return rank == s.root;
    case occlCollScatter: out = t.input(s.root, static_cast<size_t>(rank) * c + i); return true;
    default: out = t.input(s.root, i); return true;  // the receiving peer
  }
}

// One rank's buffers. In place, both pointers point into `first` at NCCL's positions.
struct RankIo {
  std::vector<std::byte> first, second;
  void* send = nullptr;
  void* recv = nullptr;
  size_t recvElems = 0;              // elements of *recv the test checks
  std::vector<std::byte> expected;  // what *recv must hold afterwards

  RankIo() = default;
  // A copy's send and recv point at the same offsets of the copy's own buffers. (With the
  // original's pointers, a copy of a temporary read freed memory: gpu_streams_test's torture
  // reported the garbage as a wrong result on an H200.) A move keeps the buffers, so the
  // pointers stay right.
  RankIo(const RankIo& o) : first(o.first), second(o.second), recvElems(o.recvElems), expected(o.expected) {
    send = o.rebase(o.send, *this);
    recv = o.rebase(o.recv, *this);
  }
  RankIo& operator=(const RankIo& o) {
    if (this != &o) *this = RankIo(o);
    return *this;
  }
  RankIo(RankIo&&) noexcept = default;
  RankIo& operator=(RankIo&&) noexcept = default;
  ~RankIo() = default;

 private:
  // `p` (one of this RankIo's pointers) at the same offset in `copy`'s buffers; a pointer into
  // neither buffer is kept as it is.
  void* rebase(void* p, RankIo& copy) const {
    const auto* b = static_cast<const std::byte*>(p);
    auto within = [b](const std::vector<std::byte>& v) {
      return b != nullptr && !v.empty() && b >= v.data() && b <= v.data() + v.size();
    };
    if (within(first)) return copy.first.data() + (b - first.data());
    if (within(second)) return copy.second.data() + (b - second.data());
    return p;
  }
};

inline constexpr std::byte kSentinel{0xA5};

template <typename T>
RankIo prepareAs(const Spec& s, const Tables<T>& t, int n, int rank) {
  RankIo io;
  const auto [sendElems, recvElems] = userElems(s, n, rank);
  const size_t eb = sizeof(T), c = s.count;
  // A non-root Reduce still passes a receive buffer, so that the test sees it left untouched.
  io.recvElems = s.type == occlCollReduce ? c : recvElems;
  auto fill = [&](std::byte* at, size_t elems) {
    for (size_t j = 0; j < elems; ++j) {
      const T v = t.input(rank, j);
      std::memcpy(at + j * eb, &v, eb);
    }
  };
  // Gather and Scatter are in place on the root only: the others have one buffer.
  const bool rootsShare = collInfo(s.type).send == Extent::RootOnlyByRanks || collInfo(s.type).recv == Extent::RootOnlyByRanks;
  if (s.inPlace && !(rootsShare && rank != s.root)) {
    io.first.assign(std::max(sendElems, io.recvElems) * eb, kSentinel);
    const auto [sendAt, recvAt] = inPlaceOffsets(s.type, rank, c);
    io.send = io.first.data() + sendAt * eb;
    io.recv = io.first.data() + recvAt * eb;
    fill(static_cast<std::byte*>(io.send), s.type == occlCollBroadcast ? c : sendElems);
  } else {
    io.first.assign(sendElems * eb, kSentinel);
    io.second.assign(io.recvElems * eb, kSentinel);
    fill(io.first.data(), sendElems);
    io.send = sendElems > 0 ? io.first.data() : nullptr;  // a non-root Broadcast passes NULL
    io.recv = io.recvElems > 0 ? io.second.data() : nullptr;
  }
  const auto* initial = static_cast<const std::byte*>(io.recv);
  io.expected.assign(initial, initial + io.recvElems * eb);
  for (size_t i = 0; i < io.recvElems; ++i) {
    T v{};
    if (expectedAt(s, t, rank, i, v)) std::memcpy(io.expected.data() + i * eb, &v, eb);
  }
  return io;
}

// Every rank's buffers for one case.
inline std::vector<RankIo> prepare(const Spec& s, int n) {
  return dispatchType(s.dtype, [&]<typename T>() {
    const Tables<T> t = tablesFor<T>(s, n);
    std::vector<RankIo> out;
    for (int r = 0; r < n; ++r) out.push_back(prepareAs<T>(s, t, n, r));
    return out;
  });
}

// "" when rank `rank`'s receive buffer holds what it must, else the first difference.
template <typename T>
std::string mismatchAs(const Spec& s, int rank, const RankIo& io) {
  const size_t eb = sizeof(T);
  const auto* got = static_cast<const std::byte*>(io.recv);
  for (size_t i = 0; i < io.expected.size() / eb; ++i) {
    if (std::memcmp(got + i * eb, io.expected.data() + i * eb, eb) == 0) continue;
    T g, e;
    std::memcpy(&g, got + i * eb, eb);
    std::memcpy(&e, io.expected.data() + i * eb, eb);
    return absl::StrFormat("%s: rank %d element %d is %g, expected %g", describe(s), rank, i, toDouble(g), toDouble(e));
  }
  return "";
}

inline std::string mismatch(const Spec& s, int rank, const RankIo& io) {
  return dispatchType(s.dtype, [&]<typename T>() { return mismatchAs<T>(s, rank, io); });
}

// ---- Running a batch of cases on ranks as threads ----

// collIds are never reused: a rank that has finished a case may deregister it while a peer still
// drains the connector, and a new registration under the same id would attach to that connector.
inline uint64_t nextCollId() {
  static std::atomic<uint64_t> next{0xC0000};
  return next++;
}

struct Case {
  Spec spec;
  uint64_t collId;
  std::vector<RankIo> io;
};

inline Case makeCase(const Spec& s, int nRanks) { return Case{s, nextCollId(), prepare(s, nRanks)}; }

// Every case of the batch on this rank: done or pending, with its preemption counters.
inline void printPending(occlComm_t comm, int rank, const std::vector<Case>& cases, CallbackCounter& done) {
  const auto fired = done.fired();
  std::string report = absl::StrFormat("rank %d: %d callbacks fired after 20 s\n", rank, fired.size());
  for (const Case& c : cases) {
    if (!participates(c.spec, rank)) continue;
    const bool seen = std::any_of(fired.begin(), fired.end(), [&](const auto& f) { return f.first == c.collId; });
    occlCollStats_t st{};
    occlCollGetStats(comm, c.collId, &st);
    absl::StrAppendFormat(&report, "  rank %d 0x%x %s %s: preemptions %d loads %d saves %d\n", rank, c.collId,
                          seen ? "done" : "PENDING", describe(c.spec), st.preemptions, st.contextLoads, st.contextSaves);
  }
  std::fputs(report.c_str(), stderr);
}

// One rank's part of a batch: register (in `order`), submit (in `order`), wait, deregister.
inline void runRank(occlComm_t comm, int rank, std::vector<Case>& cases, const std::vector<size_t>& order) {
  // Pending callbacks of a rank that gives up (a timeout, a failed submit) fire when the
  // communicator is aborted, after this returns: CallbackCounter keeps their state for them.
  CallbackCounter done;
  size_t mine = 0;
  for (size_t k : order) {
    const Case& c = cases[k];
    if (!participates(c.spec, rank)) continue;
    const occlCollDesc_t d = descFor(c.spec, rank);
    expectOk(occlCollRegister(comm, c.collId, &d), comm, "register " + describe(c.spec));
  }
  for (size_t k : order) {
    Case& c = cases[k];
    if (!participates(c.spec, rank)) continue;
    RankIo& io = c.io[static_cast<size_t>(rank)];
    expectOk(occlSubmit(comm, c.collId, io.send, io.recv, &CallbackCounter::callback, done.arg()), comm,
             "submit " + describe(c.spec));
    ++mine;
  }
  // After 20 s the rank says what it still waits for (and keeps waiting): a hang shows its state.
  if (!done.waitFor(mine, std::chrono::seconds(20))) printPending(comm, rank, cases, done);
  if (!done.waitFor(mine)) throw std::runtime_error("rank " + std::to_string(rank) + ": callbacks timed out");
  for (const auto& [id, status] : done.fired()) {
    if (status != occlSuccess)
      throw std::runtime_error(absl::StrFormat("rank %d: collId 0x%x completed with %s: %s", rank, id,
                                               occlGetErrorString(status), occlGetLastError(comm)));
  }
  for (const Case& c : cases)
    if (participates(c.spec, rank)) expectOk(occlCollDeregister(comm, c.collId), comm, "deregister");
}

inline void checkCases(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    for (size_t r = 0; r < c.io.size(); ++r) {
      const std::string bad = mismatch(c.spec, static_cast<int>(r), c.io[r]);
      ASSERT_TRUE(bad.empty()) << bad;
    }
  }
}

// Runs every case on every rank in one order; `check` = false leaves the results to the caller.
inline void runCases(const CommGroup& comms, std::vector<Case>& cases, bool check = true) {
  std::vector<size_t> order(cases.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  runRanks(comms.size(), [&](int r) { runRank(comms[r], r, cases, order); });
  if (check) checkCases(cases);
}

}  // namespace occl::test
