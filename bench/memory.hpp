// Buffers the benchmark hands to occl. Host memory, cache-line aligned, grown on demand and kept
// across sizes so that page faults of a fresh allocation never land in a timed loop. The CUDA
// backend will need device buffers (with host staging for prepareRun/countWrong); until then the
// runner refuses --backend cuda instead of passing host pointers to a GPU daemon.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace occl::bench {

class HostBuffer {
 public:
  HostBuffer() = default;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() { std::free(data_); }

  // Makes room for `bytes`; previous contents are not kept. Throws std::bad_alloc.
  void reserve(size_t bytes) {
    if (bytes <= capacity_) return;
    const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) throw std::bad_alloc();
    std::free(data_);
    data_ = p;
    capacity_ = rounded;
  }
  void* data() { return data_ != nullptr ? data_ : &empty_; }

 private:
  static constexpr size_t kAlign = 64;
  void* data_ = nullptr;
  size_t capacity_ = 0;
  // A zero-element run still passes a distinct, valid pointer (occl rejects NULL buffers).
  alignas(64) unsigned char empty_[64] = {};
};

}  // namespace occl::bench
