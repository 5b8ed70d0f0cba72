// Zeroed, cache-line aligned host memory: what the host and simt backends give the daemon.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "backend/backend.hpp"
#include "util/status.hpp"

namespace occl::backend {

inline Result<void*> allocHostZeroed(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr)
    return Status::error(occlSystemError, absl::StrFormat("allocating %d bytes of daemon memory failed", bytes));
  std::memset(p, 0, rounded);
  return p;
}

// Backend memory for daemons that run on host threads (host and simt backends): shared and
// daemon memory are both zeroed host memory, and a copy is a memcpy. `Base` is Backend or a
// backend class derived from it, whose constructors this inherits.
template <typename Base>
class OnHostMemory : public Base {
 public:
  using Base::Base;

  Result<void*> allocShared(size_t bytes) override { return allocHostZeroed(bytes); }
  Result<void*> allocDaemon(size_t bytes) override { return allocHostZeroed(bytes); }
  // An empty copy may come with null pointers (an empty table), which memcpy must not be given.
  Status copyToDaemon(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyFromDaemon(void* dst, const void* src, size_t bytes) override {
    if (bytes != 0) std::memcpy(dst, src, bytes);
    return Status::success();
  }
  void freeShared(void* p) override { std::free(p); }
  void freeDaemon(void* p) override { std::free(p); }
};

}  // namespace occl::backend
