// occl.Comm(**config): Python's keywords for occlConfig_t's fields.
#pragma once

#include <pybind11/pybind11.h>

#include "occl/occl.h"

namespace occl::python {

namespace py = pybind11;

// Comm(**config): each keyword is an occlConfig_t field in snake_case, set through
// occlConfigSetField, the table the OCCL_* variables use, so this binding keeps no list of
// fields: an int, a bool, or a word of the field's choices ("simt", "shm").
occlConfig_t configFrom(const py::dict& config);

}  // namespace occl::python
