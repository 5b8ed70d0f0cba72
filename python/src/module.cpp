// occl._occl: the Python face of the C API (occl/__init__.py re-exports it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "comm.hpp"
#include "device/coll_types.hpp"
#include "occl/occl.h"

namespace py = pybind11;
using occl::python::Comm;
using occl::python::Future;
using occl::python::OcclError;

PYBIND11_MODULE(_occl, m) {
  m.doc() = "occl: deadlock-free collectives; register once, submit in any order, callbacks on completion";

  static py::exception<OcclError> errorType(m, "OcclError", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const OcclError& e) {
      std::string text = std::string(occlGetErrorString(e.code)) + ": " + e.message;
      py::object error = py::handle(errorType.ptr())(text);
      error.attr("code") = static_cast<int>(e.code);
      error.attr("message") = e.message;
      PyErr_SetObject(errorType.ptr(), error.ptr());
    }
  });

  int version = 0;
  occlGetVersion(&version);
  m.attr("__version__") = std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
                          std::to_string(version % 100);
  py::list kinds;
  for (int t = 0; t < occlNumCollTypes; ++t) kinds.append(occl::collTypeName(t));
  m.attr("KINDS") = kinds;
  m.attr("SPLIT_NOCOLOR") = OCCL_SPLIT_NOCOLOR;

  m.def(
      "get_unique_id",
      [] {
        occlUniqueId id;
        occlResult_t r = occlGetUniqueId(&id);
        if (r != occlSuccess) occl::python::raise(r, nullptr);
        return py::bytes(id.internal, sizeof(id.internal));
      },
      "Rank 0 calls this and ships the bytes to the other ranks (any channel).");

  py::class_<Future>(m, "Future", "One submission; complete when its callback has fired.")
      .def_property_readonly("coll_id", &Future::collId)
      .def("done", &Future::done)
      .def("wait", &Future::wait, py::arg("timeout") = py::none(),
           "True once complete, False when `timeout` seconds passed first (None: no bound).")
      .def("result", &Future::result, py::arg("timeout") = py::none(),
           "None on success; raises occl.OcclError if the collective failed, TimeoutError on timeout.")
      .def_property_readonly("status", &Future::status, "None while pending or on success, else the occl result code.")
      .def_property_readonly(
          "gate",
          [](const Future& f) -> py::object {
            if (!f.gate) return py::none();
            return py::make_tuple(f.gate->collId, f.gate->seq);
          },
          "A gated submission's (coll_id, seq), which Comm.open_gate opens; None otherwise.");

  py::class_<Comm>(m, "Comm", "One rank's communicator.")
      .def(py::init([](int nranks, const py::bytes& uniqueId, int rank, const py::kwargs& config) {
             return std::make_unique<Comm>(nranks, uniqueId, rank, config);
           }),
           py::arg("nranks"), py::arg("unique_id"), py::arg("rank"))
      .def_static("all", [](int n, const py::kwargs& config) { return Comm::all(n, config); }, py::arg("n"),
                  "n ranks as threads of this process; returns their communicators.")
      .def(
          "split",
          [](Comm& c, const py::object& color, int key, const py::kwargs& config) {
            return c.split(color.is_none() ? OCCL_SPLIT_NOCOLOR : color.cast<int>(), key, config);
          },
          py::arg("color"), py::arg("key") = 0,
          "occlCommSplit: every rank calls it; ranks of one color (an int >= 0) form a new communicator, "
          "ranked by key, then by rank here. color=None takes part and returns None. Config keywords give the "
          "child its own config; none inherits this one's.")
      .def("revoke", &Comm::revoke,
           "occlCommRevoke: fails what is pending (their futures raise), refuses later work; then shrink or close.")
      .def(
          "shrink",
          [](Comm& c, const std::vector<int>& exclude, bool abort, const py::kwargs& config) {
            return c.shrink(exclude, abort, config);
          },
          py::arg("exclude"), py::kw_only(), py::arg("abort") = false,
          "occlCommShrink: every rank not in `exclude` calls it with the same list. "
          "abort=True fails this communicator's pending work first (OCCL_SHRINK_ABORT). The new communicator keeps "
          "the registered AllReduces under the same ids.")
      .def_property_readonly("rank", &Comm::rank)
      .def_property_readonly("size", &Comm::size)
      .def_property_readonly("closed", &Comm::closed)
      .def("peer_transport", &Comm::peerTransport, py::arg("peer"))
      .def("premul_sum", &Comm::preMulSum, py::arg("scalar"), py::arg("dtype"),
           "occlRedOpCreatePreMulSum with this rank's scalar: returns the op for register(op=...), which then "
           "sums every rank's input times its own rank's scalar (each product rounded to dtype first).")
      .def("register", &Comm::registerCollective, py::arg("coll_id"), py::arg("kind"), py::arg("count"),
           py::arg("dtype"), py::arg("op") = "sum", py::arg("root") = 0, py::arg("priority") = 0,
           py::arg("algorithm") = py::none(), py::arg("n_blocks") = 0, py::kw_only(), py::arg("variable_count") = false,
           py::arg("vector_counts") = false,
           "occlCollRegister. variable_count=True: count is a maximum, and each submit may pass count= up to it. "
           "vector_counts=True: the v-collective of kind (alltoall, allgather, reducescatter, gather, scatter), "
           "submitted with submit_v; count is the most elements of one block.")
      .def("deregister", &Comm::deregister, py::arg("coll_id"))
      .def("submit", &Comm::submit, py::arg("coll_id"), py::arg("send"), py::arg("recv"),
           py::arg("callback") = py::none(), py::kw_only(), py::arg("gated") = false, py::arg("stream") = py::none(),
           py::arg("count") = py::none(),
           "Submits one run of coll_id; returns its Future. gated=True: it starts once open_gate(future) says "
           "its input is ready (any thread). stream=<int>: a CUDA stream handle that starts it and waits for it "
           "(CUDA ranks). count=<int>: this run's count, for a collective registered with variable_count=True "
           "(every rank must pass the same; occlSubmitCount).")
      .def("submit_v", &Comm::submitV, py::arg("coll_id"), py::arg("send"), py::arg("recv"),
           py::arg("send_counts") = py::none(), py::arg("send_displs") = py::none(), py::arg("recv_counts") = py::none(),
           py::arg("recv_displs") = py::none(), py::arg("callback") = py::none(),
           "occlSubmitV: a run of a v-collective, with one count (and displacement, in elements; None packs the "
           "blocks in rank order) per rank. alltoall: send_* and recv_*; allgather: recv_* (every rank's "
           "contribution); reducescatter: send_* (every rank's block); gather: recv_* (the root's blocks; off the "
           "root, recv is unused); scatter: send_* (the root's blocks; off the root, send is unused). Returns its "
           "Future.")
      .def("submit_group", &Comm::submitGroup, py::arg("entries"),
           "occlSubmitGroup: submits a list of (coll_id, send, recv[, callback[, count]]) tuples "
           "in one call with one doorbell; every entry is checked before any is submitted (a bad one raises and "
           "submits nothing). Returns their Futures, in order.")
      .def("open_gate", &Comm::openGate, py::arg("gate"),
           "Opens a gated submission's gate: its Future, or its (coll_id, seq) pair.")
      .def("_time_loop", &Comm::timeLoop, py::arg("coll_id"), py::arg("send"), py::arg("recv"), py::arg("iters"),
           "For bench/torch_allreduce.py: seconds for `iters` submit-and-wait runs done in C++.")
      .def("wait_all", &Comm::waitAll, py::arg("timeout") = py::none())
      .def("stats", &Comm::stats, py::arg("coll_id"))
      .def("pending", &Comm::pending,
           "occlCommGetPending: who is missing. A dict per pending submission and peer it waits on: coll_id, seq, "
           "peer (-1: nobody in particular), reason ('not submitted', 'not registered', 'registered differently', "
           "'silent', 'in flight', 'unknown'), peer_submitted, peer_last_coll_id, peer_last_count, "
           "peer_last_ago_ms, peer_silent_ms (-1: not tracked).")
      .def("algorithm", &Comm::algorithm, py::arg("coll_id"), py::arg("in_place") = false)
      .def("small_form", &Comm::smallForm, py::arg("coll_id"),
           "occlCollGetSmallForm: (max_count, algorithm) that a variable count's submissions of at most max_count "
           "run, or (0, None).")
      .def("close", &Comm::close, "Waits for what was submitted (finalize), then frees the communicator.")
      .def("abort", &Comm::abort, "Fails what is pending (callbacks fire) and frees the communicator at once.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Comm& c, const py::object& type, const py::object&, const py::object&) {
        if (type.is_none())
          c.close();
        else
          c.abort();
      });
}
