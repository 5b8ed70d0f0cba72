// occl.Future: one submission as Python sees it, done when its callback has fired on occl's
// poller thread (Completion, which holds no Python object), and occl.OcclError.
#pragma once

#include <pybind11/pybind11.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "buffers.hpp"
#include "occl/occl.h"

namespace occl::python {

namespace py = pybind11;

// occl's failures as Python sees them: occl.OcclError(message) with .code (an occlResult_t).
struct OcclError {
  occlResult_t code;
  std::string message;
};
[[noreturn]] void raise(occlResult_t code, occlComm_t comm);

// What the poller thread writes and Python threads read: no Python object in here.
struct Completion {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  occlResult_t status = occlSuccess;
  std::string message;

  // The poller's side: records the outcome and wakes the waiters.
  void finish(occlResult_t s, std::string why) {
    {
      std::lock_guard<std::mutex> lock(mu);
      status = s;
      message = std::move(why);
      done = true;
    }
    cv.notify_all();
  }
};

// One submission. Holds the buffers (and the callback) until the Future is collected.
class Future {
 public:
  Future(uint64_t collId, std::shared_ptr<Completion> completion)
      : collId_(collId), completion_(std::move(completion)) {}
  uint64_t collId() const { return collId_; }
  bool done() const;
  // True once complete; false if `timeout` (seconds, None: no bound) passed first.
  bool wait(std::optional<double> timeout) const;
  // None on success; raises occl.OcclError on a failed collective, TimeoutError on timeout.
  void result(std::optional<double> timeout) const;
  // None while pending or on success, the status code otherwise.
  std::optional<int> status() const;

  View send, recv;  // kept alive until the callback has fired
  py::object callback;
  std::optional<occlGate_t> gate;  // a gated submission's gate (Comm::openGate)

 private:
  uint64_t collId_;
  std::shared_ptr<Completion> completion_;
};

// The completion side of a submission (the poller thread, or a thread in occlCommWaitAll, which
// waits without the GIL). `future` is an owned reference, set only when the submission has a
// Python callback (the one case where completing needs the GIL).
struct Pending {
  std::shared_ptr<Completion> completion;
  PyObject* future = nullptr;
  occlComm_t comm = nullptr;
};
// occlCallback_t of every submission; `arg` is its Pending, which it frees.
void onComplete(uint64_t collId, occlResult_t status, void* arg);

// A timeout in seconds (None: no bound) as Python callers give it; ValueError otherwise.
void checkTimeout(std::optional<double> timeout);

}  // namespace occl::python
