// Counters with one writer at a time (a lock or a single owning thread keeps other writers out)
// and readers on any thread. The writer adds by a load and a store: a fetch_add would be a locked
// read-modify-write, 10-20 ns each on the host's per-collective path, bought for nothing.
#pragma once

#include <atomic>

namespace occl {

// `order` is the store's: release by default, so a reader that sees the new value also sees what
// the writer wrote before it.
template <typename T>
inline void addByOneWriter(std::atomic<T>& counter, T delta, std::memory_order order = std::memory_order_release) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, order);
}

}  // namespace occl
