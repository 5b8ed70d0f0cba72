// The Work a call of the occl backend returns. occl's callback completes it on the poller thread:
// no thread per operation. Completion runs the call's epilogue (copies out of a staging buffer),
// then wakes wait() and completes the future; a failed collective makes wait() raise with occl's
// message.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>

#include <functional>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "torch_backend/compat.hpp"

namespace occl::torch_backend {

class WorkOccl : public c10d::Work {
 public:
  // `outputs` is the future's value; `keep` holds every tensor occl reads or writes (and any
  // staging buffer) until completion; `epilogue` runs on success before anyone is woken.
  WorkOccl(int rank, c10d::OpType op, std::string what, std::vector<at::Tensor> outputs,
           std::vector<at::Tensor> keep, std::function<void()> epilogue);

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  std::vector<at::Tensor> result() override { return outputs_; }

  // occlSubmit's callback: `arg` is a WorkOccl the submission holds one reference to.
  static void onComplete(uint64_t collId, occlResult_t status, void* arg);
  // Completion without occl (a call with nothing to move), or a failure before submission.
  void complete(occlResult_t status, const std::string& message);

 private:
  std::string what_;
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_;
  std::function<void()> epilogue_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;

  friend class ProcessGroupOccl;
  occlComm_t comm_ = nullptr;  // for the error message of a failed submission
};

}  // namespace occl::torch_backend
