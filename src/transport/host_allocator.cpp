// Host allocators for connector memory (host_allocator.hpp).
#include "transport/host_allocator.hpp"

#include <sys/mman.h>

#include <map>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace occl::transport {
namespace {

// Released blocks by size, and the underlying allocator they go back to at the end.
class Recycler {
 public:
  explicit Recycler(HostAllocator underlying) : underlying_(std::move(underlying)) {}
  ~Recycler() {
    for (auto& [bytes, blocks] : free_)
      for (void* p : blocks) underlying_.release(p, bytes);
  }
  Recycler(const Recycler&) = delete;
  Recycler& operator=(const Recycler&) = delete;

  void* allocate(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    return underlying_.allocate(bytes);  // outside the lock: cudaHostAlloc may take milliseconds
  }
  void release(void* p, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[bytes].push_back(p);
  }

 private:
  HostAllocator underlying_;
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
};

}  // namespace

HostAllocator defaultHostAllocator() {
  return HostAllocator{
      [](size_t bytes) -> void* {
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? nullptr : p;
      },
      [](void* base, size_t bytes) { munmap(base, bytes); },
  };
}

HostAllocator recyclingAllocator(HostAllocator underlying) {
  auto recycler = std::make_shared<Recycler>(std::move(underlying));
  return HostAllocator{
      [recycler](size_t bytes) { return recycler->allocate(bytes); },
      [recycler](void* base, size_t bytes) { recycler->release(base, bytes); },
  };
}

}  // namespace occl::transport
