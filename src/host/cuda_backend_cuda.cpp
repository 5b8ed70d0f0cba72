// The CUDA backend: the daemon is a persistent kernel (daemon_kernel.cu) on a stream of its own,
// launched when work arrives and relaunched when it has quit with work left (OCCL §3.1.3).
//
// Memory. Shared memory (SQ, CQ, block states, collective table, statistics) is pinned,
// host-mapped memory; with unified addressing the host pointer is the device pointer. Daemon
// memory (programs, contexts, task queues, scratch) is device memory from the stream-ordered
// allocator. Neither path calls cudaFree or cudaFreeHost while the communicator runs: both
// synchronise the whole device, i.e. wait for every daemon kernel on it — including the peers'
// this rank may be blocking. Freed shared blocks are kept for reuse and released at destruction;
// device memory goes back with cudaFreeAsync.
//
// Launch state. The kernel's blocks vote to quit (quit_vote.hpp); the last to leave stores the
// launch's epoch in mapped memory, so the host sees that a launch is over without a CUDA call:
// notifySubmission runs on the application's threads and must not leave cudaErrorNotReady
// behind for their cudaGetLastError.
// A new launch may be queued behind a sealed one that is still retiring: the stream orders them.
// Only the poller thread queries the launch event, to catch a kernel that died.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "daemon/daemon_kernel.hpp"
#include "host/backend.hpp"
#include "host/cuda_util.hpp"

namespace occl::host {
namespace {

using Clock = std::chrono::steady_clock;

// A block with tasks that cannot progress quits after this many idle periods, at least
// kMinStuckQuitUs: long enough that a slow peer is not mistaken for a deadlock, short enough
// that a cudaDeviceSynchronize elsewhere waits only this long for the daemon (Fig. 1(c)).
constexpr int64_t kStuckQuitFactor = 10;
constexpr int64_t kMinStuckQuitUs = 5000;
// After a launch that quit stuck without completing anything, the next launch waits this long,
// doubling up to the stuck-quit time, so the device gets idle windows instead of a busy loop.
constexpr int64_t kFirstRelaunchDelayUs = 200;
// The poller spins this long before it starts sleeping: completions often come in bursts.
constexpr int64_t kPollSpinUs = 50;
constexpr int64_t kPollMaxSleepUs = 500;
// stop() waits this long for the kernel to read the exit SQE and drain.
constexpr int64_t kStopTimeoutMs = 30000;

int64_t usSince(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t).count();
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const occlConfig_t& config, int device)
      : device_(device),
        threads_(config.threadsPerBlock),
        nBlocks_(config.daemonBlocks),
        idleQuitUs_(config.idleQuitUs),
        stuckQuitUs_(std::max<int64_t>(kStuckQuitFactor * config.idleQuitUs, kMinStuckQuitUs)) {}
  ~CudaBackend() override;

  Status init();

  Result<void*> allocShared(size_t bytes) override;
  Result<void*> allocDaemon(size_t bytes) override;
  Status copyToDaemon(void* dst, const void* src, size_t bytes) override { return copy(dst, src, bytes, "copyToDaemon"); }
  Status copyFromDaemon(void* dst, const void* src, size_t bytes) override {
    return copy(dst, src, bytes, "copyFromDaemon");
  }
  void freeShared(void* p) override;
  void freeDaemon(void* p) override;
  Status checkUserBuffers(const void* sendbuf, const void* recvbuf) override;

  Status start(DaemonEnv* env) override;
  void notifySubmission() override;
  void waitForCompletion(uint64_t consumed, int64_t timeoutUs) override;
  Status stop() override;
  const char* name() const override { return "cuda"; }

 private:
  enum class Work { None, Unread, Queued };

  Status cuda(cudaError_t e, const char* api) const { return cudaStatus(e, api, device_); }
  Status checkDevice();
  Status checkUserBuffer(const void* p, const char* name) const;
  Result<void*> hostAlloc(size_t bytes);
  Status copy(void* dst, const void* src, size_t bytes, const char* what);

  // Launch control; all under launchMu_.
  bool launchOver() const;
  Work pendingWork() const;
  void noteLaunchEnded();
  bool relaunchDue() const;
  Status launch();
  void relaunchIfNeeded(bool honourDelay);
  void checkKernelHealth();
  void fail(const Status& s);

  const int device_;
  const int threads_;
  const int nBlocks_;
  const int64_t idleQuitUs_;
  const int64_t stuckQuitUs_;

  cudaStream_t stream_ = nullptr;     // the daemon's launches, nothing else
  cudaStream_t auxStream_ = nullptr;  // allocations, zeroing, copies: never queued behind the daemon
  cudaEvent_t launched_ = nullptr;    // recorded after the latest launch
  bool pooled_ = false;               // stream-ordered allocation is available
  bool pageableAccess_ = false;       // the device reads plain host memory (HMM or ATS)
  uint64_t* quitWord_ = nullptr;      // device memory, the blocks' vote (quit_vote.hpp)
  uint32_t* endedEpoch_ = nullptr;    // mapped memory: the last launch that ended

  DaemonEnv* env_ = nullptr;
  DaemonEnv envCopy_{};

  std::mutex launchMu_;
  bool everLaunched_ = false;
  bool stopped_ = false;
  bool stopTimedOut_ = false;  // a kernel may still run: its memory must leak, not be freed
  uint32_t epoch_ = 0;
  uint64_t cqAtLaunch_ = 0;
  bool endNoted_ = true;
  Clock::time_point endedAt_{};
  int64_t relaunchDelayUs_ = 0;  // 0 = relaunch at once
  Status fatal_;                 // the first unrecoverable CUDA error; no launch after it

  std::mutex sharedMu_;
  std::unordered_map<void*, size_t> sharedSizes_;  // every pinned block, live or kept for reuse
  std::multimap<size_t, void*> sharedSpare_;       // freed blocks by size
};

CudaBackend::~CudaBackend() {
  (void)stop();
  if (stopTimedOut_) {
    std::fprintf(stderr, "occl: the daemon kernel on CUDA device %d never exited; leaking its memory\n", device_);
    return;
  }
  DeviceGuard guard(device_);
  // Destruction is the one place where cudaFreeHost's device-wide synchronisation is acceptable.
  for (auto& [p, bytes] : sharedSizes_) cudaFreeHost(p);
  if (endedEpoch_ != nullptr) cudaFreeHost(endedEpoch_);
  freeDaemon(quitWord_);
  if (launched_ != nullptr) cudaEventDestroy(launched_);
  if (auxStream_ != nullptr) cudaStreamDestroy(auxStream_);
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

  // Every block must be resident at once: blocks wait on each other's progress.
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
  if (static_cast<int64_t>(blocksPerSm) * sms < nBlocks_)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("config.daemonBlocks = %d: CUDA device %d holds at most %d daemon blocks of "
                                         "%d threads at once",
                                         nBlocks_, device_, blocksPerSm * sms, threads_));
  return Status::success();
}

Status CudaBackend::init() {
  if (Status s = checkDevice(); !s.ok()) return s;
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  if (Status s = cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags"); !s.ok())
    return s;
  if (Status s = cuda(cudaStreamCreateWithFlags(&auxStream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
      !s.ok())
    return s;
  if (Status s = cuda(cudaEventCreateWithFlags(&launched_, cudaEventDisableTiming), "cudaEventCreateWithFlags"); !s.ok())
    return s;
  Result<void*> word = allocDaemon(sizeof(uint64_t));
  if (!word.ok()) return word.status();
  quitWord_ = static_cast<uint64_t*>(word.value());
  Result<void*> ended = hostAlloc(sizeof(uint32_t));
  if (!ended.ok()) return ended.status();
  endedEpoch_ = static_cast<uint32_t*>(ended.value());
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
  {
    std::lock_guard<std::mutex> lock(sharedMu_);
    if (auto it = sharedSpare_.find(rounded); it != sharedSpare_.end()) {
      void* p = it->second;
      sharedSpare_.erase(it);
      std::memset(p, 0, rounded);
      return p;
    }
  }
  Result<void*> p = hostAlloc(rounded);
  if (!p.ok()) return p;
  std::lock_guard<std::mutex> lock(sharedMu_);
  sharedSizes_.emplace(p.value(), rounded);
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
    std::lock_guard<std::mutex> lock(launchMu_);
    if (stopTimedOut_) return;
  }
  DeviceGuard guard(device_);
  if (pooled_) {
    cudaFreeAsync(p, auxStream_);
  } else {
    cudaFree(p);
  }
}

Status CudaBackend::checkUserBuffers(const void* sendbuf, const void* recvbuf) {
  if (Status s = checkUserBuffer(sendbuf, "sendbuf"); !s.ok()) return s;
  return checkUserBuffer(recvbuf, "recvbuf");
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

Status CudaBackend::start(DaemonEnv* env) {
  if (env->nBlocks != static_cast<uint32_t>(nBlocks_))
    return Status::error(occlInternalError, absl::StrFormat("daemon environment has %d blocks, the CUDA backend was "
                                                            "sized for %d",
                                                            env->nBlocks, nBlocks_));
  std::lock_guard<std::mutex> lock(launchMu_);
  env_ = env;
  envCopy_ = *env;  // immutable from now on; every launch passes it by value
  return Status::success();  // event-driven: the first SQE launches the kernel
}

// The latest launch has sealed its quit vote (or there was none): it reads no further SQEs.
bool CudaBackend::launchOver() const {
  return !everLaunched_ || atomics::loadAcquire(endedEpoch_) == epoch_;
}

// Meaningful once the launch is over: SQEs no block has read, or tasks a block still holds.
CudaBackend::Work CudaBackend::pendingWork() const {
  const uint64_t published = env_->sq.publishedCount();
  Work work = Work::None;
  for (uint32_t b = 0; b < env_->nBlocks; ++b) {
    BlockState& bs = env_->blocks[b];
    if (atomics::loadAcquire(&bs.sqCursor) < published) return Work::Unread;
    if (atomics::loadAcquire(&bs.nTasks) != 0) work = Work::Queued;
  }
  return work;
}

// Decides, once per launch, how soon the next one may follow: at once after a launch that
// completed something, later and later after launches that only sat stuck.
void CudaBackend::noteLaunchEnded() {
  if (endNoted_) return;
  endNoted_ = true;
  endedAt_ = Clock::now();
  if (atomics::loadAcquire(env_->cqPublished) != cqAtLaunch_) {
    relaunchDelayUs_ = 0;
  } else {
    relaunchDelayUs_ = std::min(relaunchDelayUs_ == 0 ? kFirstRelaunchDelayUs : 2 * relaunchDelayUs_, stuckQuitUs_);
  }
}

bool CudaBackend::relaunchDue() const { return usSince(endedAt_) >= relaunchDelayUs_; }

Status CudaBackend::launch() {
  DeviceGuard guard(device_);
  if (Status s = guard.status(); !s.ok()) return s;
  DaemonLaunch l{quitWord_, endedEpoch_, epoch_ + 1, 0,
                 QuitLimits{static_cast<uint64_t>(idleQuitUs_) * 1000, static_cast<uint64_t>(stuckQuitUs_) * 1000}};
  const uint64_t cq = atomics::loadAcquire(env_->cqPublished);
  if (Status s = cuda(launchDaemonKernel(envCopy_, l, threads_, stream_), "cudaLaunchKernel(daemon)"); !s.ok()) return s;
  epoch_ = l.epoch;
  everLaunched_ = true;
  endNoted_ = false;
  cqAtLaunch_ = cq;
  return cuda(cudaEventRecord(launched_, stream_), "cudaEventRecord");
}

// Unread SQEs launch at once (a submission raced with the quit vote); tasks left by a launch
// that quit stuck wait for the relaunch delay.
void CudaBackend::relaunchIfNeeded(bool honourDelay) {
  if (!fatal_.ok() || env_ == nullptr || !launchOver()) return;
  if (everLaunched_) noteLaunchEnded();
  const Work work = pendingWork();
  if (work == Work::None) return;
  if (work == Work::Queued && honourDelay && !relaunchDue()) return;
  if (Status s = launch(); !s.ok()) fail(s);
}

// A kernel that faults never seals its vote; only the launch event tells.
void CudaBackend::checkKernelHealth() {
  if (!everLaunched_ || !fatal_.ok()) return;
  cudaError_t e = cudaEventQuery(launched_);
  if (e == cudaSuccess || e == cudaErrorNotReady) return;
  fail(cuda(e, "daemon kernel (cudaEventQuery)"));
}

// Unrecoverable: no more launches, and the abort flag makes new submissions fail fast.
void CudaBackend::fail(const Status& s) {
  if (!fatal_.ok()) return;
  fatal_ = s;
  std::fprintf(stderr, "occl: CUDA backend on device %d stopped: %s\n", device_, s.message.c_str());
  if (env_ != nullptr) {
    uint32_t expected = 0;
    atomics::compareExchange(env_->abortFlag, expected, static_cast<uint32_t>(occlUnhandledCudaError));
  }
}

// A new SQE is new information (it may be what the queued tasks wait for): no relaunch delay.
void CudaBackend::notifySubmission() {
  std::lock_guard<std::mutex> lock(launchMu_);
  if (!stopped_) relaunchIfNeeded(/*honourDelay=*/false);
}

// The GPU cannot ring a futex: poll the CQ counter, spinning briefly, then sleeping longer and
// longer. Each round also relaunches a daemon that quit with work left.
void CudaBackend::waitForCompletion(uint64_t consumed, int64_t timeoutUs) {
  const auto start = Clock::now();
  int64_t sleepUs = 10;
  for (;;) {
    if (env_ == nullptr || atomics::loadAcquire(env_->cqPublished) > consumed) return;
    {
      std::lock_guard<std::mutex> lock(launchMu_);
      checkKernelHealth();
      if (!stopped_) relaunchIfNeeded(/*honourDelay=*/true);
    }
    const int64_t elapsed = usSince(start);
    if (elapsed >= timeoutUs) return;
    if (elapsed < kPollSpinUs) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(sleepUs, timeoutUs - elapsed)));
    sleepUs = std::min(2 * sleepUs, kPollMaxSleepUs);
  }
}

// Runs the daemon until every block has read the exit SQE and drained its tasks, relaunching
// without delay (the abort flag, if set, fails whatever is left quickly), then waits for the
// last launch to retire.
Status CudaBackend::stop() {
  std::unique_lock<std::mutex> lock(launchMu_);
  if (env_ == nullptr || stopped_) return fatal_;
  const auto deadline = Clock::now() + std::chrono::milliseconds(kStopTimeoutMs);
  for (;;) {
    if (!fatal_.ok()) break;
    if (launchOver()) {
      if (pendingWork() == Work::None) break;
      relaunchIfNeeded(/*honourDelay=*/false);
      continue;
    }
    if (Clock::now() > deadline) {
      stopTimedOut_ = true;
      fail(Status::error(occlTimeout, absl::StrFormat("the daemon kernel did not exit within %d ms of the exit "
                                                      "request (launch %d running, launch %d was the last to end)",
                                                      kStopTimeoutMs, epoch_, atomics::loadAcquire(endedEpoch_))));
      break;
    }
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    lock.lock();
  }
  stopped_ = true;
  if (everLaunched_ && fatal_.ok()) {
    // Sealed: the blocks are leaving, so this returns promptly (or reports a fault). Not under
    // the lock: a block may still need the poller to drain a full CQ before it can leave.
    lock.unlock();
    Status s = cuda(cudaEventSynchronize(launched_), "daemon kernel (cudaEventSynchronize)");
    lock.lock();
    if (!s.ok()) fail(s);
  }
  return fatal_;
}

}  // namespace

Result<std::unique_ptr<Backend>> makeCudaBackend(const occlConfig_t& config, int device) {
  auto backend = std::make_unique<CudaBackend>(config, device);
  if (Status s = backend->init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace occl::host
