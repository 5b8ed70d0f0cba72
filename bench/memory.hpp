// Buffers the benchmark hands to occl, grown on demand and kept across sizes so that the cost of
// a fresh allocation (page faults, cudaMalloc) never lands in a timed loop. A rank's buffers
// live where its daemon reads them: host memory for host ranks, the memory of the rank's CUDA
// device for device ranks. Inputs are written and results checked on the host, through host():
// the buffer itself for host memory, a staging copy at the same offsets for device memory, which
// upload() and download() move across.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>

#include "occl/occl.h"

namespace occl::bench {

class RunBuffer {
 public:
  virtual ~RunBuffer() = default;
  // Makes room for `bytes` (previous contents are not kept). Throws std::bad_alloc, or
  // std::runtime_error naming the failed CUDA call.
  virtual void reserve(size_t bytes) = 0;
  // What occl gets, valid once reserve() has returned: never null and distinct per buffer, even
  // after reserve(0) (occl rejects NULL buffers).
  virtual std::byte* data() = 0;
  // The host view of data(): same size, same offsets.
  virtual std::byte* host() = 0;
  // host() -> data() and data() -> host() for [offset, offset + bytes); nothing to do when they
  // are the same memory. Throw std::runtime_error on a failed copy.
  virtual void upload(size_t offset, size_t bytes) = 0;
  virtual void download(size_t offset, size_t bytes) = 0;
};

// Host memory, cache-line aligned.
class HostBuffer final : public RunBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() override { std::free(data_); }

  void reserve(size_t bytes) override {
    if (bytes <= capacity_) return;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) throw std::bad_alloc();
    std::free(data_);
    data_ = static_cast<std::byte*>(p);
    capacity_ = rounded;
  }
  std::byte* data() override { return data_ != nullptr ? data_ : empty_; }
  std::byte* host() override { return data(); }
  void upload(size_t, size_t) override {}
  void download(size_t, size_t) override {}

 private:
  static constexpr size_t kAlign = 64;
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
  alignas(kAlign) std::byte empty_[kAlign] = {};
};

// Host memory from occlMemAlloc, which ranks in other processes can map (--shared-buffers:
// collectives registered with desc.sharedBuffers run the peer AllReduce between processes too).
class SharedHostBuffer final : public RunBuffer {
 public:
  SharedHostBuffer() = default;
  SharedHostBuffer(const SharedHostBuffer&) = delete;
  SharedHostBuffer& operator=(const SharedHostBuffer&) = delete;
  ~SharedHostBuffer() override { occlMemFree(data_); }

  void reserve(size_t bytes) override {
    if (bytes <= capacity_ && data_ != nullptr) return;
    void* p = nullptr;
    // Never empty: occl rejects NULL buffers, and an empty one must lie in occlMemAlloc memory too.
    if (occlMemAlloc(&p, bytes == 0 ? 1 : bytes) != occlSuccess)
      throw std::runtime_error(std::string("occlMemAlloc: ") + occlGetLastError(nullptr));
    occlMemFree(data_);
    data_ = static_cast<std::byte*>(p);
    capacity_ = bytes;
  }
  std::byte* data() override {
    if (data_ == nullptr) reserve(0);
    return data_;
  }
  std::byte* host() override { return data(); }
  void upload(size_t, size_t) override {}
  void download(size_t, size_t) override {}

 private:
  std::byte* data_ = nullptr;
  size_t capacity_ = 0;
};

// Host memory when `device` < 0, else memory of that CUDA device (devices.hpp). Allocates
// nothing until the first reserve().
std::unique_ptr<RunBuffer> makeBuffer(int device);
// SharedHostBuffer; `device` must be < 0.
std::unique_ptr<RunBuffer> makeSharedBuffer(int device);

// What the runner allocates its buffers with: makeBuffer, or a test's stand-in.
using BufferMaker = std::unique_ptr<RunBuffer> (*)(int device);

}  // namespace occl::bench
