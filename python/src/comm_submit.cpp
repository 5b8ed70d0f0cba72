// occl.Comm's submissions: submit (plain, gated or on a stream), submit_group and open_gate.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "comm.hpp"

namespace occl::python {
namespace {

// A Prepared submission the C call refused: the reference its Pending held for the callback goes.
void dropUnsubmitted(py::object& future, const Pending& pending) {
  if (pending.future != nullptr) future.dec_ref();
}

}  // namespace

Comm::Prepared Comm::prepare(occlComm_t comm, uint64_t collId, const py::object& send, const py::object& recv,
                             const py::object& callback, uint64_t count, std::optional<Elems> elems) {
  auto reg = registered_.find(collId);
  if (reg == registered_.end())
    throw OcclError{occlInvalidArgument, "collId " + std::to_string(collId) + " is not registered on rank " +
                                             std::to_string(rank()) + " (call register first)"};
  if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
    throw py::type_error("callback: expected a callable taking the Future, or None");
  auto completion = std::make_shared<Completion>();
  Prepared p{py::cast(Future(collId, completion)), nullptr};
  Future& f = p.future.cast<Future&>();
  f.send = viewOf(send, /*writable=*/false, "sendbuf");
  f.recv = viewOf(recv, /*writable=*/true, "recvbuf");
  checkBuffers(collId, reg->second, f.send, f.recv, count, elems);
  f.callback = callback;
  p.pending = std::make_unique<Pending>(Pending{completion, nullptr, comm});
  if (!callback.is_none()) p.pending->future = p.future.inc_ref().ptr();
  return p;
}

void Comm::submitted(Prepared& p) {
  p.pending.release();  // onComplete owns it now
  sweep();
  inflight_.push_back(p.future);
}

py::object Comm::submit(uint64_t collId, const py::object& send, const py::object& recv, const py::object& callback,
                        bool gated, const py::object& stream, std::optional<uint64_t> count) {
  occlComm_t comm = live();
  if (gated && !stream.is_none())
    throw py::value_error("gated=True and stream: a submission is started by its gate or by its stream, not both");
  if (count && (gated || !stream.is_none()))
    throw py::value_error("count: a gated or stream submission has its registered count");
  const bool onStream = !stream.is_none();  // read here, under the GIL, not in the call below
  struct CUstream_st* cudaStream = nullptr;
  if (onStream) {
    if (!py::isinstance<py::int_>(stream))
      throw py::type_error("stream: expected a CUDA stream handle as an int (e.g. torch.cuda.Stream.cuda_stream)");
    cudaStream = reinterpret_cast<struct CUstream_st*>(stream.cast<uintptr_t>());
  }
  const uint64_t n = count.value_or(OCCL_COUNT_REGISTERED);
  Prepared p = prepare(comm, collId, send, recv, callback, n);
  Future& f = p.future.cast<Future&>();
  Pending* pending = p.pending.get();
  occlGate_t gate{};
  const occlResult_t r = withoutGil([&] {
    if (gated) return occlSubmitGated(comm, collId, f.send.data, f.recv.data, &onComplete, pending, &gate);
    if (onStream) return occlSubmitOnStream(comm, collId, f.send.data, f.recv.data, cudaStream, &onComplete, pending);
    return occlSubmitCount(comm, collId, n, f.send.data, f.recv.data, &onComplete, pending);
  });
  if (r != occlSuccess) {
    dropUnsubmitted(p.future, *pending);
    raise(r, comm);
  }
  if (gated) f.gate = gate;
  submitted(p);
  return p.future;
}

namespace {

// One side's arrays for submit_v: `nRanks` of each (displacements None: the blocks packed in rank
// order), and where its furthest block ends.
struct Side {
  std::vector<size_t> counts, displs;
  uint64_t end = 0;
};
Side sideOf(const Comm::Sizes& counts, const Comm::Sizes& displs, size_t nRanks, const char* countsName,
            const char* displsName) {
  Side s;
  if (!counts) {
    if (displs) throw py::value_error(std::string(displsName) + " without " + countsName);
    return s;
  }
  if (counts->size() != nRanks)
    throw py::value_error(std::string(countsName) + ": " + std::to_string(counts->size()) + " entries; expected one per rank, " +
                          std::to_string(nRanks));
  s.counts = *counts;
  if (displs) {
    if (displs->size() != nRanks)
      throw py::value_error(std::string(displsName) + ": " + std::to_string(displs->size()) +
                            " entries; expected one per rank, " + std::to_string(nRanks));
    s.displs = *displs;
  } else {
    size_t at = 0;
    for (size_t c : s.counts) {
      s.displs.push_back(at);
      at += c;
    }
  }
  for (size_t q = 0; q < nRanks; ++q)
    if (s.counts[q] > 0) s.end = std::max<uint64_t>(s.end, s.displs[q] + s.counts[q]);
  return s;
}

}  // namespace

py::object Comm::submitV(uint64_t collId, const py::object& send, const py::object& recv, const Sizes& sendCounts,
                         const Sizes& sendDispls, const Sizes& recvCounts, const Sizes& recvDispls,
                         const py::object& callback) {
  occlComm_t comm = live();
  auto reg = registered_.find(collId);
  if (reg != registered_.end() && !reg->second.vectorCounts)
    throw py::value_error("collId " + std::to_string(collId) + " was registered without vector_counts=True: use submit");
  const auto n = static_cast<size_t>(size());
  Side s = sideOf(sendCounts, sendDispls, n, "send_counts", "send_displs");
  Side r = sideOf(recvCounts, recvDispls, n, "recv_counts", "recv_displs");
  // Gatherv and Scatterv: off the root the side of n blocks is not this rank's buffer, and its
  // displacements are not passed (occl.h, occlSubmitV).
  if (reg != registered_.end() && (reg->second.type == occlCollGather || reg->second.type == occlCollScatter) &&
      reg->second.root != rank()) {
    for (Side* side : {&s, &r}) {
      side->displs.clear();
      side->end = 0;
    }
  }
  // The side of one block holds this rank's share of the other side's (occl.h, occlSubmitV).
  const auto me = static_cast<size_t>(rank());
  const Elems elems{sendCounts ? s.end : recvCounts ? r.counts[me] : 0,
                    recvCounts ? r.end : sendCounts ? s.counts[me] : 0};
  Prepared p = prepare(comm, collId, send, recv, callback, OCCL_COUNT_REGISTERED, elems);
  Future& f = p.future.cast<Future&>();
  Pending* pending = p.pending.get();
  auto ptr = [](const std::vector<size_t>& v) { return v.empty() ? nullptr : v.data(); };
  const occlVectors_t v{ptr(s.counts), ptr(s.displs), ptr(r.counts), ptr(r.displs)};
  const occlResult_t rc =
      withoutGil([&] { return occlSubmitV(comm, collId, f.send.data, f.recv.data, &v, &onComplete, pending); });
  if (rc != occlSuccess) {
    dropUnsubmitted(p.future, *pending);
    raise(rc, comm);
  }
  submitted(p);
  return p.future;
}

py::list Comm::submitGroup(const py::list& entries) {
  occlComm_t comm = live();
  std::vector<Prepared> prepared;
  std::vector<uint64_t> counts;
  prepared.reserve(entries.size());
  counts.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    py::handle e = entries[i];
    const size_t n = py::isinstance<py::tuple>(e) ? py::len(e) : 0;
    if (n < 3 || n > 5)
      throw py::type_error("entries[" + std::to_string(i) +
                           "]: expected a tuple (coll_id, send, recv[, callback[, count]])");
    py::tuple t = py::reinterpret_borrow<py::tuple>(e);
    try {
      counts.push_back(n == 5 && !t[4].is_none() ? t[4].cast<uint64_t>() : uint64_t{OCCL_COUNT_REGISTERED});
      prepared.push_back(
          prepare(comm, t[0].cast<uint64_t>(), t[1], t[2], n >= 4 ? py::object(t[3]) : py::none(), counts.back()));
    } catch (...) {
      for (Prepared& p : prepared) dropUnsubmitted(p.future, *p.pending);
      throw;
    }
  }
  std::vector<occlSubmission_t> subs;
  subs.reserve(prepared.size());
  for (size_t i = 0; i < prepared.size(); ++i) {
    const Future& f = prepared[i].future.cast<const Future&>();
    subs.push_back({f.collId(), f.send.data, f.recv.data, &onComplete, prepared[i].pending.get(), counts[i]});
  }
  int done = 0;
  const occlResult_t r =
      withoutGil([&] { return occlSubmitGroup(comm, subs.data(), static_cast<int>(subs.size()), &done); });
  py::list futures;
  for (size_t i = 0; i < prepared.size(); ++i) {
    if (static_cast<int>(i) < done) {
      submitted(prepared[i]);
      futures.append(prepared[i].future);
    } else {
      dropUnsubmitted(prepared[i].future, *prepared[i].pending);
    }
  }
  if (r != occlSuccess) raise(r, comm);
  return futures;
}

void Comm::openGate(const py::object& gate) {
  occlComm_t comm = live();
  occlGate_t g{};
  if (py::isinstance<Future>(gate)) {
    const Future& f = gate.cast<const Future&>();
    if (!f.gate) throw py::value_error("gate: this Future's submission is not gated (submit it with gated=True)");
    g = *f.gate;
  } else if (py::isinstance<py::tuple>(gate) && py::len(gate) == 2) {
    g = occlGate_t{gate[py::int_(0)].cast<uint64_t>(), gate[py::int_(1)].cast<uint64_t>()};
  } else {
    throw py::type_error("gate: expected a gated submission's Future or its (coll_id, seq) pair");
  }
  const occlResult_t r = withoutGil([&] { return occlGateOpen(comm, g); });
  if (r != occlSuccess) raise(r, comm);
}

}  // namespace occl::python
