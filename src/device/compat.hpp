// The one place where host and device builds differ. Everything in src/queues, src/primitives
// and src/daemon is written once against these definitions and compiles both with the host
// compiler (host backend) and with nvcc (CUDA backend, as device code).
//
// - OCCL_HD marks functions callable from both sides.
// - Atomics: acquire/release at system scope, so the CPU, the GPU and peer GPUs agree. Never
//   volatile plus fences. A daemon's read-modify-writes (fetchAdd, fetchOr, compareExchange)
//   target its own device memory only: on host-mapped or peer memory they need native atomics
//   across the bus, which PCIe lacks (defect D5). On a simt lane every one is checked
//   (device/simt_memory.hpp) and one outside emulated device memory aborts.
// - Execution hooks: a daemon block is one CPU thread on the host backend, a CUDA block on the
//   GPU, and W host threads on the simt backend (an emulated CUDA block, device/simt_block.hpp).
//   lane()/laneCount() split data-path loops among the block's threads, blockSync() is the
//   block barrier, broadcastFromLeader() makes one thread's observation uniform. Every barrier
//   takes the call site it is written at (SyncSite): the GPU ignores it, the simt block aborts
//   when its lanes wait at different sites, which on a GPU would pair up silently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>

#if defined(__CUDACC__)
#include <cuda/atomic>
#define OCCL_HD __host__ __device__
#define OCCL_NOINLINE __noinline__
#define OCCL_HD_HOOK OCCL_HD inline
#else
#include <atomic>
#define OCCL_HD
#define OCCL_NOINLINE __attribute__((noinline))
// The hooks below (atomics, lanes), a few instructions each: always inlined in host code, where
// GCC left some as calls inside the daemon's large functions (tryTask, the waits), which made
// thousands a step (perf: 4% of a burst of small AllReduces). nvcc inlines them on its own.
#define OCCL_HD_HOOK inline __attribute__((always_inline))
#endif

#if defined(__CUDA_ARCH__)
#define OCCL_ON_DEVICE 1
#else
#define OCCL_ON_DEVICE 0
#endif

#if !OCCL_ON_DEVICE
#include <atomic>

#include "util/spin.hpp"
#endif

#if !OCCL_ON_DEVICE
namespace occl::exec::simt {
class Block;
struct LaneId {
  Block* block = nullptr;
  int index = 0;
  int count = 1;
  bool countsCrossings = false;  // device/simt_crossings.hpp: counting was on when the lane started
};
// The lane a host thread is in an emulated block (device/simt_block.hpp); a thread outside any
// (the host backend's daemon threads, the host itself) is lane 0 of a block of one.
extern thread_local LaneId tLane;
// Whether an emulated block ever ran in this process: set before its first lane starts, so a
// thread that is a lane always sees it. Until then every thread is outside any block, and the
// hooks below answer without reading tLane: in a shared library each read of a thread-local is a
// call (__tls_get_addr), and the host backend's daemon made dozens a step through these hooks.
extern std::atomic<bool> gLanesStarted;
// This thread's lane, or nullptr where no emulated block ever ran (then it is in none).
inline __attribute__((always_inline)) const LaneId* currentLane() {
  return gLanesStarted.load(std::memory_order_relaxed) ? &tLane : nullptr;
}
// What a lane did that must stay in emulated device memory.
enum class DeviceOnly : uint8_t { ReadModifyWrite, DeviceScope };
// Aborts unless `p` lies in memory the simt backend allocated as device memory.
void checkAtomicTarget(const void* p, DeviceOnly access);
}  // namespace occl::exec::simt
#endif

namespace occl::atomics {
// What a lane's access to memory is, for the bus-crossing count (device/simt_crossings.hpp).
// SqPoll and WaitLook are reads counted apart: how many there are depends on how long a daemon
// idles or waits, not on the collectives it runs.
enum class BusAccess : uint8_t { Read, Write, ReadModifyWrite, SqPoll, WaitLook };
}  // namespace occl::atomics

#if !OCCL_ON_DEVICE
namespace occl::exec::simt {
// Counts the access if `p` is host-mapped memory (device/simt_crossings.hpp).
void noteAccess(const void* p, atomics::BusAccess access);
// Whether counting was ever turned on in this process: one load of a global, so that the host
// backend's atomics pay no thread-local access (a call under -fPIC) for a count they never make.
extern std::atomic<bool> gCrossingsCounted;
}  // namespace occl::exec::simt
#endif

namespace occl::atomics {

// A read-modify-write by an emulated lane must stay in (emulated) device memory.
OCCL_HD_HOOK void checkTarget([[maybe_unused]] const void* p) {
#if !OCCL_ON_DEVICE
  if (const exec::simt::LaneId* lane = exec::simt::currentLane(); lane != nullptr && lane->block != nullptr)
    exec::simt::checkAtomicTarget(p, exec::simt::DeviceOnly::ReadModifyWrite);
#endif
}

// A simt lane that counts bus crossings notes each access (device/simt_crossings.hpp); nothing
// on the GPU, and one relaxed load of a global on the host backend.
OCCL_HD_HOOK void noteAccess([[maybe_unused]] const void* p, [[maybe_unused]] BusAccess access) {
#if !OCCL_ON_DEVICE
  if (exec::simt::gCrossingsCounted.load(std::memory_order_relaxed) && exec::simt::tLane.countsCrossings)
    exec::simt::noteAccess(p, access);
#endif
}

// The threads an atomic access orders with.
//   System: every thread of the system: the CPU, other GPUs, this one. Memory the host or a peer
//           touches while the daemon runs (pinned and connector memory).
//   Device: the threads of this GPU, every kernel on it. Daemon memory that only this rank's
//           daemon touches and the host reaches only by copies (docs/design.md, Memory scopes);
//           cheaper on a GPU, which need not order it with the bus.
// Host builds have one scope. A simt lane's device-scoped access must land in emulated device
// memory (checked like a read-modify-write), which is what proves a word given device scope is
// not one the host maps.
enum class Scope : uint8_t { System, Device };

#if defined(__CUDACC__)
template <typename T, Scope S = Scope::System>
using Ref = cuda::atomic_ref<T, S == Scope::Device ? cuda::thread_scope_device : cuda::thread_scope_system>;
#define OCCL_MO(x) cuda::memory_order_##x
#else
template <typename T, Scope S = Scope::System>
using Ref = std::atomic_ref<T>;
#define OCCL_MO(x) std::memory_order_##x
#endif

// A device-scoped access by an emulated lane must stay in (emulated) device memory.
template <Scope S>
OCCL_HD_HOOK void checkScope([[maybe_unused]] const void* p) {
#if !OCCL_ON_DEVICE
  if constexpr (S == Scope::Device)
    if (const exec::simt::LaneId* lane = exec::simt::currentLane(); lane != nullptr && lane->block != nullptr)
      exec::simt::checkAtomicTarget(p, exec::simt::DeviceOnly::DeviceScope);
#endif
}

template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK T loadAcquire(T* p) {
  checkScope<S>(p);
  noteAccess(p, BusAccess::Read);
  return Ref<T, S>(*p).load(OCCL_MO(acquire));
}
// An acquire load made by a wait that is not ready (BlockExecutor::urgentArrival): counted apart.
template <typename T>
OCCL_HD_HOOK T loadAcquireInWait(T* p) {
  noteAccess(p, BusAccess::WaitLook);
  return Ref<T>(*p).load(OCCL_MO(acquire));
}
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK T loadRelaxed(T* p) {
  checkScope<S>(p);
  noteAccess(p, BusAccess::Read);
  return Ref<T, S>(*p).load(OCCL_MO(relaxed));
}
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK void storeRelease(T* p, T v) {
  checkScope<S>(p);
  noteAccess(p, BusAccess::Write);
  Ref<T, S>(*p).store(v, OCCL_MO(release));
}
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK void storeRelaxed(T* p, T v) {
  checkScope<S>(p);
  noteAccess(p, BusAccess::Write);
  Ref<T, S>(*p).store(v, OCCL_MO(relaxed));
}
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK T fetchAdd(T* p, T v) {
  checkTarget(p);
  noteAccess(p, BusAccess::ReadModifyWrite);
  return Ref<T, S>(*p).fetch_add(v, OCCL_MO(acq_rel));
}
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK T fetchOr(T* p, T v) {
  checkTarget(p);
  noteAccess(p, BusAccess::ReadModifyWrite);
  return Ref<T, S>(*p).fetch_or(v, OCCL_MO(acq_rel));
}
// Strong CAS; on failure `expected` holds the value seen.
template <Scope S = Scope::System, typename T>
OCCL_HD_HOOK bool compareExchange(T* p, T& expected, T desired) {
  checkTarget(p);
  noteAccess(p, BusAccess::ReadModifyWrite);
  return Ref<T, S>(*p).compare_exchange_strong(expected, desired, OCCL_MO(acq_rel), OCCL_MO(acquire));
}

// Release stores of the words of `v` to p[0..N) in order, each noted as storeRelease notes it,
// with one look for all of them at whether anything counts crossings (the SQ's producer writes
// an entry's eight words: 2 ns of a grouped submission's 19 on the host were the seven looks more).
template <typename T, std::size_t N>
OCCL_HD_HOOK void storeReleaseWords(T* p, const T (&v)[N]) {
#if OCCL_ON_DEVICE
  for (std::size_t i = 0; i < N; ++i) Ref<T>(p[i]).store(v[i], OCCL_MO(release));
#else
  if (exec::simt::gCrossingsCounted.load(std::memory_order_relaxed)) {
    for (std::size_t i = 0; i < N; ++i) storeRelease(p + i, v[i]);
    return;
  }
  // Unrolled, so that the words stay in registers (a loop kept them on the stack: 2 ns an SQE).
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (Ref<T>(p[I]).store(v[I], OCCL_MO(release)), ...);
  }(std::make_index_sequence<N>{});
#endif
}

// The SQ's poll (SubmissionQueue::tryPop): the eight words of one 64-byte line, read at once. On
// the GPU four 16-byte loads at system scope issued together, one round trip across the bus, then
// an acquire fence; each 64-bit word is read whole (single-copy atomic), the line as a whole is
// not, which the SQ's tags detect. On the host eight acquire loads (plain loads on x86; a fence
// would do on the host too, but ThreadSanitizer does not model fences). Counted as one SQ poll.
OCCL_HD inline void pollLine(const uint64_t* line, uint64_t (&out)[8]) {
  noteAccess(line, BusAccess::SqPoll);
#if OCCL_ON_DEVICE
  for (int i = 0; i < 8; i += 2)
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(out[i]), "=l"(out[i + 1]) : "l"(line + i) : "memory");
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
#else
  for (int i = 0; i < 8; ++i) out[i] = Ref<uint64_t>(*const_cast<uint64_t*>(line + i)).load(OCCL_MO(acquire));
#endif
}

// What a fence orders, besides this thread's earlier loads before its later loads and stores:
//   Release: earlier loads and stores before later stores (a seqlock's writer:
//            daemon/timeline.hpp).
//   SeqCst:  also earlier stores before later loads (a store-buffering handshake, e.g.
//            FifoHandle::beginPeerAccess against peerUsersGone).
enum class FenceOrder : uint8_t { Release, SeqCst };

template <FenceOrder O, Scope S = Scope::System>
OCCL_HD inline void fence() {
  constexpr auto order = O == FenceOrder::SeqCst ? OCCL_MO(seq_cst) : OCCL_MO(release);
#if defined(__CUDACC__)
  cuda::atomic_thread_fence(order, S == Scope::Device ? cuda::thread_scope_device : cuda::thread_scope_system);
#else
  std::atomic_thread_fence(order);
#endif
}

}  // namespace occl::atomics

namespace occl::exec {

// Where a barrier is written: the default arguments capture the caller's file and line.
struct SyncSite {
  const char* file;
  int line;
  OCCL_HD static constexpr SyncSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
};

#if !OCCL_ON_DEVICE
namespace simt {
void barrier(Block& block, SyncSite site);
int* broadcastSlot(Block& block);
}  // namespace simt
#endif

OCCL_HD_HOOK int lane() {
#if OCCL_ON_DEVICE
  return static_cast<int>(threadIdx.x);
#else
  const simt::LaneId* l = simt::currentLane();
  return l != nullptr ? l->index : 0;
#endif
}

OCCL_HD_HOOK int laneCount() {
#if OCCL_ON_DEVICE
  return static_cast<int>(blockDim.x);
#else
  const simt::LaneId* l = simt::currentLane();
  return l != nullptr ? l->count : 1;
#endif
}

OCCL_HD_HOOK bool isLeader() { return lane() == 0; }

OCCL_HD inline void blockSync(SyncSite site = SyncSite::here()) {
#if OCCL_ON_DEVICE
  __syncthreads();
#else
  if (const simt::LaneId* l = simt::currentLane(); l != nullptr && l->block != nullptr) simt::barrier(*l->block, site);
#endif
}

// One pause of a spin loop. The host yields its core: 8 ranks share 2 cores in CI, and a
// spinning waiter must let the peer it waits for run.
OCCL_HD inline void spinPause() {
#if OCCL_ON_DEVICE
  __nanosleep(64);
#else
  std::this_thread::yield();
#endif
}

// One round of a wait that keeps its core (SpinBudget::spinInPlaceNs, host only): the CPU's
// spin-wait hint, no system call. The GPU's rounds are all spinPause.
OCCL_HD inline void cpuPause() {
#if OCCL_ON_DEVICE
  __nanosleep(64);
#else
  cpuRelax();
#endif
}

// Evaluates `pred` on the leader lane and returns its answer on every lane, so that every
// thread of a block takes the same branch after a wait.
template <typename Pred>
OCCL_HD inline bool broadcastFromLeader(Pred&& pred, SyncSite site = SyncSite::here()) {
#if OCCL_ON_DEVICE
  __shared__ int answer;
  if (threadIdx.x == 0) answer = pred() ? 1 : 0;
  __syncthreads();
  bool result = answer != 0;
  __syncthreads();
  return result;
#else
  const simt::LaneId* lane = simt::currentLane();
  simt::Block* block = lane != nullptr ? lane->block : nullptr;
  if (block == nullptr) return pred();
  int* answer = simt::broadcastSlot(*block);
  if (lane->index == 0) *answer = pred() ? 1 : 0;
  simt::barrier(*block, site);
  bool result = *answer != 0;
  simt::barrier(*block, site);
  return result;
#endif
}

#if !OCCL_ON_DEVICE
// A steady-clock time point as nowNs() counts it (host).
inline uint64_t steadyNs(std::chrono::steady_clock::time_point t) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
#endif

// Monotonic nanoseconds, used for timeouts and statistics.
OCCL_HD inline uint64_t nowNs() {
#if OCCL_ON_DEVICE
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
#else
  return steadyNs(std::chrono::steady_clock::now());
#endif
}

}  // namespace occl::exec
