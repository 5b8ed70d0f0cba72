// The simt backend's emulated device memory: what a GPU daemon would find in its own device
// memory (the backend's allocDaemon and its launch words). Two checks make every simt run prove
// what a GPU would otherwise only show by crashing:
//
// - Only lanes and the emulated copy engine may touch it (defect D2: the host dereferenced device
//   memory). Where the CPU has protection keys (x86 PKU; Linux pkey_alloc), the pages carry a key
//   that a thread may use only inside a DeviceAccess scope: lanes open one for the whole kernel
//   body (simt_block.cpp) and the backend's copyToDaemon/copyFromDaemon for the copy. Any other
//   host access faults with SIGSEGV at the offending instruction. Without PKU the memory is plain.
// - A lane's atomic read-modify-write (atomics:: fetchAdd, fetchOr, compareExchange) must target
//   it: elsewhere is pinned host memory or a peer's on a GPU, where a device RMW needs
//   hostNativeAtomicSupported or native peer atomics, which PCIe systems lack (defect D5). One
//   outside aborts the process, naming the address (compat.hpp calls checkAtomicTarget). So must
//   every device-scoped access (atomics::Scope::Device): memory the host maps, or a peer's, is
//   not ordered with them by a device-scoped atomic.
//
// Host code only. The registry is process-wide: ranks that share a process share one emulated
// machine, as ranks on one GPU would share its memory.
//
// Processes emulate GPUs of one node (transport/ipc): device memory one process exports (a memfd,
// mapped shared) is mapped by its peers, and each range of it is registered where it is used, as
// this emulated GPU's own memory (addDeviceRange: the range lies on this process's GPU, e.g. a
// FIFO a peer allocated for this rank to receive in) or as a peer GPU's (addPeerRange): lanes may
// load and store there, as over NVLink, but an atomic read-modify-write or a device-scoped access
// aborts, as for host-mapped memory. Both kinds carry the protection key: the host reaches them
// through copies only, as it would a GPU's.
#pragma once

#include <cstddef>

namespace occl::exec::simt {

// Zeroed, page-aligned, protected memory; nullptr when the system refuses it.
void* allocDeviceMemory(size_t bytes);
void freeDeviceMemory(void* p);
bool isDeviceMemory(const void* p);
// Whether the CPU enforces DeviceAccess scopes (a protection key could be allocated).
bool deviceMemoryProtected();

// `bytes` of memory that other processes can map, zeroed and protected like device memory but
// registered as neither kind: *fd receives the memfd that shares it (the caller closes it).
// nullptr when the system refuses it.
void* createSharedDeviceMemory(size_t bytes, int* fd);
// Maps all `bytes` of another process's shared device memory behind `fd` (which stays open),
// protected like device memory and registered as neither kind; nullptr when it cannot be mapped.
void* mapSharedDeviceMemory(int fd, size_t bytes);
void unmapSharedDeviceMemory(void* p, size_t bytes);
// Registers [p, p + bytes) of shared device memory as this GPU's own, or as a peer GPU's, until
// the matching remove (by start address).
void addDeviceRange(const void* p, size_t bytes);
void removeDeviceRange(const void* p);
void addPeerRange(const void* p, size_t bytes);
void removePeerRange(const void* p);
bool isPeerMemory(const void* p);

// Lets the calling thread read and write emulated device memory until the scope ends (nests).
class DeviceAccess {
 public:
  DeviceAccess();
  ~DeviceAccess();
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;

 private:
  int saved_;
};

}  // namespace occl::exec::simt
