// A communicator's errors: the asynchronous error (occlCommGetAsyncError: the first failure that
// stops it, from a peer, an abort or a lost completion) with its message, and the last error
// (occlGetLastError) of any call. Any thread may set or read them:
//
// - The asynchronous code is set once, by a compare-and-swap from occlSuccess: the first failure
//   keeps its reason, and a reader of the code alone takes no lock.
// - Its message and the last error are strings, under mu_. The message is written after the code
//   is set, so a reader may find the code before its message (an empty one).
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

class CommErrors {
 public:
  occlResult_t async(std::memory_order order = std::memory_order_acquire) const { return async_.load(order); }
  // Sets the asynchronous error, and makes `why` the last error, unless one is set already.
  void setAsync(occlResult_t code, const std::string& why);
  // The asynchronous error's message ("" while none is set).
  std::string asyncWhy() const;
  // The asynchronous error as a Status, with `fallback` as its code while none is set.
  Status asyncStatus(occlResult_t fallback) const;
  // Records `s` as the last error (a success records nothing) and returns its code.
  occlResult_t record(const Status& s);
  std::string lastError() const;

 private:
  std::atomic<occlResult_t> async_{occlSuccess};
  mutable std::mutex mu_;
  std::string lastError_;
  std::string asyncWhy_;  // the message of async_, kept apart from later errors
};

}  // namespace occl::host
