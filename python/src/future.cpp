#include "future.hpp"

#include <chrono>
#include <cmath>
#include <memory>
#include <string>

namespace occl::python {

void raise(occlResult_t code, occlComm_t comm) { throw OcclError{code, occlGetLastError(comm)}; }

namespace {

bool interpreterFinalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

}  // namespace

void onComplete(uint64_t collId, occlResult_t status, void* arg) {
  std::unique_ptr<Pending> p(static_cast<Pending*>(arg));
  p->completion->finish(status, status == occlSuccess ? "" : occlGetLastError(p->comm));
  if (p->future == nullptr) return;
  // At interpreter exit the GIL cannot be taken from this thread: the reference is leaked then.
  if (!Py_IsInitialized() || interpreterFinalizing()) return;
  py::gil_scoped_acquire gil;
  py::object future = py::reinterpret_steal<py::object>(p->future);
  py::object callback = future.cast<Future&>().callback;
  try {
    callback(future);
  } catch (py::error_already_set& e) {
    e.discard_as_unraisable("occl: a submission's callback");
  }
}

// A timeout in seconds (None: no bound) as Python callers give it; ValueError otherwise.
void checkTimeout(std::optional<double> timeout) {
  if (timeout && (!(*timeout >= 0) || !std::isfinite(*timeout)))
    throw py::value_error("timeout = " + std::to_string(*timeout) + ": expected seconds >= 0 or None");
}

bool Future::done() const {
  std::lock_guard<std::mutex> lock(completion_->mu);
  return completion_->done;
}

bool Future::wait(std::optional<double> timeout) const {
  checkTimeout(timeout);
  py::gil_scoped_release release;
  std::unique_lock<std::mutex> lock(completion_->mu);
  auto isDone = [this] { return completion_->done; };
  if (!timeout) {
    completion_->cv.wait(lock, isDone);
    return true;
  }
  return completion_->cv.wait_for(lock, std::chrono::duration<double>(*timeout), isDone);
}

void Future::result(std::optional<double> timeout) const {
  if (!wait(timeout)) {
    PyErr_SetString(PyExc_TimeoutError, ("collId " + std::to_string(collId_) + " did not complete within " +
                                         std::to_string(*timeout) + " s").c_str());
    throw py::error_already_set();
  }
  std::lock_guard<std::mutex> lock(completion_->mu);
  if (completion_->status != occlSuccess) throw OcclError{completion_->status, completion_->message};
}

std::optional<int> Future::status() const {
  std::lock_guard<std::mutex> lock(completion_->mu);
  if (!completion_->done || completion_->status == occlSuccess) return std::nullopt;
  return completion_->status;
}

}  // namespace occl::python
