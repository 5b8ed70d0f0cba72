// What occl.Comm.submit takes for a buffer: a torch tensor (CPU, contiguous) or any object with
// the buffer protocol (numpy arrays, bytearray, memoryview), C-contiguous. A View is the address,
// length and element type occl needs, plus what keeps the memory alive until the callback.
#pragma once

#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

namespace occl::python {

namespace py = pybind11;

struct View {
  void* data = nullptr;
  size_t bytes = 0;
  int dtype = -1;  // occlDataType_t; -1: the object does not say (raw bytes)
  py::object owner;                        // the object itself
  std::unique_ptr<py::buffer_info> buffer; // the exported buffer (released with the GIL held)
};

// `what` names the argument in errors ("sendbuf", "recvbuf"). Raises ValueError/TypeError for
// an object that is not a contiguous host buffer, or read-only where `writable` is asked.
View viewOf(const py::handle& object, bool writable, const char* what);

// occlDataType_t from a name ("float32", "torch.float32", "bfloat16", ...) or any object whose
// str() is one (numpy.dtype, torch.dtype); ValueError naming the object otherwise.
int dtypeFromObject(const py::handle& object);
// numpy's name of an occlDataType_t ("float32", "bfloat16", ...).
const char* dtypePythonName(int dtype);

}  // namespace occl::python
