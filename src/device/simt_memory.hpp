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
#pragma once

#include <cstddef>

namespace occl::exec::simt {

// Zeroed, page-aligned, protected memory; nullptr when the system refuses it.
void* allocDeviceMemory(size_t bytes);
void freeDeviceMemory(void* p);
bool isDeviceMemory(const void* p);
// Whether the CPU enforces DeviceAccess scopes (a protection key could be allocated).
bool deviceMemoryProtected();

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
