// libFuzzer target: any bytes given to the MSCCL-IR loader must yield either a program that
// passes validateProgram() or a bounded list of errors, without crashing, leaking or hanging.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace occl::ir;
  const std::string_view xml(reinterpret_cast<const char*>(data), size);
  LoadResult r = loadMscclIrString(xml, "fuzz");
  if (r.ok() == !r.errors.empty() || r.errors.size() > kMaxErrors + 1) __builtin_trap();
  if (r.ok()) {
    // The loader's verdict must be stable: re-validating an accepted program finds nothing.
    if (!validateProgram(*r.program).empty()) __builtin_trap();
    if (summarize(*r.program).empty()) __builtin_trap();
  } else if (formatErrors(r.errors, "fuzz").empty()) {
    __builtin_trap();
  }
  return 0;
}
