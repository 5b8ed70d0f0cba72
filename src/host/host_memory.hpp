// Zeroed, cache-line aligned host memory: what the host and simt backends give the daemon.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_format.h"
#include "host/status.hpp"

namespace occl::host {

inline Result<void*> allocHostZeroed(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr)
    return Status::error(occlSystemError, absl::StrFormat("allocating %d bytes of daemon memory failed", bytes));
  std::memset(p, 0, rounded);
  return p;
}

}  // namespace occl::host
