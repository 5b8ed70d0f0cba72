#include "device/simt_crossings.hpp"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>

namespace occl::exec::simt {
namespace {

struct Ranges {
  std::shared_mutex mu;
  std::map<uintptr_t, uintptr_t> byStart;  // start -> end (exclusive)
};

Ranges& ranges() {
  static Ranges* r = new Ranges;  // never destroyed: lanes of a leaked launch may still ask
  return *r;
}

std::atomic<bool> gCounting{false};
std::atomic<uint64_t> gReads{0}, gWrites{0}, gRmws{0}, gSqPolls{0};

}  // namespace

void* allocHostMapped(size_t bytes) {
  void* p = std::calloc(1, bytes == 0 ? 1 : bytes);
  if (p == nullptr) return nullptr;
  Ranges& r = ranges();
  const auto start = reinterpret_cast<uintptr_t>(p);
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.byStart[start] = start + (bytes == 0 ? 1 : bytes);
  return p;
}

void freeHostMapped(void* p) {
  if (p == nullptr) return;
  Ranges& r = ranges();
  {
    std::unique_lock<std::shared_mutex> lock(r.mu);
    auto it = r.byStart.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.byStart.end()) {
      std::fprintf(stderr, "occl simt: freeHostMapped(%p): not host-mapped memory\n", p);
      std::abort();
    }
    r.byStart.erase(it);
  }
  std::free(p);
}

bool isHostMapped(const void* p) {
  Ranges& r = ranges();
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(r.mu);
  auto it = r.byStart.upper_bound(addr);
  if (it == r.byStart.begin()) return false;
  --it;
  return addr < it->second;
}

std::atomic<bool> gCrossingsCounted{false};

void countCrossings(bool on) {
  if (on) gCrossingsCounted.store(true, std::memory_order_release);
  gCounting.store(on, std::memory_order_release);
}
bool countingCrossings() { return gCounting.load(std::memory_order_acquire); }

Crossings crossings() {
  Crossings c;
  c.reads = gReads.load(std::memory_order_acquire);
  c.writes = gWrites.load(std::memory_order_acquire);
  c.rmws = gRmws.load(std::memory_order_acquire);
  c.sqPolls = gSqPolls.load(std::memory_order_acquire);
  return c;
}

void noteAccess(const void* p, atomics::BusAccess access) {
  if (!isHostMapped(p)) return;
  switch (access) {
    case atomics::BusAccess::Read:
      gReads.fetch_add(1, std::memory_order_relaxed);
      break;
    case atomics::BusAccess::Write:
      gWrites.fetch_add(1, std::memory_order_relaxed);
      break;
    case atomics::BusAccess::ReadModifyWrite:
      gRmws.fetch_add(1, std::memory_order_relaxed);
      break;
    case atomics::BusAccess::SqPoll:
      gSqPolls.fetch_add(1, std::memory_order_relaxed);
      break;
  }
}

}  // namespace occl::exec::simt
