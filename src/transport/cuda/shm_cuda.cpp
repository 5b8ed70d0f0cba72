// The shm transport for a CUDA rank: each connector's shm mapping (shm/connectors.hpp), page-locked
// and mapped for the daemon kernel, which reads and writes it at its host address.
#include "transport/cuda/connectors.hpp"

#include "absl/strings/str_format.h"
#include "transport/shm/connectors.hpp"
#include "transport/shm/pages.hpp"
#include "util/cuda_util.hpp"

namespace occl::transport {
namespace {

// An shm mapping, page-locked and mapped for the daemon kernel; unregistered before unmapping.
class RegisteredShm : public ConnectorMemory {
 public:
  RegisteredShm(std::shared_ptr<ConnectorMemory> mapping, int device)
      : mapping_(std::move(mapping)), device_(device) {
    base_ = mapping_->header();
  }
  ~RegisteredShm() override {
    if (!registered_) return;
    DeviceGuard guard(device_);
    cudaHostUnregister(base_);
  }

  Status registerWith(size_t bytes) {
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    if (Status s = cudaStatus(cudaHostRegister(base_, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable),
                              "cudaHostRegister(shm connector)", device_);
        !s.ok())
      return s;
    registered_ = true;
    void* onDevice = nullptr;
    if (Status s = cudaStatus(cudaHostGetDevicePointer(&onDevice, base_, 0), "cudaHostGetDevicePointer", device_);
        !s.ok())
      return s;
    if (onDevice != base_)
      return Status::error(occlUnhandledCudaError,
                           absl::StrFormat("registered shm connector %p maps to %p on CUDA device %d: the daemon "
                                           "needs host pointers usable on the device",
                                           base_, onDevice, device_));
    return Status::success();
  }

 private:
  std::shared_ptr<ConnectorMemory> mapping_;  // the shm mapping itself, unmapped after us
  int device_;
  bool registered_ = false;
};

class CudaShmFactory : public ConnectorFactory {
 public:
  CudaShmFactory(uint64_t nonce, int64_t timeoutMs, int device)
      : shm_(makeShmFactory(nonce, timeoutMs, ShmRanges::WholePages)), device_(device) {}

  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    Result<std::shared_ptr<ConnectorMemory>> mapping = shm_->attach(key, end, nSlots, slotBytes);
    if (!mapping.ok()) return mapping;
    auto registered = std::make_shared<RegisteredShm>(std::move(mapping.value()), device_);
    // The whole pages of its range (ShmRanges::WholePages): registration works on pages anyway.
    if (Status s = registered->registerWith(rangeBytes(fifoBytes(nSlots, slotBytes), /*packed=*/false)); !s.ok())
      return s.withContext(absl::StrFormat("connector %s", key.describe()));
    return std::shared_ptr<ConnectorMemory>(std::move(registered));
  }
  const char* name() const override { return "cuda-shm"; }

 private:
  std::unique_ptr<ConnectorFactory> shm_;  // the mappings, and the pairing of their ends
  int device_;
};

}  // namespace

std::unique_ptr<ConnectorFactory> makeCudaShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs, int device) {
  return std::make_unique<CudaShmFactory>(jobNonce, attachTimeoutMs, device);
}

}  // namespace occl::transport
