// The CUDA backend: the daemon is a persistent kernel (daemon_kernel.cu) on a stream of its own,
// launched and relaunched by the launch control it shares with the simt backend (kernel_backend.hpp).
//
// Memory. Shared memory (the environment, SQ, CQ rings and heads, block reports, the SQE count,
// the host's abort flag) is pinned, host-mapped memory; with unified addressing the host pointer
// is the device pointer. Daemon memory (block states, task queues, the collective table,
// programs, contexts, statistics, the abort flag's copy, the relay, the timeline, scratch) is
// device memory from the stream-ordered allocator. Neither path calls cudaFree or cudaFreeHost
// while the communicator runs: both synchronise the whole device, i.e. wait for every daemon
// kernel on it — including the peers' this rank may be blocking. Freed shared blocks are kept for
// reuse and released at destruction; device memory goes back with cudaFreeAsync.
//
// Streams (defect D4). Each rank's daemon has a stream of its own: a persistent kernel occupies
// it. Everything else (allocations, zeroing, copies) goes on one auxiliary stream per device,
// shared by the process's ranks on that device, never queued behind a daemon. Nothing is
// recorded behind a daemon launch: an event behind a persistent kernel delays other streams'
// work on some drivers; the launch's health is read with cudaStreamQuery. Every stream takes a
// hardware queue (CUDA_DEVICE_MAX_CONNECTIONS, 8 by default), and streams beyond that alias:
// an auxiliary copy would then wait behind a daemon kernel. cuda_util.hpp raises the count
// before the first CUDA call of the process unless the application has set it.
#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "absl/strings/str_format.h"
#include "backend/kernel_backend.hpp"
#include "backend/residency.hpp"
#include "daemon/daemon_kernel.hpp"
#include "util/cuda_util.hpp"

namespace occl::backend {
namespace {

// One auxiliary stream per device, shared by every rank of this process on it.
class AuxStreams {
 public:
  static Result<cudaStream_t> acquire(int device) {
    std::lock_guard<std::mutex> lock(mu());
    Entry& e = streams()[device];
    if (e.users == 0) {
      DeviceGuard guard(device);
      if (Status s = guard.status(); !s.ok()) return s;
      if (Status s = cudaStatus(cudaStreamCreateWithFlags(&e.stream, cudaStreamNonBlocking),
                                "cudaStreamCreateWithFlags", device);
          !s.ok())
        return s;
    }
    e.users += 1;
    return e.stream;
  }
  static void release(int device) {
    std::lock_guard<std::mutex> lock(mu());
    Entry& e = streams()[device];
    if (--e.users > 0) return;
    DeviceGuard guard(device);
    cudaStreamDestroy(e.stream);
    streams().erase(device);
  }

 private:
  struct Entry {
    cudaStream_t stream = nullptr;
    int users = 0;
  };
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::map<int, Entry>& streams() {
    static std::map<int, Entry> m;
    return m;
  }
};

class CudaBackend final : public KernelBackend {
  // A completion is seen within a 16th of its collective's time, at least 10 us after its CQE: a
  // wake-up costs a few microseconds of a host core that the GPU does not need.
  static constexpr PollSteps kPollSteps{10, 500, 16};

 public:
  CudaBackend(const occlConfig_t& config, int device)
      : KernelBackend(config, absl::StrFormat("CUDA device %d", device), kPollSteps), device_(device),
        threads_(config.threadsPerBlock),
        autoBlocks_(config.daemonBlocks == 0) {}
  ~CudaBackend() override;

  Status init();

  Result<void*> allocShared(size_t bytes) override;
  Result<void*> allocDaemon(size_t bytes) override;
  Status copyToDaemon(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes, "copyToDaemon"); }
  Status copyFromDaemon(void* dst, const void* src, size_t bytes) override {
    return copy(dst, src, bytes, "copyFromDaemon");
  }
  // Device memory: a copy beside the running kernel (the aux stream), each word whole.
  Status readDaemonWords(uint64_t* dst, const uint64_t* src, size_t n) override {
    return copy(dst, src, n * sizeof(uint64_t), "readDaemonWords");
  }
  Status writeDaemonWord(uint32_t* dst, uint32_t value) override {
    return copy(dst, &value, sizeof(value), "writeDaemonWord");
  }
  void freeShared(void* p) override;
  void freeDaemon(void* p) override;
  Status checkUserBuffer(const void* p, const char* name) const override;
  bool checksUserBuffers() const override { return true; }
  const char* name() const override { return "cuda"; }
  Status checkStream(void* stream) override;
  Status enqueueGate(void* stream, uint32_t* open, const uint32_t* done, uint32_t value) override;

 protected:
  Status launchKernel(const DaemonEnv& env, const DaemonLaunch& launch) override;
  Status kernelHealth() override;
  Status waitKernels() override;

 private:
  Status cuda(cudaError_t e, const char* api) const { return cudaStatus(e, api, device_); }
  Status checkDevice();
  Result<void*> hostAlloc(size_t bytes);
  Status copy(void* dst, const void* src, size_t bytes, const char* what);

  const int device_;
  const int threads_;
  const bool autoBlocks_;  // config.daemonBlocks = 0: checkDevice chooses (autoDaemonBlocks)

  cudaStream_t stream_ = nullptr;     // the daemon's launches, nothing else
  cudaStream_t auxStream_ = nullptr;  // AuxStreams' stream of this device
  bool pooled_ = false;               // stream-ordered allocation is available
  bool pageableAccess_ = false;       // the device reads plain host memory (HMM or ATS)
  uint64_t* quitWord_ = nullptr;      // device memory, the blocks' vote (quit_vote.hpp)
  uint32_t* endedEpoch_ = nullptr;    // mapped memory: the last launch that ended
  ResidencyReservation residency_;

  // Shared memory: blocks up to kCarveMaxBytes are carved from pinned slabs of kSlabBytes (a
  // collective's gate words and v-tables: a registration pins no page of its own), larger ones
  // are pinned one by one; a freed block waits in sharedSpare_ for a request of its size.
  static constexpr size_t kSlabBytes = size_t{64} << 10;
  static constexpr size_t kCarveMaxBytes = 4096;
  std::mutex sharedMu_;
  std::unordered_map<void*, size_t> sharedSizes_;  // every block, live or kept for reuse
  std::multimap<size_t, void*> sharedSpare_;       // freed blocks by size
  std::vector<void*> pinned_;                      // every cudaHostAlloc: slabs and large blocks
  std::byte* slabNext_ = nullptr;                  // the current slab's unused part
  size_t slabLeft_ = 0;
};

CudaBackend::~CudaBackend() {
  (void)stop();
  if (kernelMayStillRun()) {
    std::fprintf(stderr, "occl: the daemon kernel on CUDA device %d never exited; leaking its memory\n", device_);
    return;
  }
  DeviceGuard guard(device_);
  // Destruction is the one place where cudaFreeHost's device-wide synchronisation is acceptable.
  for (void* p : pinned_) cudaFreeHost(p);
  if (endedEpoch_ != nullptr) cudaFreeHost(endedEpoch_);
  freeDaemon(quitWord_);
  if (auxStream_ != nullptr) {
    cudaStreamSynchronize(auxStream_);  // the frees above are queued on it
    AuxStreams::release(device_);
  }
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

Status CudaBackend::checkDevice() {
  Result<int> count = cudaDeviceCount();
  if (!count.ok()) return count.status();
  if (device_ < 0 || device_ >= count.value())
    return Status::error(occlInvalidArgument, absl::StrFormat("CUDA device %d does not exist: this process sees %d "
                                                              "device(s) (check CUDA_VISIBLE_DEVICES)",
                                                              device_, count.value()));
  auto attribute = [&](cudaDeviceAttr a, const char* name, int& value) {
    return cuda(cudaDeviceGetAttribute(&value, a, device_), name);
  };
  int uva = 0, mapHost = 0, pools = 0, sms = 0, pageable = 0;
  for (Status s : {attribute(cudaDevAttrUnifiedAddressing, "cudaDeviceGetAttribute(UnifiedAddressing)", uva),
                   attribute(cudaDevAttrCanMapHostMemory, "cudaDeviceGetAttribute(CanMapHostMemory)", mapHost),
                   attribute(cudaDevAttrMemoryPoolsSupported, "cudaDeviceGetAttribute(MemoryPoolsSupported)", pools),
                   attribute(cudaDevAttrMultiProcessorCount, "cudaDeviceGetAttribute(MultiProcessorCount)", sms),
                   attribute(cudaDevAttrPageableMemoryAccess, "cudaDeviceGetAttribute(PageableMemoryAccess)", pageable)})
    if (!s.ok()) return s;
  pageableAccess_ = pageable != 0;
  if (!uva || !mapHost)
    return Status::error(occlUnhandledCudaError,
                         absl::StrFormat("CUDA device %d lacks unified addressing or mapped host memory, which the "
                                         "daemon's queues need",
                                         device_));
  pooled_ = pools != 0;

  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  int blocksPerSm = 0, maxThreads = 0;
  if (Status s = cuda(daemonKernelLimits(threads_, &blocksPerSm, &maxThreads), "cudaFuncGetAttributes(daemon)"); !s.ok())
    return s;
  if (threads_ > maxThreads)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("config.threadsPerBlock = %d: the daemon kernel runs at most %d threads per "
                                         "block on CUDA device %d",
                                         threads_, maxThreads, device_));
  // Every block must be resident at once, counted over every rank of this process on the device.
  Result<ResidencyReservation> r = reserveResidency(where_, autoBlocks_ ? 0 : nBlocks_, blocksPerSm * sms,
                                                    absl::StrFormat("daemon blocks of %d threads", threads_));
  if (!r.ok()) return r.status();
  residency_ = std::move(r.value());
  nBlocks_ = residency_.blocks();
  return Status::success();
}

Status CudaBackend::init() {
  if (Status s = checkDevice(); !s.ok()) return s;
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  if (Status s = cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); !s.ok())
    return s;
  Result<cudaStream_t> aux = AuxStreams::acquire(device_);
  if (!aux.ok()) return aux.status();
  auxStream_ = aux.value();
  Result<void*> word = allocDaemon(sizeof(uint64_t));
  if (!word.ok()) return word.status();
  quitWord_ = static_cast<uint64_t*>(word.value());
  Result<void*> ended = hostAlloc(sizeof(uint32_t));
  if (!ended.ok()) return ended.status();
  endedEpoch_ = static_cast<uint32_t*>(ended.value());
  setLaunchWords(quitWord_, endedEpoch_);
  return Status::success();
}

// Zeroed pinned memory the device reaches at the same address (unified addressing).
Result<void*> CudaBackend::hostAlloc(size_t bytes) {
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  void* p = nullptr;
  if (Status s = cuda(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                      absl::StrFormat("cudaHostAlloc(%d bytes)", bytes).c_str());
      !s.ok())
    return s;
  void* onDevice = nullptr;
  Status s = cuda(cudaHostGetDevicePointer(&onDevice, p, 0), "cudaHostGetDevicePointer");
  if (s.ok() && onDevice != p)
    s = Status::error(occlUnhandledCudaError,
                      absl::StrFormat("pinned memory %p maps to %p on CUDA device %d: the daemon needs unified "
                                      "addressing",
                                      p, onDevice, device_));
  if (!s.ok()) {
    cudaFreeHost(p);
    return s;
  }
  std::memset(p, 0, bytes);
  return p;
}

Result<void*> CudaBackend::allocShared(size_t bytes) {
  const size_t rounded = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  std::lock_guard<std::mutex> lock(sharedMu_);
  if (auto it = sharedSpare_.find(rounded); it != sharedSpare_.end()) {
    void* p = it->second;
    sharedSpare_.erase(it);
    std::memset(p, 0, rounded);
    return p;
  }
  void* p = nullptr;
  if (rounded <= kCarveMaxBytes) {
    if (slabLeft_ < rounded) {
      Result<void*> slab = hostAlloc(kSlabBytes);  // zeroed: so is every block carved from it
      if (!slab.ok()) return slab;
      pinned_.push_back(slab.value());
      slabNext_ = static_cast<std::byte*>(slab.value());
      slabLeft_ = kSlabBytes;
    }
    p = slabNext_;
    slabNext_ += rounded;
    slabLeft_ -= rounded;
  } else {
    Result<void*> block = hostAlloc(rounded);
    if (!block.ok()) return block;
    p = block.value();
    pinned_.push_back(p);
  }
  sharedSizes_.emplace(p, rounded);
  return p;
}

void CudaBackend::freeShared(void* p) {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(sharedMu_);
  if (auto it = sharedSizes_.find(p); it != sharedSizes_.end()) sharedSpare_.emplace(it->second, p);
}

Result<void*> CudaBackend::allocDaemon(size_t bytes) {
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  bytes = std::max<size_t>(bytes, 1);
  void* p = nullptr;
  // cudaMalloc is the fallback where pools are missing; it may wait for running daemon kernels.
  Status s = pooled_ ? cuda(cudaMallocAsync(&p, bytes, auxStream_), "cudaMallocAsync")
                     : cuda(cudaMalloc(&p, bytes), "cudaMalloc");
  if (!s.ok()) return s.withContext(absl::StrFormat("allocating %d bytes of daemon memory", bytes));
  s = cuda(cudaMemsetAsync(p, 0, bytes, auxStream_), "cudaMemsetAsync");
  if (s.ok()) s = cuda(cudaStreamSynchronize(auxStream_), "cudaStreamSynchronize");
  if (!s.ok()) {
    freeDaemon(p);
    return s;
  }
  return p;
}

void CudaBackend::freeDaemon(void* p) {
  if (p == nullptr) return;
  {
    // The daemon no longer touches a collective's memory once its last CQE is out, so freeing
    // while it runs is safe; but a kernel that would not stop may still read anything.
    if (kernelMayStillRun()) return;
  }
  DeviceGuard guard(device_);
  if (pooled_) {
    cudaFreeAsync(p, auxStream_);
  } else {
    cudaFree(p);
  }
}

// The driver's 32-bit stream memory operations (cuda.h, CUDA_MEMOP), which every device supports
// since CUDA 12 (the attribute that once told, CAN_USE_STREAM_MEM_OPS, went with the v1 API), so
// a stream-ordered submission needs no host function. Reached through the runtime's entry-point
// query: liboccl links no libcuda, which a machine without a driver lacks.
struct StreamMemOps {
  PFN_cuStreamWriteValue32_v11070 write = nullptr;
  PFN_cuStreamWaitValue32_v11070 wait = nullptr;
  std::string missing;  // why they are not there, "" when they are
};

const StreamMemOps& streamMemOps() {
  static const StreamMemOps ops = [] {
    StreamMemOps o;
    auto find = [&o](const char* symbol, void** fn) {
      cudaDriverEntryPointQueryResult found{};
      cudaError_t e = cudaGetDriverEntryPointByVersion(symbol, fn, 12000, cudaEnableDefault, &found);
      if (e != cudaSuccess || found != cudaDriverEntryPointSuccess || *fn == nullptr) {
        cudaGetLastError();  // ours, not the application's
        if (o.missing.empty())
          o.missing = absl::StrFormat("the CUDA driver has no %s (%s)", symbol, cudaGetErrorString(e));
      }
    };
    find("cuStreamWriteValue32", reinterpret_cast<void**>(&o.write));
    find("cuStreamWaitValue32", reinterpret_cast<void**>(&o.wait));
    return o;
  }();
  return ops;
}

Status CudaBackend::checkStream(void* stream) {
  if (const StreamMemOps& ops = streamMemOps(); !ops.missing.empty())
    return Status::error(occlUnhandledCudaError, absl::StrFormat("occlSubmitOnStream: %s", ops.missing));
  int device = -1;
  if (cudaError_t e = cudaStreamGetDevice(static_cast<cudaStream_t>(stream), &device); e != cudaSuccess) {
    cudaGetLastError();  // ours, not the application's
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("stream %p: CUDA does not know this stream (%s)", stream, cudaGetErrorString(e)));
  }
  if (device != device_)
    return Status::error(occlInvalidArgument, absl::StrFormat("stream %p belongs to CUDA device %d; this rank's daemon "
                                                              "runs on device %d",
                                                              stream, device, device_));
  return Status::success();
}

Status CudaBackend::enqueueGate(void* stream, uint32_t* open, const uint32_t* done, uint32_t value) {
  const StreamMemOps& ops = streamMemOps();
  if (!ops.missing.empty()) return checkStream(stream);
  auto driver = [&](CUresult r, const char* api) {
    if (r == CUDA_SUCCESS) return Status::success();
    return Status::error(occlUnhandledCudaError, absl::StrFormat("%s on stream %p failed: CUresult %d (cuda.h's CUresult)",
                                                                 api, stream, static_cast<int>(r)));
  };
  auto* s = static_cast<CUstream>(stream);
  // The default flags put a memory barrier before the write: the input the stream's earlier work
  // wrote is visible to the daemon once it sees the gate open.
  if (Status st = driver(ops.write(s, reinterpret_cast<CUdeviceptr>(open), value, CU_STREAM_WRITE_VALUE_DEFAULT),
                         "cuStreamWriteValue32");
      !st.ok())
    return st;
  return driver(ops.wait(s, reinterpret_cast<CUdeviceptr>(done), value, CU_STREAM_WAIT_VALUE_GEQ),
                "cuStreamWaitValue32");
}

Status CudaBackend::checkUserBuffer(const void* p, const char* name) const {
  if (p == nullptr) return Status::success();
  cudaPointerAttributes a{};
  if (cudaError_t e = cudaPointerGetAttributes(&a, p); e != cudaSuccess) {
    cudaGetLastError();  // ours, not the application's
    return Status::error(occlInvalidArgument, absl::StrFormat("%s %p: CUDA does not know this pointer (%s)", name, p,
                                                              cudaGetErrorString(e)));
  }
  switch (a.type) {
    case cudaMemoryTypeManaged: return Status::success();
    case cudaMemoryTypeDevice:
      if (a.device == device_) return Status::success();
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s %p is memory of CUDA device %d; this rank's daemon runs on device %d",
                                           name, p, a.device, device_));
    case cudaMemoryTypeHost:
      if (a.devicePointer == p) return Status::success();
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s %p is pinned host memory that is not mapped at the same address on "
                                           "the device: allocate it with cudaHostAllocMapped or register it with "
                                           "cudaHostRegisterMapped",
                                           name, p));
    default:
      if (pageableAccess_) return Status::success();
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("%s %p is host memory that CUDA device %d cannot access: pass device memory "
                                           "(cudaMalloc), mapped pinned memory (cudaHostAlloc with "
                                           "cudaHostAllocMapped) or managed memory",
                                           name, p, device_));
  }
}

Status CudaBackend::copy(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return Status::success();
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  Status s = cuda(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, auxStream_), "cudaMemcpyAsync");
  if (s.ok()) s = cuda(cudaStreamSynchronize(auxStream_), "cudaStreamSynchronize");
  return s.withContext(what);
}

Status CudaBackend::launchKernel(const DaemonEnv& env, const DaemonLaunch& launch) {
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  return cuda(launchDaemonKernel(env, launch, threads_, stream_), "cudaLaunchKernel(daemon)");
}

// The daemon's stream holds nothing but its launches: an error there is a launch that died.
// Asked by the poller only, occl's own thread: it is bound to this device once and for good, so
// that neither this query nor its guarded copies (Collective::failurePlace) create a context on
// device 0, the current device of a fresh thread, in a process that drives several GPUs.
Status CudaBackend::kernelHealth() {
  thread_local int boundTo = -1;
  if (boundTo != device_) {
    if (Status s = cuda(cudaSetDevice(device_), "cudaSetDevice(poller)"); !s.ok()) return s;
    boundTo = device_;
  }
  cudaError_t e = cudaStreamQuery(stream_);
  if (e == cudaSuccess || e == cudaErrorNotReady) return Status::success();
  return cuda(e, "daemon kernel (cudaStreamQuery)");
}

Status CudaBackend::waitKernels() { return cuda(cudaStreamSynchronize(stream_), "daemon kernel (cudaStreamSynchronize)"); }

}  // namespace

Result<std::unique_ptr<Backend>> makeCudaBackend(const occlConfig_t& config, int device) {
  auto backend = std::make_unique<CudaBackend>(config, device);
  if (Status s = backend->init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace occl::backend
