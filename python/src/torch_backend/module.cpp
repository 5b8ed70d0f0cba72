// occl._occl_torch: the backend's Python entry points (occl/torch.py registers the backend).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "torch_backend/coll_key.hpp"
#include "torch_backend/process_group.hpp"

namespace py = pybind11;
using occl::torch_backend::ProcessGroupOccl;

namespace {

ProcessGroupOccl& occlGroup(const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg) {
  auto* occl = dynamic_cast<ProcessGroupOccl*>(pg.get());
  TORCH_CHECK(occl != nullptr, "occl: the process group's backend is ", pg->getBackendName(), ", not occl");
  return *occl;
}

}  // namespace

PYBIND11_MODULE(_occl_torch, m) {
  m.doc() = "occl's torch.distributed backend (import occl.torch to register it)";
  m.attr("TORCH_VERSION_BUILT") = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR);

  m.def(
      "create_process_group",
      [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::duration<float> timeout) {
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
        return c10::intrusive_ptr<occl::torch_backend::BackendBase>(
            c10::make_intrusive<ProcessGroupOccl>(store, rank, size, ms));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>());

#if OCCL_TORCH_SPLITS
  // The backend's own Python type (a torch Backend), for what torch asks of a backend that splits.
  py::class_<ProcessGroupOccl, occl::torch_backend::BackendBase, c10::intrusive_ptr<ProcessGroupOccl>>(
      m, "ProcessGroupOccl")
      .def(
          "perform_nocolor_split",
          [](ProcessGroupOccl& pg, const py::object& /*device*/) { pg.splitRanks({}, std::chrono::milliseconds(0)); },
          py::arg("device"), py::call_guard<py::gil_scoped_release>(),
          "Takes part in a split of this group without joining the new group (dist.new_group on a non-member).")
      .def(
          "split_ranks",
          [](ProcessGroupOccl& pg, const std::vector<int>& ranks, std::chrono::duration<float> timeout) {
            return pg.splitRanks(ranks, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
          },
          py::arg("ranks"), py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
          "occlCommSplit: `ranks` (of this group) become a new group in that order; None where the caller is not "
          "among them. Every rank of this group calls it.");
#endif

  m.def(
      "origin",
      [](const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg) {
        switch (occlGroup(pg).origin()) {
          case ProcessGroupOccl::Origin::Split: return "split";
          case ProcessGroupOccl::Origin::Shrink: return "shrink";
          case ProcessGroupOccl::Origin::Rendezvous: break;
        }
        return "rendezvous";
      },
      py::arg("group"), "How the group's communicator was made: \"rendezvous\", \"split\" or \"shrink\".");
  m.def(
      "set_coll_tag", [](std::optional<uint64_t> tag) { return occl::torch_backend::setCurrentTag(tag); },
      py::arg("tag"), "Sets the calling thread's collective tag (None: untagged); returns the previous one.");
  m.def("coll_tag", &occl::torch_backend::currentTag);
  m.def("set_size_classes", &occl::torch_backend::setSizeClasses, py::arg("on"),
        "Sets whether the calling thread's calls register by size class; returns the previous setting.");
  m.def("size_classes", &occl::torch_backend::sizeClassesOn);
  m.def(
      "peer_transport",
      [](const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg, int peer) {
        return occlGroup(pg).peerTransport(peer);
      },
      py::arg("group"), py::arg("peer"));
  m.def(
      "registered_count",
      [](const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg) { return occlGroup(pg).registeredCount(); },
      py::arg("group"));
  m.def(
      "registered_bytes",
      [](const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg) { return occlGroup(pg).registeredBytes(); },
      py::arg("group"));
  m.def(
      "shrink",
      [](const c10::intrusive_ptr<occl::torch_backend::BackendBase>& pg, const std::vector<int>& exclude, bool abort) {
        return occlGroup(pg).shrink(exclude, abort);
      },
      py::arg("group"), py::arg("exclude"), py::arg("abort"), py::call_guard<py::gil_scoped_release>());
  m.def("shutdown_all", &occl::torch_backend::shutdownAll, py::call_guard<py::gil_scoped_release>());
}
