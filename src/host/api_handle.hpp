// What every function of the C API (api.cpp, api_collectives.cpp) shares: the handle behind
// occlComm_t, and the one way a call reports an error, recorded as the communicator's last error
// or, without one, this thread's.
#pragma once

#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "host/comm.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

struct occlComm {
  std::unique_ptr<occl::host::Comm> impl;
};

namespace occl::host::api {

// The last error of a call without a communicator, per thread (occlGetLastError(NULL)).
inline thread_local std::string tlsLastError;

inline occlResult_t fail(occlComm_t comm, const Status& s) {
  if (s.ok()) return occlSuccess;
  if (comm != nullptr && comm->impl) return comm->impl->record(s);
  tlsLastError = s.message;
  return s.code;
}

inline occlResult_t invalid(const char* what) { return fail(nullptr, Status::error(occlInvalidArgument, what)); }

inline occlResult_t checkComm(occlComm_t comm) {
  return comm == nullptr || !comm->impl ? invalid("comm is NULL") : occlSuccess;
}

// Stopping a communicator joins its poller, so a callback (which runs there) must not do it.
inline occlResult_t refuseInCallback(occlComm_t comm, const char* what) {
  return fail(comm, Status::error(occlInvalidUsage,
                                  absl::StrFormat("%s called from a callback: it would wait for itself", what)));
}

}  // namespace occl::host::api
