// occl.Comm: one rank's communicator as a Python object, over the C API (occl.h).
//
// The GIL: every call that may wait (init, submit, waits, finalize, destroy) releases it. A
// callback runs on occl's poller thread and takes the GIL only to run the Python callable, so a
// thread that waits while holding no GIL never blocks the poller, and the poller never waits for
// a thread that waits on it. Memory: a submission's buffers stay referenced until its callback
// has fired, even if the caller drops the Future.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "buffers.hpp"
#include "config.hpp"
#include "future.hpp"
#include "occl/occl.h"

namespace occl::python {

namespace py = pybind11;

// An occl call that may wait (on the daemon, the poller or peers), made without holding the GIL.
template <typename Call>
occlResult_t withoutGil(Call&& call) {
  py::gil_scoped_release release;
  return call();
}

struct Registration {
  int type, datatype;
  size_t count;
  int root;
  bool keptByShrink;  // what occlCommShrink registers again (host/comm_split.hpp, carriedByShrink)
  bool variableCount;  // desc.variableCount: `count` is a maximum (submit's count=)
  bool vectorCounts;   // desc.vectorCounts: a v-collective (submit_v)
};

// A buffer's elements as a submission uses them, where its counts say so (submit_v).
struct Elems {
  uint64_t send, recv;
};

class Comm {
 public:
  Comm(int nranks, const py::bytes& uniqueId, int rank, const py::dict& config);
  // `n` ranks in this process (occlCommInitAll): for tests and single-process use.
  static std::vector<std::unique_ptr<Comm>> all(int n, const py::dict& config);
  ~Comm();

  // occlCommSplit: None for OCCL_SPLIT_NOCOLOR (color None); no config inherits the parent's.
  std::unique_ptr<Comm> split(int color, int key, const py::dict& config);
  // occlCommRevoke, and occlCommShrink (`abort`: OCCL_SHRINK_ABORT).
  void revoke();
  std::unique_ptr<Comm> shrink(const std::vector<int>& exclude, bool abort, const py::dict& config);
  int rank() const;
  int size() const;
  std::string peerTransport(int peer) const;
  // occlRedOpCreatePreMulSum with a host scalar (converted to `dtype` as numpy would round it):
  // the op to pass to register(op=...).
  int preMulSum(double scalar, const py::object& dtype);
  void registerCollective(uint64_t collId, const py::object& kind, size_t count, const py::object& dtype,
                          const py::object& op, int root, int priority, const std::optional<std::string>& algorithm,
                          int nBlocks, bool variableCount, bool vectorCounts);
  void deregister(uint64_t collId);
  // `gated`: the submission starts once openGate(its Future) (occlSubmitGated). `stream`: a CUDA
  // stream handle (an int, e.g. torch.cuda.Stream.cuda_stream) that starts it and waits for it
  // (occlSubmitOnStream). At most one of them. `count`: occlSubmitCount's (a collective
  // registered with variable_count), None for the registered count; not with gated nor stream.
  py::object submit(uint64_t collId, const py::object& send, const py::object& recv, const py::object& callback,
                    bool gated, const py::object& stream, std::optional<uint64_t> count);
  // occlSubmitGroup: `entries` a list of (coll_id, send, recv[, callback[, count]]) tuples (count
  // None: the registered one), all checked before any is submitted; returns their Futures, in order.
  py::list submitGroup(const py::list& entries);
  // occlSubmitV: a v-collective's run (register(vector_counts=True)). Counts and displacements in
  // elements, one per rank; displacements None pack the blocks in rank order.
  using Sizes = std::optional<std::vector<size_t>>;
  py::object submitV(uint64_t collId, const py::object& send, const py::object& recv, const Sizes& sendCounts,
                     const Sizes& sendDispls, const Sizes& recvCounts, const Sizes& recvDispls,
                     const py::object& callback);
  // occlGateOpen: `gate` is a gated submission's Future or its (coll_id, seq) pair.
  void openGate(const py::object& gate);
  void waitAll(std::optional<double> timeout);
  py::dict stats(uint64_t collId) const;
  // occlCommGetPending: a dict per (pending submission, peer it waits on), reason as text.
  py::list pending() const;
  std::string algorithm(uint64_t collId, bool inPlace) const;
  // occlCollGetSmallForm: (max count, algorithm), or (0, None) without a small form.
  py::tuple smallForm(uint64_t collId) const;
  // For bench/torch_allreduce.py: `iters` runs of collId, each submitted and waited for from C++
  // (the C API's own cost, no Python per run); returns the seconds they took.
  double timeLoop(uint64_t collId, const py::object& send, const py::object& recv, int iters);
  // Finalize then destroy (close) or abort; both idempotent.
  void close();
  void abort();
  bool closed() const { return comm_ == nullptr; }

 private:
  explicit Comm(occlComm_t comm) : comm_(comm) {}
  occlComm_t live() const;
  // The buffers hold a submission of `count` (OCCL_COUNT_REGISTERED: the registered count), or
  // `elems` where given (a v-collective's).
  void checkBuffers(uint64_t collId, const Registration& reg, const View& send, const View& recv,
                    uint64_t count = OCCL_COUNT_REGISTERED, std::optional<Elems> elems = std::nullopt) const;
  // One submission made ready for the C call (comm_submit.cpp): its buffers checked, its Future
  // and the Pending its callback frees.
  struct Prepared {
    py::object future;
    std::unique_ptr<Pending> pending;
  };
  Prepared prepare(occlComm_t comm, uint64_t collId, const py::object& send, const py::object& recv,
                   const py::object& callback, uint64_t count = OCCL_COUNT_REGISTERED,
                   std::optional<Elems> elems = std::nullopt);
  // The C call took `p`: onComplete owns its Pending, and its Future is kept until it is done.
  void submitted(Prepared& p);
  void sweep();

  occlComm_t comm_ = nullptr;
  std::unordered_map<uint64_t, Registration> registered_;
  std::deque<py::object> inflight_;  // Futures whose callback may not have fired yet
  size_t sweptAt_ = 0;
};

// occlConfig_t from keyword arguments named as its fields (snake_case: daemon_blocks=2, ...),
// over occlConfigInit's defaults and environment. Unknown names raise TypeError.
occlConfig_t configFrom(const py::dict& config);

}  // namespace occl::python
