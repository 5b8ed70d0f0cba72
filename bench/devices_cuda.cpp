// devices.hpp in CUDA builds. Device memory comes from the device's stream-ordered pool where it
// has one: cudaFree waits for every kernel on the device, and occl's daemon kernels (other ranks'
// too, on a shared GPU) may be running whenever a buffer grows between sizes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <stdexcept>

#include "devices.hpp"
#include "util/cuda_util.hpp"

namespace occl::bench {
namespace {

void check(const occl::Status& s) {
  if (!s.ok()) throw std::runtime_error(s.message);
}

void check(cudaError_t e, const char* api, int device) { check(occl::cudaStatus(e, api, device)); }

class DeviceBuffer final : public RunBuffer {
 public:
  explicit DeviceBuffer(int device) : device_(device) {}
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() override {
    if (stream_ == nullptr) return;
    occl::DeviceGuard guard(device_);
    release();
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }

  void reserve(size_t bytes) override {
    if (bytes <= capacity_ && data_ != nullptr) return;
    occl::DeviceGuard guard(device_);
    check(guard.status());
    if (stream_ == nullptr) start();
    release();
    const size_t rounded = (std::max<size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
    void* p = nullptr;
    if (pooled_) {
      check(cudaMallocAsync(&p, rounded, stream_), "cudaMallocAsync", device_);
      data_ = static_cast<std::byte*>(p);
      // Allocation is ordered on our stream: complete it before occl's streams use the memory.
      check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    } else {
      check(cudaMalloc(&p, rounded), "cudaMalloc", device_);
      data_ = static_cast<std::byte*>(p);
    }
    capacity_ = rounded;
    staging_.reserve(rounded);
  }
  std::byte* data() override { return data_; }
  std::byte* host() override { return staging_.data(); }
  void upload(size_t offset, size_t bytes) override { copy(data_ + offset, staging_.data() + offset, bytes); }
  void download(size_t offset, size_t bytes) override { copy(staging_.data() + offset, data_ + offset, bytes); }

 private:
  static constexpr size_t kAlign = 256;  // cudaMalloc's own alignment, kept for pool memory

  void start() {
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device_);
    int pools = 0;
    check(cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, device_), "cudaDeviceGetAttribute",
          device_);
    pooled_ = pools != 0;
  }
  void release() {
    if (data_ == nullptr) return;
    if (pooled_) cudaFreeAsync(data_, stream_);
    else cudaFree(data_);
    data_ = nullptr;
    capacity_ = 0;
  }
  // On our own non-blocking stream: the legacy default stream would also wait for other work.
  void copy(void* dst, const void* src, size_t bytes) {
    if (bytes == 0) return;
    occl::DeviceGuard guard(device_);
    check(guard.status());
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream_), "cudaMemcpyAsync", device_);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  bool pooled_ = false;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  HostBuffer staging_;
};

class DeviceStream final : public RunStream {
 public:
  explicit DeviceStream(int device) : device_(device) {
    occl::DeviceGuard guard(device_);
    check(guard.status());
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device_);
  }
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;
  ~DeviceStream() override {
    occl::DeviceGuard guard(device_);
    cudaStreamSynchronize(stream_);
    cudaStreamDestroy(stream_);
  }
  void* handle() override { return stream_; }
  void synchronize() override {
    occl::DeviceGuard guard(device_);
    check(guard.status());
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
  }

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<RunStream> makeRunStream(int device) { return std::make_unique<DeviceStream>(device); }

DeviceCount cudaDevices() {
  occl::Result<int> n = occl::cudaDeviceCount();
  if (!n.ok()) return {0, n.status().message};
  return {n.value(), ""};
}

bool buildHasCuda() { return true; }

std::unique_ptr<RunBuffer> makeDeviceBuffer(int device) { return std::make_unique<DeviceBuffer>(device); }

}  // namespace occl::bench
