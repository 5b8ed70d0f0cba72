// C++ wrapper over occl.h: RAII communicators, exceptions carrying the C API's message, and
// submissions that take a std::function or return a std::future. Header-only; it adds no ABI.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "occl/occl.h"

namespace occl {

class Error : public std::runtime_error {
 public:
  Error(occlResult_t code, const std::string& message)
      : std::runtime_error(std::string(occlGetErrorString(code)) + ": " + message), code_(code) {}
  occlResult_t code() const { return code_; }

 private:
  occlResult_t code_;
};

inline void check(occlResult_t r, occlComm_t comm = nullptr) {
  if (r != occlSuccess) throw Error(r, occlGetLastError(comm));
}

inline occlConfig_t defaultConfig() {
  occlConfig_t c;
  check(occlConfigInit(&c));
  return c;
}

class Comm {
 public:
  using Callback = std::function<void(uint64_t collId, occlResult_t status)>;

  Comm(int nranks, const occlUniqueId& id, int rank, const occlConfig_t* config = nullptr) {
    check(occlCommInitRank(&comm_, nranks, id, rank, config));
  }
  static Comm fromEnv(const occlConfig_t* config = nullptr) {
    occlComm_t c = nullptr;
    check(occlCommInitFromEnv(&c, config));
    return Comm(c);
  }
  // `n` ranks in this process (ranks as threads); devices as for occlCommInitAll.
  static std::vector<Comm> all(int n, const occlConfig_t* config = nullptr, const int* devlist = nullptr) {
    std::vector<occlComm_t> raw(static_cast<size_t>(n));
    check(occlCommInitAll(raw.data(), n, devlist, config));
    std::vector<Comm> out;
    for (occlComm_t c : raw) out.push_back(Comm(c));
    return out;
  }

  // An empty Comm, holding no communicator: what split gives a rank without a color.
  Comm() = default;
  // occlCommSplit: every rank of this communicator calls it. OCCL_SPLIT_NOCOLOR gives a Comm
  // that holds no communicator (get() == nullptr, explicit bool false).
  Comm split(int color, int key, const occlConfig_t* config = nullptr) const {
    occlComm_t c = nullptr;
    check(occlCommSplit(comm_, color, key, &c, config), comm_);
    return Comm(c);
  }
  explicit operator bool() const { return comm_ != nullptr; }
  // occlCommRevoke: pending submissions fail, later ones are refused; shrink() or let it go.
  void revoke() { check(occlCommRevoke(comm_, OCCL_REVOKE_DEFAULT), comm_); }
  // occlCommShrink without the ranks in `exclude` (every other rank calls it with the same list).
  // `abortPending`: OCCL_SHRINK_ABORT (revokes this communicator first).
  Comm shrink(const std::vector<int>& exclude, bool abortPending = false, const occlConfig_t* config = nullptr) {
    occlComm_t c = nullptr;
    check(occlCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &c, config,
                         abortPending ? OCCL_SHRINK_ABORT : OCCL_SHRINK_DEFAULT),
          comm_);
    return Comm(c);
  }

  Comm(Comm&& o) noexcept : comm_(std::exchange(o.comm_, nullptr)), thrown_(o.thrown_) {}
  Comm& operator=(Comm&& o) noexcept {
    if (this != &o) {
      reset();
      comm_ = std::exchange(o.comm_, nullptr);
      thrown_ = o.thrown_;
    }
    return *this;
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  // Finalizes (waits for outstanding submissions) and destroys; never throws.
  ~Comm() { reset(); }

  occlComm_t get() const { return comm_; }
  int rank() const {
    int r = 0;
    check(occlCommUserRank(comm_, &r), comm_);
    return r;
  }
  int size() const {
    int n = 0;
    check(occlCommCount(comm_, &n), comm_);
    return n;
  }
  // "in-process", "shm", "net", ...: what carries this rank's connectors to `peer`.
  std::string peerTransport(int peer) const {
    const char* t = nullptr;
    check(occlCommPeerTransport(comm_, peer, &t), comm_);
    return t;
  }

  // The configuration the communicator runs with, its "auto" fields resolved.
  occlConfig_t config() const {
    occlConfig_t c{};
    check(occlCommGetConfig(comm_, &c), comm_);
    return c;
  }

  void registerCollective(uint64_t collId, const occlCollDesc_t& desc) {
    check(occlCollRegister(comm_, collId, &desc), comm_);
  }
  void deregisterCollective(uint64_t collId) { check(occlCollDeregister(comm_, collId), comm_); }

  // occlRedOpCreatePreMulSum: an op for desc.op that sums every rank's input times its own rank's
  // scalar. Immediate: *scalar is read now; Device: it is read whenever a submission runs.
  occlRedOp_t createPreMulSum(void* scalar, occlDataType_t datatype, occlScalarResidence_t residence) {
    occlRedOp_t op;
    check(occlRedOpCreatePreMulSum(&op, scalar, datatype, residence, comm_), comm_);
    return op;
  }
  void destroyRedOp(occlRedOp_t op) { check(occlRedOpDestroy(op, comm_), comm_); }

  // `callback` runs on the poller thread, or in a thread waiting in waitAll; it must not block.
  // An exception it throws cannot reach the thread that submitted: the first one is kept and
  // rethrown by the next waitAll() (later ones, until then, are dropped, as are those of callbacks
  // that fire while the destructor or a move-assignment finalizes), and the callbacks of other
  // submissions go on firing.
  void submit(uint64_t collId, const void* sendbuf, void* recvbuf, Callback callback) {
    submitCount(collId, OCCL_COUNT_REGISTERED, sendbuf, recvbuf, std::move(callback));
  }
  // occlSubmitCount: a collective registered with desc.variableCount, `count` elements this time.
  void submitCount(uint64_t collId, size_t count, const void* sendbuf, void* recvbuf, Callback callback) {
    auto* heap = new Pending{std::move(callback), thrown_};
    occlResult_t r = occlSubmitCount(comm_, collId, count, sendbuf, recvbuf, &Comm::trampoline, heap);
    if (r != occlSuccess) {
      delete heap;
      check(r, comm_);
    }
  }
  // occlSubmitV: a v-collective (desc.vectorCounts); the arrays are read during the call only.
  void submitV(uint64_t collId, const void* sendbuf, void* recvbuf, const occlVectors_t& vectors, Callback callback) {
    auto* heap = new Pending{std::move(callback), thrown_};
    occlResult_t r = occlSubmitV(comm_, collId, sendbuf, recvbuf, &vectors, &Comm::trampoline, heap);
    if (r != occlSuccess) {
      delete heap;
      check(r, comm_);
    }
  }
  // The future holds the completion status (it does not throw on a failed collective).
  std::future<occlResult_t> submit(uint64_t collId, const void* sendbuf, void* recvbuf) {
    auto promise = std::make_shared<std::promise<occlResult_t>>();
    std::future<occlResult_t> f = promise->get_future();
    submit(collId, sendbuf, recvbuf, [promise](uint64_t, occlResult_t s) { promise->set_value(s); });
    return f;
  }

  // occlSubmitGroup: every entry checked before any is queued (a bad one throws and submits
  // nothing), then all queued with one doorbell. Each callback as submit()'s.
  struct Submission {
    uint64_t collId;
    const void* sendbuf;
    void* recvbuf;
    Callback callback;
    size_t count = OCCL_COUNT_REGISTERED;  // occlSubmission_t::count
  };
  void submitGroup(std::vector<Submission> subs) {
    std::vector<occlSubmission_t> entries;
    entries.reserve(subs.size());
    for (Submission& s : subs)
      entries.push_back(
          {s.collId, s.sendbuf, s.recvbuf, &Comm::trampoline, new Pending{std::move(s.callback), thrown_}, s.count});
    int submitted = 0;
    const occlResult_t r = occlSubmitGroup(comm_, entries.data(), static_cast<int>(entries.size()), &submitted);
    if (r == occlSuccess) return;
    for (size_t i = static_cast<size_t>(submitted); i < entries.size(); ++i) delete static_cast<Pending*>(entries[i].arg);
    check(r, comm_);
  }

  // occlSubmitGated: the submission starts once openGate(gate) says its input is ready.
  occlGate_t submitGated(uint64_t collId, const void* sendbuf, void* recvbuf, Callback callback) {
    occlGate_t gate{};
    auto* heap = new Pending{std::move(callback), thrown_};
    occlResult_t r = occlSubmitGated(comm_, collId, sendbuf, recvbuf, &Comm::trampoline, heap, &gate);
    if (r != occlSuccess) {
      delete heap;
      check(r, comm_);
    }
    return gate;
  }
  void openGate(const occlGate_t& gate) { check(occlGateOpen(comm_, gate), comm_); }
  // occlSubmitOnStream (CUDA ranks): `stream` is a cudaStream_t.
  void submitOnStream(uint64_t collId, const void* sendbuf, void* recvbuf, struct CUstream_st* stream,
                      Callback callback) {
    auto* heap = new Pending{std::move(callback), thrown_};
    occlResult_t r = occlSubmitOnStream(comm_, collId, sendbuf, recvbuf, stream, &Comm::trampoline, heap);
    if (r != occlSuccess) {
      delete heap;
      check(r, comm_);
    }
  }

  // Throws occl::Error when the wait fails, else the first exception a callback threw since the
  // last waitAll(), if any.
  void waitAll(int64_t timeoutMs = -1) {
    check(occlCommWaitAll(comm_, timeoutMs), comm_);
    if (std::exception_ptr e = thrown_->take()) std::rethrow_exception(e);
  }
  occlCollStats_t stats(uint64_t collId) const {
    occlCollStats_t s{};
    check(occlCollGetStats(comm_, collId, &s), comm_);
    return s;
  }
  // occlCommGetPending: for each pending submission, the peers it waits on and why.
  std::vector<occlPendingWait_t> pending() const {
    int n = 0;
    check(occlCommGetPending(comm_, nullptr, 0, &n), comm_);
    std::vector<occlPendingWait_t> rows(static_cast<size_t>(n));
    check(occlCommGetPending(comm_, rows.data(), n, &n), comm_);  // as many or fewer by now
    rows.resize(static_cast<size_t>(n));
    return rows;
  }
  occlResult_t asyncError() const {
    occlResult_t e = occlSuccess;
    check(occlCommGetAsyncError(comm_, &e), comm_);
    return e;
  }
  // Fails what is pending and frees the communicator (occlCommAbort). Refused (occl::Error, the
  // Comm still usable) from a callback.
  void abort() {
    if (comm_ == nullptr) return;
    check(occlCommAbort(comm_), comm_);
    comm_ = nullptr;
  }

 private:
  // The first exception thrown by a callback, until waitAll() takes it. Shared with every
  // pending callback, so that one firing after the Comm was moved from still finds it.
  class Thrown {
   public:
    void keep(std::exception_ptr e) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!first_) first_ = std::move(e);
    }
    std::exception_ptr take() {
      std::lock_guard<std::mutex> lock(mu_);
      return std::exchange(first_, nullptr);
    }

   private:
    std::mutex mu_;
    std::exception_ptr first_;
  };
  struct Pending {
    Callback fn;
    std::shared_ptr<Thrown> thrown;
  };

  explicit Comm(occlComm_t c) : comm_(c) {}
  // Called through the C API, which an exception must not cross.
  static void trampoline(uint64_t collId, occlResult_t status, void* arg) noexcept {
    std::unique_ptr<Pending> p(static_cast<Pending*>(arg));
    try {
      p->fn(collId, status);
    } catch (...) {
      p->thrown->keep(std::current_exception());
    }
  }
  void reset() {
    if (comm_ == nullptr) return;
    occlCommFinalize(comm_);
    occlCommDestroy(comm_);
    comm_ = nullptr;
  }

  occlComm_t comm_ = nullptr;
  std::shared_ptr<Thrown> thrown_ = std::make_shared<Thrown>();
};

}  // namespace occl
