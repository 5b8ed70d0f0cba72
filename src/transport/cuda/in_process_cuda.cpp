// The in-process transport for CUDA ranks (cuda/connectors.hpp says where FIFO memory lives and why).
//
// Device FIFOs come from a stream-ordered pool per device and go back with cudaFreeAsync:
// cudaMalloc/cudaFree would synchronise the whole device, i.e. wait for the daemon kernels
// running on it. A peer GPU gets access to the pool with cudaMemPoolSetAccess (pool memory does
// not follow cudaDeviceEnablePeerAccess). Pinned host FIFOs are released when the world ends,
// for the same reason (cudaFreeHost synchronises too).
#include "transport/cuda/connectors.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "absl/strings/str_format.h"
#include "transport/end_pairing.hpp"
#include "transport/shm/pages.hpp"
#include "util/cuda_util.hpp"

namespace occl::transport {


namespace {

// A FIFO in device memory. Header included: the host cannot address it, so the registration
// handshake keeps host copies of both signatures and copies this end's into the device header,
// where the peer's daemon checks it; the geometry check runs on a host shadow header.
class DeviceFifo : public ConnectorMemory {
 public:
  DeviceFifo(std::shared_ptr<CudaWorld> world, int device, cudaStream_t stream, void* base)
      : world_(std::move(world)), device_(device), stream_(stream) {
    base_ = base;
  }
  ~DeviceFifo() override {
    DeviceGuard guard(device_);
    cudaFreeAsync(base_, stream_);
  }

  // claimGeometry poisons only the shadow on a mismatch: the FIFO itself is poisoned here, so
  // that the other end fails instead of waiting.
  Status claim(uint32_t nSlots, uint64_t slotBytes, const ConnectorKey& key) {
    Status claimed = claimGeometry(&shadow_, nSlots, slotBytes, key);
    if (!claimed.ok()) (void)poison(occlInvalidUsage, 0);
    return claimed;
  }

  Result<uint64_t> exchangeSignature(bool isSender, uint64_t signature) override {
    std::lock_guard<std::mutex> lock(mu_);
    (isSender ? senderSig_ : receiverSig_) = signature;
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    uint64_t* field = isSender ? &header()->senderSig : &header()->receiverSig;
    Status s = cudaStatus(cudaMemcpyAsync(field, &signature, sizeof(signature), cudaMemcpyHostToDevice, stream_),
                          "cudaMemcpyAsync(connector signature)", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    if (!s.ok()) return s;
    return isSender ? receiverSig_ : senderSig_;
  }

  // No host atomics on device memory: read the word, and write it only while it is clear. A
  // daemon that poisons it between the two copies loses its status to this one; both are
  // failures, and every reader only asks whether the word is nonzero.
  Status poison(uint32_t status, uint64_t fromSeq) override {
    DeviceGuard guard(device_);
    if (Status s = guard.status(); !s.ok()) return s;
    uint32_t current = 0;
    Status s = cudaStatus(cudaMemcpyAsync(&current, &header()->poison, sizeof(current), cudaMemcpyDeviceToHost, stream_),
                          "cudaMemcpyAsync(connector poison)", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    if (!s.ok() || current != 0) return s;
    // The stream orders the two copies: the submission the poison fails lands before the poison.
    s = cudaStatus(cudaMemcpyAsync(&header()->poisonSeq, &fromSeq, sizeof(fromSeq), cudaMemcpyHostToDevice, stream_),
                   "cudaMemcpyAsync(connector poison)", device_);
    if (s.ok())
      s = cudaStatus(cudaMemcpyAsync(&header()->poison, &status, sizeof(status), cudaMemcpyHostToDevice, stream_),
                     "cudaMemcpyAsync(connector poison)", device_);
    if (s.ok()) s = cudaStatus(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", device_);
    return s;
  }

 private:
  std::shared_ptr<CudaWorld> world_;  // owns the pool and the stream
  int device_;
  cudaStream_t stream_;
  std::mutex mu_;
  uint64_t senderSig_ = 0;
  uint64_t receiverSig_ = 0;
  FifoHeader shadow_{};
};

// Pinned host memory for GPU pairs without peer access; the host handshake works on it directly.
class PinnedFifo : public ConnectorMemory {
 public:
  PinnedFifo(std::shared_ptr<CudaWorld> world, void* base) : world_(std::move(world)) { base_ = base; }
  ~PinnedFifo() override;

 private:
  std::shared_ptr<CudaWorld> world_;
};

}  // namespace

class CudaWorld : public std::enable_shared_from_this<CudaWorld> {
 public:
  explicit CudaWorld(std::vector<int> devices) : devices_(std::move(devices)) {}
  ~CudaWorld();

  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes);
  void retireHost(void* p) {
    std::lock_guard<std::mutex> lock(retiredMu_);
    retiredHost_.push_back(p);
  }

 private:
  struct PerDevice {
    cudaMemPool_t pool = nullptr;
    cudaStream_t stream = nullptr;  // allocation, zeroing, signatures, frees
    std::vector<int> peers;         // devices granted access to the pool
  };

  Result<int> deviceOf(int rank, const char* role, const ConnectorKey& key) const;
  Result<PerDevice*> perDevice(int device);
  Result<bool> reachable(int from, int to);
  Result<std::shared_ptr<ConnectorMemory>> createDevice(int device, int accessor, size_t bytes);
  Result<std::shared_ptr<ConnectorMemory>> createPinned(int device, size_t bytes);

  const std::vector<int> devices_;
  std::mutex mu_;  // everything below; held across the CUDA calls of an attach (registration only)
  std::map<int, PerDevice> perDevice_;
  EndPairing pairing_;
  std::mutex retiredMu_;
  std::vector<void*> retiredHost_;
};

PinnedFifo::~PinnedFifo() { world_->retireHost(base_); }

CudaWorld::~CudaWorld() {
  for (auto& [device, d] : perDevice_) {
    DeviceGuard guard(device);
    if (d.stream != nullptr) {
      cudaStreamSynchronize(d.stream);  // the last cudaFreeAsync calls
      cudaStreamDestroy(d.stream);
    }
    if (d.pool != nullptr) cudaMemPoolDestroy(d.pool);
  }
  for (void* p : retiredHost_) cudaFreeHost(p);
}

Result<int> CudaWorld::deviceOf(int rank, const char* role, const ConnectorKey& key) const {
  if (rank < 0 || static_cast<size_t>(rank) >= devices_.size())
    return Status::error(occlInternalError, absl::StrFormat("connector %s: %s rank %d outside the %d device ranks",
                                                            key.describe(), role, rank, devices_.size()));
  return devices_[static_cast<size_t>(rank)];
}

Result<CudaWorld::PerDevice*> CudaWorld::perDevice(int device) {
  PerDevice& d = perDevice_[device];
  if (d.pool != nullptr) return &d;
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  if (d.stream == nullptr) {
    if (Status s = cudaStatus(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
                              device);
        !s.ok())
      return s;
  }
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = device;
  if (Status s = cudaStatus(cudaMemPoolCreate(&d.pool, &props), "cudaMemPoolCreate(connectors)", device); !s.ok()) {
    d.pool = nullptr;
    return s;
  }
  return &d;
}

// Whether kernels on `from` can use memory of `to` directly.
Result<bool> CudaWorld::reachable(int from, int to) {
  if (from == to) return true;
  int can = 0;
  if (Status s = cudaStatus(cudaDeviceCanAccessPeer(&can, from, to), "cudaDeviceCanAccessPeer", from); !s.ok()) return s;
  return can != 0;
}

Result<std::shared_ptr<ConnectorMemory>> CudaWorld::createDevice(int device, int accessor, size_t bytes) {
  Result<PerDevice*> pd = perDevice(device);
  if (!pd.ok()) return pd.status();
  PerDevice& d = *pd.value();
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  if (accessor != device && std::find(d.peers.begin(), d.peers.end(), accessor) == d.peers.end()) {
    cudaMemAccessDesc access{};
    access.location.type = cudaMemLocationTypeDevice;
    access.location.id = accessor;
    access.flags = cudaMemAccessFlagsProtReadWrite;
    if (Status s = cudaStatus(cudaMemPoolSetAccess(d.pool, &access, 1),
                              absl::StrFormat("cudaMemPoolSetAccess(for device %d)", accessor), device);
        !s.ok())
      return s;
    d.peers.push_back(accessor);
  }
  void* p = nullptr;
  Status s = cudaStatus(cudaMallocFromPoolAsync(&p, bytes, d.pool, d.stream), "cudaMallocFromPoolAsync", device);
  if (!s.ok()) return s.withContext(absl::StrFormat("allocating a %d-byte connector", bytes));
  s = cudaStatus(cudaMemsetAsync(p, 0, bytes, d.stream), "cudaMemsetAsync", device);
  if (s.ok()) s = cudaStatus(cudaStreamSynchronize(d.stream), "cudaStreamSynchronize", device);
  auto fifo = std::make_shared<DeviceFifo>(shared_from_this(), device, d.stream, p);
  if (!s.ok()) return s;  // fifo's destructor gives the memory back
  return std::shared_ptr<ConnectorMemory>(std::move(fifo));
}

Result<std::shared_ptr<ConnectorMemory>> CudaWorld::createPinned(int device, size_t bytes) {
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  void* p = nullptr;
  if (Status s = cudaStatus(cudaHostAlloc(&p, bytes, cudaHostAllocMapped | cudaHostAllocPortable),
                            "cudaHostAlloc(connector)", device);
      !s.ok())
    return s;
  auto fifo = std::make_shared<PinnedFifo>(shared_from_this(), p);
  void* onDevice = nullptr;
  if (Status s = cudaStatus(cudaHostGetDevicePointer(&onDevice, p, 0), "cudaHostGetDevicePointer", device); !s.ok())
    return s;
  if (onDevice != p)
    return Status::error(occlUnhandledCudaError,
                         absl::StrFormat("pinned connector memory %p maps to %p on CUDA device %d: unified "
                                         "addressing is required",
                                         p, onDevice, device));
  std::memset(p, 0, bytes);
  return std::shared_ptr<ConnectorMemory>(std::move(fifo));
}

Result<std::shared_ptr<ConnectorMemory>> CudaWorld::attach(const ConnectorKey& key, ConnectorEnd end,
                                                          uint32_t nSlots, uint64_t slotBytes) {
  Result<int> sender = deviceOf(key.sender, "sending", key);
  Result<int> receiver = deviceOf(key.receiver, "receiving", key);
  if (!sender.ok()) return sender.status();
  if (!receiver.ok()) return receiver.status();
  std::lock_guard<std::mutex> lock(mu_);
  std::shared_ptr<ConnectorMemory> region = pairing_.take(key, end);
  const bool created = region == nullptr;
  if (created) {
    Result<bool> direct = reachable(sender.value(), receiver.value());
    if (!direct.ok()) return direct.status();
    const size_t bytes = fifoBytes(nSlots, slotBytes);
    Result<std::shared_ptr<ConnectorMemory>> made = direct.value()
                                                        ? createDevice(receiver.value(), sender.value(), bytes)
                                                        : createPinned(receiver.value(), bytes);
    if (!made.ok()) return made.status().withContext(absl::StrFormat("connector %s", key.describe()));
    region = made.value();
  }
  auto* device = dynamic_cast<DeviceFifo*>(region.get());
  Status geometry = device != nullptr ? device->claim(nSlots, slotBytes, key)
                                      : claimGeometry(region->header(), nSlots, slotBytes, key);
  if (!geometry.ok()) return geometry;
  if (created) pairing_.hold(key, end, region);
  return region;
}

namespace {

class CudaInProcessFactory : public ConnectorFactory {
 public:
  explicit CudaInProcessFactory(std::shared_ptr<CudaWorld> world) : world_(std::move(world)) {}
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    return world_->attach(key, end, nSlots, slotBytes);
  }
  const char* name() const override { return "cuda-in-process"; }

 private:
  std::shared_ptr<CudaWorld> world_;
};

}  // namespace

std::shared_ptr<CudaWorld> makeCudaWorld(std::vector<int> devices) {
  return std::make_shared<CudaWorld>(std::move(devices));
}

std::unique_ptr<ConnectorFactory> makeCudaInProcessFactory(std::shared_ptr<CudaWorld> world) {
  return std::make_unique<CudaInProcessFactory>(std::move(world));
}

}  // namespace occl::transport
