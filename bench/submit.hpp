// One timed unit of work: submit the registrations of a row (one, or SendRecv's two) and block
// until all their callbacks have fired. The wait is bounded, so a lost completion becomes an
// error message instead of a hung benchmark.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "occl/occl.h"

namespace occl::bench {

struct Submission {
  uint64_t collId;
  const void* send;
  void* recv;
};

class Completion {
 public:
  void arm(int expected);
  // occlCallback_t; `arg` is the Completion.
  static void callback(uint64_t collId, occlResult_t status, void* arg);
  // Counts a submission that never reached occl as fired, so wait() does not wait for it.
  void cancel(int n);
  // False if the callbacks did not all fire within `bound`.
  bool wait(std::chrono::milliseconds bound);
  occlResult_t firstError() const { return firstError_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
  occlResult_t firstError_ = occlSuccess;
};

// Outcome of one run; `lost` means a callback may still fire later, so the buffers it names must
// not be freed or reused (the caller aborts the communicator).
struct RunStatus {
  std::string error;  // empty on success
  bool lost = false;
  bool ok() const { return error.empty(); }
};

RunStatus submitAndWait(occlComm_t comm, std::span<const Submission> parts, Completion& done,
                        std::chrono::milliseconds bound);

}  // namespace occl::bench
