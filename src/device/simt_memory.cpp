#include "device/simt_memory.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "device/compat.hpp"
#include "device/simt_ranges.hpp"

namespace occl::exec::simt {
namespace {

AddressRanges& ranges() {
  static auto* r = new AddressRanges;  // never destroyed: lanes of a leaked launch may still ask
  return *r;
}

AddressRanges& peerRanges() {
  static auto* r = new AddressRanges;  // as ranges()
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
  ranges().add(p, length);
  return p;
}

void freeDeviceMemory(void* p) {
  if (p == nullptr) return;
  const size_t length = ranges().remove(p);
  if (length == 0) {
    std::fprintf(stderr, "occl simt: freeDeviceMemory(%p): not device memory\n", p);
    std::abort();
  }
  munmap(p, length);
}

bool isDeviceMemory(const void* p) { return ranges().contains(p); }

namespace {

// Maps `bytes` of `fd` shared, with device memory's protection key.
void* mapProtected(int fd, size_t bytes) {
  const size_t length = pageRounded(bytes);
  void* p = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return nullptr;
  if (deviceKey() >= 0 && pkey_mprotect(p, length, PROT_READ | PROT_WRITE, deviceKey()) != 0) {
    munmap(p, length);
    return nullptr;
  }
  return p;
}

}  // namespace

void* createSharedDeviceMemory(size_t bytes, int* fd) {
  const int made = memfd_create("occl-simt-device", MFD_CLOEXEC);
  if (made < 0) return nullptr;
  void* p = ftruncate(made, static_cast<off_t>(pageRounded(bytes))) == 0 ? mapProtected(made, bytes) : nullptr;
  if (p == nullptr) {
    close(made);
    return nullptr;
  }
  *fd = made;
  return p;
}

void* mapSharedDeviceMemory(int fd, size_t bytes) { return mapProtected(fd, bytes); }

void unmapSharedDeviceMemory(void* p, size_t bytes) {
  if (p != nullptr) munmap(p, pageRounded(bytes));
}

void addDeviceRange(const void* p, size_t bytes) { ranges().add(p, bytes); }
void removeDeviceRange(const void* p) { (void)ranges().remove(p); }
void addPeerRange(const void* p, size_t bytes) { peerRanges().add(p, bytes); }
void removePeerRange(const void* p) { (void)peerRanges().remove(p); }
bool isPeerMemory(const void* p) { return peerRanges().contains(p); }

bool deviceMemoryProtected() { return deviceKey() >= 0; }

DeviceAccess::DeviceAccess() : saved_(deviceKey() >= 0 ? pkey_get(deviceKey()) : 0) {
  if (deviceKey() >= 0) pkey_set(deviceKey(), 0);
}

DeviceAccess::~DeviceAccess() {
  if (deviceKey() >= 0) pkey_set(deviceKey(), static_cast<unsigned>(saved_));
}

void checkAtomicTarget(const void* p, DeviceOnly access) {
  if (isDeviceMemory(p)) return;
  if (access == DeviceOnly::ReadModifyWrite) {
    std::fprintf(stderr,
                 "occl simt: lane %d did an atomic read-modify-write at %p, which is not device memory: on a GPU "
                 "that is %s memory, where a device RMW needs native atomics across the bus "
                 "(defect D5); cross the bus with loads and stores only\n",
                 tLane.index, p, isPeerMemory(p) ? "a peer GPU's" : "host-mapped or peer");
  } else {
    std::fprintf(stderr,
                 "occl simt: lane %d made a device-scoped access at %p, which is not device memory: on a GPU "
                 "that is %s memory, which a device-scoped atomic does not order with the host "
                 "or the peer; give it system scope (atomics::Scope::System)\n",
                 tLane.index, p, isPeerMemory(p) ? "a peer GPU's" : "host-mapped or peer");
  }
  std::abort();
}

}  // namespace occl::exec::simt
