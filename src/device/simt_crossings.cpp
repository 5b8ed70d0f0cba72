#include "device/simt_crossings.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>

#include "device/simt_ranges.hpp"

namespace occl::exec::simt {
namespace {

AddressRanges& ranges() {
  static auto* r = new AddressRanges;  // never destroyed: lanes of a leaked launch may still ask
  return *r;
}

std::atomic<bool> gCounting{false};
// Indexed by atomics::BusAccess, whose last kind is WaitLook.
std::atomic<uint64_t> gCounts[5];
static_assert(static_cast<int>(atomics::BusAccess::WaitLook) + 1 == std::size(gCounts), "a counter per kind of access");

uint64_t countOf(atomics::BusAccess a) { return gCounts[static_cast<int>(a)].load(std::memory_order_acquire); }

}  // namespace

void addHostMapped(const void* p, size_t bytes) { ranges().add(p, std::max<size_t>(bytes, 1)); }

void removeHostMapped(const void* p) {
  if (p == nullptr) return;
  if (ranges().remove(p) == 0) {
    std::fprintf(stderr, "occl simt: removeHostMapped(%p): not host-mapped memory\n", p);
    std::abort();
  }
}

bool isHostMapped(const void* p) { return ranges().contains(p); }

std::atomic<bool> gCrossingsCounted{false};

void countCrossings(bool on) {
  if (on) gCrossingsCounted.store(true, std::memory_order_release);
  gCounting.store(on, std::memory_order_release);
}
bool countingCrossings() { return gCounting.load(std::memory_order_acquire); }

Crossings crossings() {
  using atomics::BusAccess;
  return {countOf(BusAccess::Read), countOf(BusAccess::Write), countOf(BusAccess::ReadModifyWrite),
          countOf(BusAccess::SqPoll), countOf(BusAccess::WaitLook)};
}

void noteAccess(const void* p, atomics::BusAccess access) {
  if (isHostMapped(p)) gCounts[static_cast<int>(access)].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace occl::exec::simt
