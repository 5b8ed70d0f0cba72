#include "buffers.hpp"

#include <array>
#include <string_view>

#include "occl/occl.h"
#include "device/dtypes.hpp"

namespace occl::python {
namespace {

// numpy's and torch's names, indexed by occlDataType_t.
constexpr std::array<std::string_view, occlNumTypes> kPythonNames = {
    "int8",    "uint8",   "int32",    "uint32",        "int64",      "uint64",
    "float16", "float32", "float64", "bfloat16", "float8_e4m3fn", "float8_e5m2"};
static_assert(occlFloat16 == 6 && occlBfloat16 == 9 && occlFloat8e5m2 == 11, "kPythonNames follows occlDataType_t");

int dtypeFromName(std::string_view name) {
  if (name.starts_with("torch.")) name.remove_prefix(6);
  if (name.starts_with("<class 'numpy.") && name.ends_with("'>")) name = name.substr(14, name.size() - 16);
  for (int t = 0; t < occlNumTypes; ++t)
    if (name == kPythonNames[static_cast<size_t>(t)] || name == dtypeName(t)) return t;
  return -1;
}

// The element type of a buffer-protocol format ("f", "<i8", "=q", "B", ...), or -1.
int dtypeFromFormat(std::string_view format, size_t itemsize) {
  if (!format.empty() && std::string_view("@=<>!").find(format.front()) != std::string_view::npos)
    format.remove_prefix(1);
  if (format.size() != 1) return -1;
  switch (format.front()) {
    case 'e': return occlFloat16;
    case 'f': return occlFloat32;
    case 'd': return occlFloat64;
    case 'b':
    case 'h':
    case 'i':
    case 'l':
    case 'q':
      return itemsize == 1 ? occlInt8 : itemsize == 4 ? occlInt32 : itemsize == 8 ? occlInt64 : -1;
    case 'B':
    case 'H':
    case 'I':
    case 'L':
    case 'Q':
      return itemsize == 1 ? occlUint8 : itemsize == 4 ? occlUint32 : itemsize == 8 ? occlUint64 : -1;
    case 'c': return occlUint8;
    default: return -1;
  }
}

// torch tensors are duck-typed (occl._occl does not import torch).
bool isTensor(const py::handle& o) {
  return py::hasattr(o, "data_ptr") && py::hasattr(o, "is_contiguous") && py::hasattr(o, "element_size");
}

// Tensors carry no read-only flag: a send and a receive tensor are taken alike.
View tensorView(const py::handle& t, const char* what) {
  std::string device = py::str(t.attr("device").attr("type"));
  if (device != "cpu")
    throw py::value_error(std::string(what) + ": a tensor on device '" + device + "'; occl takes CPU tensors here");
  if (!t.attr("is_contiguous")().cast<bool>())
    throw py::value_error(std::string(what) + ": the tensor is not contiguous (call .contiguous() first)");
  std::string dtype = py::str(t.attr("dtype"));
  View v;
  v.dtype = dtypeFromName(dtype);
  if (v.dtype < 0) throw py::type_error(std::string(what) + ": occl has no element type for " + dtype);
  v.data = reinterpret_cast<void*>(t.attr("data_ptr")().cast<uintptr_t>());
  v.bytes = t.attr("numel")().cast<size_t>() * t.attr("element_size")().cast<size_t>();
  v.owner = py::reinterpret_borrow<py::object>(t);
  return v;
}

}  // namespace

const char* dtypePythonName(int dtype) {
  return dtype >= 0 && dtype < occlNumTypes ? kPythonNames[static_cast<size_t>(dtype)].data() : "invalid";
}

int dtypeFromObject(const py::handle& object) {
  int t = dtypeFromName(std::string(py::str(object)));
  if (t < 0) {
    std::string names;
    for (std::string_view n : kPythonNames) names += (names.empty() ? "" : ", ") + std::string(n);
    throw py::value_error("dtype " + std::string(py::repr(object)) + ": expected one of " + names);
  }
  return t;
}

View viewOf(const py::handle& object, bool writable, const char* what) {
  if (object.is_none()) return View{};
  if (isTensor(object)) return tensorView(object, what);
  if (!PyObject_CheckBuffer(object.ptr()))
    throw py::type_error(std::string(what) + ": expected a torch tensor or an object with the buffer protocol, got " +
                         std::string(py::str(py::type::handle_of(object).attr("__name__"))));
  auto view = std::make_unique<Py_buffer>();
  int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(object.ptr(), view.get(), flags) != 0) {
    PyErr_Clear();
    throw py::value_error(std::string(what) + (writable ? ": expected a writable C-contiguous buffer"
                                                        : ": expected a C-contiguous buffer"));
  }
  View v;
  v.data = view->buf;
  v.bytes = static_cast<size_t>(view->len);
  v.dtype = dtypeFromFormat(view->format != nullptr ? view->format : "B", static_cast<size_t>(view->itemsize));
  v.buffer = std::make_unique<py::buffer_info>(view.release(), /*ownview=*/true);
  v.owner = py::reinterpret_borrow<py::object>(object);
  return v;
}

}  // namespace occl::python
