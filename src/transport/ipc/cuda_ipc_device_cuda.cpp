// The CUDA backend's IPC device memory (ipc_device.hpp): stream-ordered pools (cudaMemPoolCreate)
// whose handle type is a POSIX file descriptor, one per GPU a FIFO may lie on (this rank's, and
// the GPUs of peers it sends to). Allocation, zeroing and frees are ordered on a stream of the
// rank's own: cudaMalloc and cudaFree would synchronise the device, i.e. wait for the daemon
// kernel, which never ends while the communicator lives. A pool that lies on another GPU than
// the one that uses it gets access with cudaMemPoolSetAccess, in each process (access to pool
// memory is per process and does not follow cudaDeviceEnablePeerAccess).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/str_format.h"
#include "transport/ipc/ipc_device.hpp"
#include "util/cuda_util.hpp"

namespace occl::transport::ipc {
namespace {

static_assert(sizeof(cudaMemPoolPtrExportData) == sizeof(Export::data), "an Export carries CUDA's export data");

class CudaIpcDevice : public IpcDevice {
 public:
  CudaIpcDevice(int rank, int device, std::vector<int> gpuOf, cudaStream_t stream)
      : rank_(rank), device_(device), gpuOf_(std::move(gpuOf)), stream_(stream) {}
  ~CudaIpcDevice() override {
    DeviceGuard guard(device_);
    cudaStreamSynchronize(stream_);  // the last cudaFreeAsync calls
    for (auto& [key, pool] : imported_) cudaMemPoolDestroy(pool);
    for (auto& [gpu, pool] : pools_) cudaMemPoolDestroy(pool);
    cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "cuda-ipc"; }

  Result<std::vector<PoolFd>> exportPools(int peer) override {
    Result<int> peerGpu = gpuOfRank(peer);
    if (!peerGpu.ok()) return peerGpu.status();
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<PoolFd> out;
    for (int gpu : std::set<int>{device_, peerGpu.value()}) {
      Result<cudaMemPool_t> pool = poolOn(gpu);
      if (!pool.ok()) return pool.status();
      int fd = -1;
      if (Status s = cudaStatus(cudaMemPoolExportToShareableHandle(&fd, pool.value(), cudaMemHandleTypePosixFileDescriptor, 0),
                                "cudaMemPoolExportToShareableHandle", device_);
          !s.ok()) {
        for (const PoolFd& f : out) close(f.fd);
        return s;
      }
      out.push_back({static_cast<uint32_t>(gpu), fd});
    }
    return out;
  }

  Status importPools(int peer, const std::vector<PoolFd>& fds) override {
    std::lock_guard<std::mutex> lock(mu_);
    DeviceGuard guard(device_);
    Status result = guard.status();
    for (const PoolFd& f : fds) {
      cudaMemPool_t pool = nullptr;
      if (result.ok()) {
        result = cudaStatus(cudaMemPoolImportFromShareableHandle(&pool, reinterpret_cast<void*>(static_cast<intptr_t>(f.fd)),
                                                                 cudaMemHandleTypePosixFileDescriptor, 0),
                            absl::StrFormat("cudaMemPoolImportFromShareableHandle(rank %d's pool)", peer), device_);
        if (result.ok()) imported_[{peer, f.pool}] = pool;
      }
      close(f.fd);
    }
    return result;
  }

  Result<std::pair<void*, Export>> allocate(size_t bytes, int lieOn) override {
    Result<int> gpu = gpuOfRank(lieOn);
    if (!gpu.ok()) return gpu.status();
    std::lock_guard<std::mutex> lock(mu_);
    Result<cudaMemPool_t> pool = poolOn(gpu.value());
    if (!pool.ok()) return pool.status();
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    void* p = nullptr;
    Status s = cudaStatus(cudaMallocFromPoolAsync(&p, bytes, pool.value(), stream_), "cudaMallocFromPoolAsync", device_);
    if (!s.ok()) return s.withContext(absl::StrFormat("allocating a %d-byte connector on CUDA device %d", bytes, gpu.value()));
    Export e{};
    e.pool = static_cast<uint32_t>(gpu.value());
    e.bytes = bytes;
    s = cudaStatus(cudaMemsetAsync(p, 0, bytes, stream_), "cudaMemsetAsync", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    cudaMemPoolPtrExportData data{};
    if (s.ok()) s = cudaStatus(cudaMemPoolExportPointer(&data, p), "cudaMemPoolExportPointer", device_);
    if (!s.ok()) {
      cudaFreeAsync(p, stream_);
      return s;
    }
    std::memcpy(e.data, &data, sizeof(data));
    return std::pair<void*, Export>{p, e};
  }

  void free(void* p) override {
    DeviceGuard guard(device_);
    cudaFreeAsync(p, stream_);
  }

  Result<void*> importPointer(int owner, const Export& e, int lieOn) override {
    Result<int> gpu = gpuOfRank(lieOn);
    if (!gpu.ok()) return gpu.status();
    std::lock_guard<std::mutex> lock(mu_);
    auto it = imported_.find({owner, e.pool});
    if (it == imported_.end())
      return Status::error(occlInternalError,
                           absl::StrFormat("rank %d has not imported rank %d's pool %d", rank_, owner, e.pool));
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    if (gpu.value() != device_ && granted_.insert(it->second).second) {
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = device_;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      if (Status s = cudaStatus(cudaMemPoolSetAccess(it->second, &access, 1), "cudaMemPoolSetAccess(imported pool)",
                                device_);
          !s.ok()) {
        granted_.erase(it->second);
        return s;
      }
    }
    cudaMemPoolPtrExportData data{};
    std::memcpy(&data, e.data, sizeof(data));
    void* p = nullptr;
    if (Status s = cudaStatus(cudaMemPoolImportPointer(&p, it->second, &data), "cudaMemPoolImportPointer", device_);
        !s.ok())
      return s;
    return p;
  }

  // Done before the owner may free it (the importer marks its record after this returns).
  void closeImport(void* p) override {
    DeviceGuard guard(device_);
    cudaFreeAsync(p, stream_);
    cudaStreamSynchronize(stream_);
  }

  Status copyIn(void* device, const void* host, size_t bytes) override {
    DeviceGuard guard(device_);
    Status s = cudaStatus(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    return s;
  }
  Status copyOut(void* host, const void* device, size_t bytes) override {
    DeviceGuard guard(device_);
    Status s = cudaStatus(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    return s;
  }

 private:
  Result<int> gpuOfRank(int rank) const {
    if (rank == rank_) return device_;
    if (rank < 0 || static_cast<size_t>(rank) >= gpuOf_.size() || gpuOf_[static_cast<size_t>(rank)] < 0)
      return Status::error(occlInternalError,
                           absl::StrFormat("rank %d's GPU is not visible to rank %d: no IPC connector between them", rank,
                                           rank_));
    return gpuOf_[static_cast<size_t>(rank)];
  }

  // Under mu_: this process's pool on `gpu`, made at first use.
  Result<cudaMemPool_t> poolOn(int gpu) {
    if (auto it = pools_.find(gpu); it != pools_.end()) return it->second;
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypePosixFileDescriptor;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = gpu;
    cudaMemPool_t pool = nullptr;
    if (Status s = cudaStatus(cudaMemPoolCreate(&pool, &props), absl::StrFormat("cudaMemPoolCreate(IPC, on device %d)", gpu),
                              device_);
        !s.ok())
      return s;
    if (gpu != device_) {
      cudaMemAccessDesc access{};
      access.location.type = cudaMemLocationTypeDevice;
      access.location.id = device_;
      access.flags = cudaMemAccessFlagsProtReadWrite;
      if (Status s = cudaStatus(cudaMemPoolSetAccess(pool, &access, 1), "cudaMemPoolSetAccess(IPC pool)", device_); !s.ok()) {
        cudaMemPoolDestroy(pool);
        return s;
      }
    }
    pools_[gpu] = pool;
    return pool;
  }

  const int rank_;
  const int device_;
  const std::vector<int> gpuOf_;
  cudaStream_t stream_;
  std::mutex mu_;
  std::map<int, cudaMemPool_t> pools_;                        // by the GPU it lies on
  std::map<std::pair<int, uint32_t>, cudaMemPool_t> imported_;  // by (owner rank, its pool id)
  std::set<cudaMemPool_t> granted_;                            // imported pools this GPU has access to
};

uint64_t identity(const cudaUUID_t& uuid) {
  unsigned char bytes[16];
  std::memcpy(bytes, uuid.bytes, sizeof(bytes));
  return gpuIdentity(bytes);
}

}  // namespace

Result<DaemonInfo> describeCudaDaemon(int device) {
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  DaemonInfo info;
  info.kind = DaemonKind::Cuda;
  cudaDeviceProp prop{};
  if (Status s = cudaStatus(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties", device); !s.ok()) return s;
  info.gpu = identity(prop.uuid);
  int handles = 0;
  if (cudaDeviceGetAttribute(&handles, cudaDevAttrMemoryPoolSupportedHandleTypes, device) != cudaSuccess) {
    cudaGetLastError();
    handles = 0;
  }
  info.canExport = (handles & cudaMemHandleTypePosixFileDescriptor) != 0 ? 1 : 0;
  int count = 0;
  if (Status s = cudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount", device); !s.ok()) return s;
  for (int other = 0; other < count && info.nReach < DaemonInfo::kMaxReach; ++other) {
    if (other == device) continue;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device, other) != cudaSuccess || can == 0) {
      cudaGetLastError();
      continue;
    }
    cudaDeviceProp otherProp{};
    if (cudaGetDeviceProperties(&otherProp, other) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    info.reach[info.nReach++] = identity(otherProp.uuid);
  }
  return info;
}

Result<std::shared_ptr<IpcDevice>> makeCudaIpcDevice(int rank, int device, const std::vector<uint64_t>& rankGpus) {
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  int count = 0;
  if (Status s = cudaStatus(cudaGetDeviceCount(&count), "cudaGetDeviceCount", device); !s.ok()) return s;
  std::map<uint64_t, int> ordinals;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) == cudaSuccess) {
      ordinals.emplace(identity(prop.uuid), d);
    } else {
      cudaGetLastError();
    }
  }
  std::vector<int> gpuOf;
  for (uint64_t gpu : rankGpus) {
    auto it = ordinals.find(gpu);
    gpuOf.push_back(gpu != 0 && it != ordinals.end() ? it->second : -1);
  }
  cudaStream_t stream = nullptr;
  if (Status s = cudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", device);
      !s.ok())
    return s;
  return std::shared_ptr<IpcDevice>(std::make_shared<CudaIpcDevice>(rank, device, std::move(gpuOf), stream));
}

}  // namespace occl::transport::ipc
