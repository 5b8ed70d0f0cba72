// The address ranges of one kind of the simt backend's emulated memory (device memory,
// simt_memory.cpp; host-mapped memory, simt_crossings.cpp): registered at allocation, looked up
// by any lane. Process-wide and never destroyed, since lanes of a leaked launch may still ask.
// Host code only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace occl::exec::simt {

class AddressRanges {
 public:
  void add(const void* start, size_t bytes) {
    const auto s = reinterpret_cast<uintptr_t>(start);
    std::unique_lock<std::shared_mutex> lock(mu_);
    byStart_[s] = s + bytes;
  }
  // The length of the range that starts at `start`, which is no longer registered; 0 if none did.
  size_t remove(const void* start) {
    std::unique_lock<std::shared_mutex> lock(mu_);
    auto it = byStart_.find(reinterpret_cast<uintptr_t>(start));
    if (it == byStart_.end()) return 0;
    const size_t length = it->second - it->first;
    byStart_.erase(it);
    return length;
  }
  bool contains(const void* p) const {
    const auto addr = reinterpret_cast<uintptr_t>(p);
    std::shared_lock<std::shared_mutex> lock(mu_);
    auto it = byStart_.upper_bound(addr);
    if (it == byStart_.begin()) return false;
    --it;
    return addr < it->second;
  }

 private:
  mutable std::shared_mutex mu_;
  std::map<uintptr_t, uintptr_t> byStart_;  // start -> end (exclusive)
};

}  // namespace occl::exec::simt
