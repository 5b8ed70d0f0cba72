#include "device/simt_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <shared_mutex>

#include "device/compat.hpp"

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

// The protection key of device memory, or -1 without PKU. Allocated with access disabled, which
// is also every other thread's default for a new key (Linux gives threads no rights to keys
// other than 0 until they set them).
int deviceKey() {
  static const int key = pkey_alloc(0, PKEY_DISABLE_ACCESS);
  return key;
}

size_t pageRounded(size_t bytes) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes == 0 ? 1 : bytes + page - 1) / page * page;
}

}  // namespace

void* allocDeviceMemory(size_t bytes) {
  const size_t length = pageRounded(bytes);
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  if (deviceKey() >= 0 && pkey_mprotect(p, length, PROT_READ | PROT_WRITE, deviceKey()) != 0) {
    munmap(p, length);
    return nullptr;
  }
  Ranges& r = ranges();
  const auto start = reinterpret_cast<uintptr_t>(p);
  std::unique_lock<std::shared_mutex> lock(r.mu);
  r.byStart[start] = start + length;
  return p;
}

void freeDeviceMemory(void* p) {
  if (p == nullptr) return;
  Ranges& r = ranges();
  std::unique_lock<std::shared_mutex> lock(r.mu);
  auto it = r.byStart.find(reinterpret_cast<uintptr_t>(p));
  if (it == r.byStart.end()) {
    std::fprintf(stderr, "occl simt: freeDeviceMemory(%p): not device memory\n", p);
    std::abort();
  }
  munmap(p, it->second - it->first);
  r.byStart.erase(it);
}

bool isDeviceMemory(const void* p) {
  Ranges& r = ranges();
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::shared_lock<std::shared_mutex> lock(r.mu);
  auto it = r.byStart.upper_bound(addr);
  if (it == r.byStart.begin()) return false;
  --it;
  return addr < it->second;
}

bool deviceMemoryProtected() { return deviceKey() >= 0; }

DeviceAccess::DeviceAccess() : saved_(deviceKey() >= 0 ? pkey_get(deviceKey()) : 0) {
  if (deviceKey() >= 0) pkey_set(deviceKey(), 0);
}

DeviceAccess::~DeviceAccess() {
  if (deviceKey() >= 0) pkey_set(deviceKey(), static_cast<unsigned>(saved_));
}

void checkAtomicTarget(const void* p) {
  if (isDeviceMemory(p)) return;
  std::fprintf(stderr,
               "occl simt: lane %d did an atomic read-modify-write at %p, which is not device memory: on a GPU "
               "that is host-mapped or peer memory, where a device RMW needs native atomics across the bus "
               "(defect D5); cross the bus with loads and stores only\n",
               tLane.index, p);
  std::abort();
}

}  // namespace occl::exec::simt
