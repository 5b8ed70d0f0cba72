#include "torch_backend/work.hpp"

#include <stdexcept>

namespace occl::torch_backend {

WorkOccl::WorkOccl(int rank, c10d::OpType op, std::string what, std::vector<at::Tensor> outputs,
                   std::vector<at::Tensor> keep, std::function<void()> epilogue)
    : c10d::Work(rank, op),
      what_(std::move(what)),
      outputs_(std::move(outputs)),
      keep_(std::move(keep)),
      epilogue_(std::move(epilogue)),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void WorkOccl::onComplete(uint64_t, occlResult_t status, void* arg) {
  c10::intrusive_ptr<WorkOccl> work = c10::intrusive_ptr<WorkOccl>::reclaim(static_cast<WorkOccl*>(arg));
  work->complete(status, status == occlSuccess ? "" : occlGetLastError(work->comm_));
}

void WorkOccl::complete(occlResult_t status, const std::string& message) {
  std::exception_ptr error;
  if (status == occlSuccess && epilogue_) {
    try {
      epilogue_();
    } catch (const std::exception& e) {
      error = std::make_exception_ptr(std::runtime_error("occl: " + what_ + ": " + e.what()));
    }
  } else if (status != occlSuccess) {
    error = std::make_exception_ptr(
        std::runtime_error("occl: " + what_ + " failed: " + occlGetErrorString(status) + ": " + message));
  }
  keep_.clear();
  epilogue_ = nullptr;
  finish(error);
  if (error)
    future_->setError(error);
  else
    future_->markCompleted(c10::IValue(outputs_));
}

}  // namespace occl::torch_backend
