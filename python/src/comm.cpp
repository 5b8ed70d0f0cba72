#include "comm.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <functional>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "primitives/dispatch.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl::python {
namespace {

void check(occlResult_t r, occlComm_t comm) {
  if (r != occlSuccess) raise(r, comm);
}

template <typename T>
int nameIndex(const py::handle& object, int n, T nameOf, const char* what) {
  if (py::isinstance<py::int_>(object)) {
    int v = object.cast<int>();
    if (v >= 0 && v < n) return v;
  } else {
    std::string name = py::str(object);
    for (int i = 0; i < n; ++i)
      if (name == nameOf(i)) return i;
  }
  std::string names;
  for (int i = 0; i < n; ++i) names += (i == 0 ? "" : ", ") + std::string(nameOf(i));
  throw py::value_error(std::string(what) + " " + std::string(py::repr(object)) + ": expected one of " + names);
}

}  // namespace



Comm::Comm(int nranks, const py::bytes& uniqueId, int rank, const py::dict& config) {
  std::string_view bytes = uniqueId;
  occlUniqueId id{};
  if (bytes.size() != sizeof(id.internal))
    throw py::value_error("unique_id: " + std::to_string(bytes.size()) + " bytes; expected the " +
                          std::to_string(sizeof(id.internal)) + " of occl.get_unique_id()");
  std::memcpy(id.internal, bytes.data(), bytes.size());
  occlConfig_t c = configFrom(config);
  check(withoutGil([&] { return occlCommInitRank(&comm_, nranks, id, rank, &c); }), nullptr);
}

std::vector<std::unique_ptr<Comm>> Comm::all(int n, const py::dict& config) {
  if (n < 1) throw py::value_error("n = " + std::to_string(n) + ": expected at least 1 rank");
  occlConfig_t c = configFrom(config);
  std::vector<occlComm_t> raw(static_cast<size_t>(n));
  check(withoutGil([&] { return occlCommInitAll(raw.data(), n, nullptr, &c); }), nullptr);
  std::vector<std::unique_ptr<Comm>> out;
  for (occlComm_t comm : raw) out.emplace_back(new Comm(comm));
  return out;
}

std::unique_ptr<Comm> Comm::split(int color, int key, const py::dict& config) {
  occlComm_t parent = live();
  std::optional<occlConfig_t> c;
  if (!config.empty()) c = configFrom(config);
  occlComm_t child = nullptr;
  check(withoutGil([&] { return occlCommSplit(parent, color, key, &child, c ? &*c : nullptr); }), parent);
  if (child == nullptr) return nullptr;
  return std::unique_ptr<Comm>(new Comm(child));
}

void Comm::revoke() {
  occlComm_t comm = live();
  check(withoutGil([&] { return occlCommRevoke(comm, OCCL_REVOKE_DEFAULT); }), comm);
}

std::unique_ptr<Comm> Comm::shrink(const std::vector<int>& exclude, bool abort, const py::dict& config) {
  occlComm_t parent = live();
  std::optional<occlConfig_t> c;
  if (!config.empty()) c = configFrom(config);
  occlComm_t child = nullptr;
  check(withoutGil([&] {
          return occlCommShrink(parent, exclude.data(), static_cast<int>(exclude.size()), &child, c ? &*c : nullptr,
                                abort ? OCCL_SHRINK_ABORT : OCCL_SHRINK_DEFAULT);
        }),
        parent);
  std::unique_ptr<Comm> shrunk(new Comm(child));
  for (const auto& [collId, reg] : registered_)
    if (reg.keptByShrink) shrunk->registered_[collId] = reg;
  return shrunk;
}

Comm::~Comm() {
  try {
    close();
  } catch (...) {
    // A destructor must not throw: the failure was occl's to report, and nobody is left to hear it.
  }
}

occlComm_t Comm::live() const {
  if (comm_ == nullptr) throw OcclError{occlInvalidUsage, "the communicator is closed"};
  return comm_;
}

int Comm::rank() const {
  int r = 0;
  check(occlCommUserRank(live(), &r), comm_);
  return r;
}

int Comm::size() const {
  int n = 0;
  check(occlCommCount(live(), &n), comm_);
  return n;
}

std::string Comm::peerTransport(int peer) const {
  const char* t = nullptr;
  check(occlCommPeerTransport(live(), peer, &t), comm_);
  return t;
}

int Comm::preMulSum(double scalar, const py::object& dtype) {
  const int t = dtypeFromObject(dtype);
  uint64_t bits = 0;
  dispatchType(t, [&]<typename T>() {
    T v{};
    if constexpr (kIsReducedFloat<T>) {
      v = fromCompute<T>(static_cast<float>(scalar));  // float holds 2p+2 bits: rounding twice is exact
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(static_cast<int64_t>(scalar));  // -1 wraps for an unsigned type, as the sum does
    } else {
      v = static_cast<T>(scalar);
    }
    std::memcpy(&bits, &v, sizeof v);
  });
  occlRedOp_t op;
  check(occlRedOpCreatePreMulSum(&op, &bits, static_cast<occlDataType_t>(t), occlScalarHostImmediate, live()), comm_);
  return static_cast<int>(op);
}

void Comm::registerCollective(uint64_t collId, const py::object& kind, size_t count, const py::object& dtype,
                              const py::object& op, int root, int priority,
                              const std::optional<std::string>& algorithm, int nBlocks, bool variableCount,
                              bool vectorCounts) {
  occlCollDesc_t d;
  check(occlCollDescInit(&d), nullptr);
  d.type = nameIndex(kind, occlNumCollTypes, [](int t) { return collTypeName(t); }, "kind");
  d.count = count;
  d.datatype = dtypeFromObject(dtype);
  // An int from premul_sum() names a PreMulSum op; the library checks it.
  const bool handle = py::isinstance<py::int_>(op) && op.cast<int64_t>() >= occlNumOps && op.cast<int64_t>() <= INT32_MAX;
  d.op = handle ? op.cast<int>() : nameIndex(op, occlNumOps, [](int o) { return ops::opName(o); }, "op");
  d.root = root;
  d.priority = priority;
  d.algorithm = algorithm ? algorithm->c_str() : nullptr;
  d.nBlocks = nBlocks;
  d.variableCount = variableCount ? 1 : 0;
  d.vectorCounts = vectorCounts ? 1 : 0;
  occlComm_t comm = live();
  check(withoutGil([&] { return occlCollRegister(comm, collId, &d); }), comm);
  const bool kept = d.type == occlCollAllReduce && (!algorithm || *algorithm == "ring");
  registered_[collId] = Registration{d.type, d.datatype, count, root, kept, variableCount, vectorCounts};
}

void Comm::deregister(uint64_t collId) {
  occlComm_t comm = live();
  check(withoutGil([&] { return occlCollDeregister(comm, collId); }), comm);
  registered_.erase(collId);
}

void Comm::checkBuffers(uint64_t collId, const Registration& reg, const View& send, const View& recv,
                        uint64_t count, std::optional<Elems> elems) const {
  const bool isRoot = rank() == reg.root;
  // A count the collective does not take is occlSubmitCount's to refuse, by name: sized here
  // by the registered count, the largest it takes.
  const uint64_t n = count == OCCL_COUNT_REGISTERED || count > reg.count ? reg.count : count;
  auto [sendElems, recvElems] = elems ? std::pair{elems->send, elems->recv} : userElems(reg.type, n, size(), isRoot);
  const size_t elemBytes = dtypeSize(reg.datatype);
  auto checkOne = [&](const View& v, uint64_t elems, const char* what) {
    if (elems == 0 || v.data == nullptr) return;  // occlSubmit judges a missing buffer
    if (v.dtype >= 0 && v.dtype != reg.datatype && !(v.buffer && v.dtype == occlUint8 && v.buffer->itemsize == 1))
      throw py::type_error(std::string(what) + ": elements of type " + dtypePythonName(v.dtype) + ", but collId " +
                           std::to_string(collId) + " was registered with " + dtypePythonName(reg.datatype));
    if (v.bytes < elems * elemBytes)
      throw py::value_error(std::string(what) + ": " + std::to_string(v.bytes) + " bytes; collId " +
                            std::to_string(collId) + " (" + collTypeName(reg.type) +
                            (elems ? std::string("v: its blocks' counts and displacements in ")
                                   : " of " + std::to_string(n) + " ") +
                            dtypePythonName(reg.datatype) + " on " + std::to_string(size()) + " ranks) needs " +
                            std::to_string(elems * elemBytes));
  };
  checkOne(send, sendElems, "sendbuf");
  checkOne(recv, recvElems, "recvbuf");
}

void Comm::sweep() {
  while (!inflight_.empty() && inflight_.front().cast<Future&>().done()) inflight_.pop_front();
  // Callbacks of different collectives fire in any order: compact when the queue has doubled.
  if (inflight_.size() > 2 * sweptAt_ + 64) {
    std::deque<py::object> kept;
    for (py::object& f : inflight_)
      if (!f.cast<Future&>().done()) kept.push_back(std::move(f));
    inflight_.swap(kept);
    sweptAt_ = inflight_.size();
  }
}

double Comm::timeLoop(uint64_t collId, const py::object& send, const py::object& recv, int iters) {
  occlComm_t comm = live();
  auto reg = registered_.find(collId);
  if (reg == registered_.end()) throw py::value_error("collId " + std::to_string(collId) + " is not registered");
  View s = viewOf(send, false, "sendbuf"), r = viewOf(recv, true, "recvbuf");
  checkBuffers(collId, reg->second, s, r);
  py::gil_scoped_release release;
  Completion c;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    c.done = false;
    occlResult_t rc = occlSubmit(
        comm, collId, s.data, r.data,
        [](uint64_t, occlResult_t status, void* arg) { static_cast<Completion*>(arg)->finish(status, ""); }, &c);
    if (rc != occlSuccess) raise(rc, comm);
    std::unique_lock<std::mutex> lock(c.mu);
    c.cv.wait(lock, [&] { return c.done; });
    if (c.status != occlSuccess) raise(c.status, comm);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void Comm::waitAll(std::optional<double> timeout) {
  occlComm_t comm = live();
  checkTimeout(timeout);
  const int64_t ms = timeout ? static_cast<int64_t>(std::ceil(*timeout * 1000.0)) : -1;
  check(withoutGil([&] { return occlCommWaitAll(comm, ms); }), comm);
  sweep();
}

py::dict Comm::stats(uint64_t collId) const {
  occlCollStats_t s{};
  check(occlCollGetStats(live(), collId, &s), comm_);
  py::dict d;
  d["submissions"] = s.submissions;
  d["completions"] = s.completions;
  d["preemptions"] = s.preemptions;
  d["context_loads"] = s.contextLoads;
  d["context_saves"] = s.contextSaves;
  d["queue_wait_ns"] = s.queueWaitNs;
  d["execution_ns"] = s.executionNs;
  d["connector_bytes"] = s.connectorBytes;
  d["scratch_bytes"] = s.scratchBytes;
  d["connector_slots"] = s.connectorSlots;
  d["parts"] = s.parts;
  return d;
}

py::list Comm::pending() const {
  occlComm_t comm = live();
  std::vector<occlPendingWait_t> rows;
  occlResult_t r = withoutGil([&] {  // may wait up to 300 ms for the bootstrap root's answer
    int n = 0;
    occlResult_t got = occlCommGetPending(comm, nullptr, 0, &n);
    if (got != occlSuccess) return got;
    rows.resize(static_cast<size_t>(n));
    got = occlCommGetPending(comm, rows.data(), n, &n);
    rows.resize(static_cast<size_t>(n));
    return got;
  });
  check(r, comm);
  py::list out;
  for (const occlPendingWait_t& w : rows) {
    py::dict d;
    d["coll_id"] = w.collId;
    d["seq"] = w.seq;
    d["peer"] = w.peer;
    d["reason"] = occlWaitReasonString(w.reason);
    d["peer_submitted"] = w.peerSubmitted;
    d["peer_last_coll_id"] = w.peerLastCollId;
    d["peer_last_count"] = w.peerLastCount;
    d["peer_last_ago_ms"] = w.peerLastAgoMs;
    d["peer_silent_ms"] = w.peerSilentMs;
    out.append(std::move(d));
  }
  return out;
}

std::string Comm::algorithm(uint64_t collId, bool inPlace) const {
  const char* a = nullptr;
  check(occlCollGetAlgorithm(live(), collId, inPlace ? 1 : 0, &a), comm_);
  return a;
}

py::tuple Comm::smallForm(uint64_t collId) const {
  uint64_t bound = 0;
  const char* a = nullptr;
  check(occlCollGetSmallForm(live(), collId, &bound, &a), comm_);
  if (a == nullptr) return py::make_tuple(bound, py::none());
  return py::make_tuple(bound, py::str(a));
}

void Comm::close() {
  if (comm_ == nullptr) return;
  occlComm_t comm = std::exchange(comm_, nullptr);
  occlResult_t finalized, destroyed;
  std::string why;
  {
    py::gil_scoped_release release;
    finalized = occlCommFinalize(comm);
    if (finalized != occlSuccess) why = occlGetLastError(comm);
    destroyed = occlCommDestroy(comm);
  }
  inflight_.clear();
  registered_.clear();
  if (finalized != occlSuccess) throw OcclError{finalized, "finalize: " + why};
  if (destroyed != occlSuccess) throw OcclError{destroyed, "destroy: " + std::string(occlGetLastError(nullptr))};
}

void Comm::abort() {
  if (comm_ == nullptr) return;
  occlComm_t comm = std::exchange(comm_, nullptr);
  // Fails what is pending (their callbacks fire) and frees the communicator; nothing to report.
  (void)withoutGil([&] { return occlCommAbort(comm); });
  inflight_.clear();
  registered_.clear();
}

}  // namespace occl::python
