// The simt backend: the CUDA daemon's device code path on host threads. A launch runs
// daemonBlockMain (daemon_main.hpp) on every lane of every emulated block (device/simt_block.hpp:
// simtLanes threads, a barrier that catches divergence, a leader broadcast slot), under the very
// launch control of the CUDA backend (kernel_backend.hpp): quit vote, epochs, relaunch, stop.
// Memory is host memory; connectors are the host backend's. Daemon memory and the quit word are
// registered as emulated device memory (device/simt_memory.hpp), where alone a lane may do an
// atomic read-modify-write, as on the GPU.
//
// What it proves and what only a GPU can check is listed in docs/design.md ("The simt backend").
//
// Residency. An emulated device holds simtSmSlots daemon blocks at once (0: no limit); a block
// waits for a slot before it runs, as a CUDA block waits to become resident. Communicators
// configured with the same slot count share one emulated device, and reserve their blocks on it
// (residency.hpp) exactly as the CUDA backend does on a GPU.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "backend/backend.hpp"
#include "backend/host_memory.hpp"
#include "backend/kernel_backend.hpp"
#include "backend/residency.hpp"
#include "device/simt_block.hpp"
#include "device/simt_crossings.hpp"
#include "device/simt_memory.hpp"

namespace occl::backend {
namespace {

// The SMs of an emulated device: at most `slots` blocks run at once (slots > 0).
class SimtDevice {
 public:
  static SimtDevice& withSlots(int slots) {
    static std::mutex mu;
    static std::map<int, std::unique_ptr<SimtDevice>> devices;
    std::lock_guard<std::mutex> lock(mu);
    auto& d = devices[slots];
    if (!d) d.reset(new SimtDevice(slots));
    return *d;
  }
  std::string name() const { return absl::StrFormat("simt device (%d SM slots)", slots_); }
  void acquire() {
    if (slots_ == 0) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return running_ < slots_; });
    running_ += 1;
  }
  void release() {
    if (slots_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    running_ -= 1;
    cv_.notify_one();
  }

 private:
  explicit SimtDevice(int slots) : slots_(slots) {}
  const int slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0;
};

// Launches run one after the other on a thread of their own, as kernels on a CUDA stream.
class LaunchStream {
 public:
  LaunchStream() : worker_([this] { loop(); }) {}
  ~LaunchStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  void enqueue(std::function<void()> launch) {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(launch));
    cv_.notify_all();
  }
  // Returns once every launch enqueued so far has retired.
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;
      std::function<void()> launch = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      launch();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool closing_ = false;
  std::thread worker_;  // last: starts once the rest is constructed
};

class SimtBackend final : public OnHostMemory<KernelBackend> {
  // Its lanes are threads that need the cores a poller would take: the poller sleeps at least
  // 50 us (what a short sleep took before the timer slack was lowered) and half the time since
  // the last completion (its steps about double), to the CUDA backend's cap.
  static constexpr PollSteps kPollSteps{50, 500, 2};

 public:
  explicit SimtBackend(const occlConfig_t& config)
      : OnHostMemory(config, SimtDevice::withSlots(config.simtSmSlots).name(), kPollSteps),
        lanes_(config.simtLanes),
        slots_(config.simtSmSlots),
        jitterSeed_(config.simtJitterSeed),
        device_(SimtDevice::withSlots(config.simtSmSlots)),
        stream_(std::make_unique<LaunchStream>()) {}

  ~SimtBackend() override {
    (void)stop();
    if (kernelMayStillRun()) {
      std::fprintf(stderr, "occl: the simt daemon on %s never exited; leaking its threads and memory\n",
                   where_.c_str());
      (void)stream_.release();
      return;
    }
    stream_.reset();
    freeDaemon(quitWord_);
    exec::simt::removeHostMapped(endedEpoch_);
    std::free(endedEpoch_);
  }

  Status init() {
    if (slots_ > 0) {
      Result<ResidencyReservation> r = reserveResidency(where_, nBlocks_, slots_, "daemon blocks");
      if (!r.ok()) return r.status();
      residency_ = std::move(r.value());
    }
    Result<void*> word = allocDaemon(sizeof(uint64_t));
    if (!word.ok()) return word.status();
    quitWord_ = static_cast<uint64_t*>(word.value());
    Result<void*> ended = allocShared(sizeof(uint32_t));
    if (!ended.ok()) return ended.status();
    endedEpoch_ = static_cast<uint32_t*>(ended.value());
    setLaunchWords(quitWord_, endedEpoch_);
    return Status::success();
  }

  // Daemon memory is emulated device memory: the host reaches it through copies only.
  Result<void*> allocDaemon(size_t bytes) override {
    void* p = exec::simt::allocDeviceMemory(bytes);
    if (p == nullptr)
      return Status::error(occlSystemError, absl::StrFormat("allocating %d bytes of simt device memory failed", bytes));
    return p;
  }
  Status copyToDaemon(void* dst, const void* src, size_t bytes) override {
    exec::simt::DeviceAccess copyEngine;
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status copyFromDaemon(void* dst, const void* src, size_t bytes) override {
    exec::simt::DeviceAccess copyEngine;
    std::memcpy(dst, src, bytes);
    return Status::success();
  }
  Status readDaemonWords(uint64_t* dst, const uint64_t* src, size_t n) override {
    exec::simt::DeviceAccess copyEngine;
    return OnHostMemory::readDaemonWords(dst, src, n);
  }
  Status writeDaemonWord(uint32_t* dst, uint32_t value) override {
    exec::simt::DeviceAccess copyEngine;
    return OnHostMemory::writeDaemonWord(dst, value);
  }
  // A launch that never exited may still use them: leak rather than free.
  void freeDaemon(void* p) override {
    if (!kernelMayStillRun()) exec::simt::freeDeviceMemory(p);
  }
  // Shared memory is what the CUDA backend pins on the host and maps into the GPU: every lane
  // access to it is a bus crossing there, and counted here (device/simt_crossings.hpp).
  Result<void*> allocShared(size_t bytes) override {
    Result<void*> p = allocHostZeroed(bytes);
    if (p.ok()) exec::simt::addHostMapped(p.value(), bytes);
    return p;
  }
  void freeShared(void* p) override {
    if (kernelMayStillRun()) return;
    exec::simt::removeHostMapped(p);
    std::free(p);
  }
  const char* name() const override { return "simt"; }

 protected:
  // Like cudaLaunchKernel: returns at once; the launch runs after the ones queued before it.
  Status launchKernel(const DaemonEnv& env, const DaemonLaunch& launch) override {
    try {
      // Captures no `this`: a launch that never exits outlives the backend (see the destructor).
      stream_->enqueue([env, launch, lanes = lanes_, jitterSeed = jitterSeed_, device = &device_] {
        runLaunch(env, launch, lanes, jitterSeed, *device);
      });
    } catch (const std::exception& e) {
      return Status::error(occlSystemError, absl::StrFormat("queueing a simt daemon launch failed: %s", e.what()));
    }
    return Status::success();
  }
  // Host threads do not fault: a launch ends by its quit vote.
  Status kernelHealth() override { return Status::success(); }
  Status waitKernels() override {
    stream_->synchronize();
    return Status::success();
  }

 private:
  // One launch: a thread per block, which waits for an SM slot and then runs the block's lanes.
  static void runLaunch(const DaemonEnv& env, const DaemonLaunch& launch, int lanes, uint32_t jitterSeed,
                        SimtDevice& device) {
    std::vector<std::thread> blocks;
    blocks.reserve(env.nBlocks);
    for (uint32_t b = 0; b < env.nBlocks; ++b) {
      blocks.emplace_back([&, b] {
        device.acquire();
        const uint32_t seed = jitterSeed == 0 ? 0 : jitterSeed + 7919u * launch.epoch + b;
        startLate(seed, b);
        exec::simt::Block block(lanes, seed);
        block.run([&] { daemonBlockMain(env, launch, static_cast<int>(b)); });
        device.release();
      });
    }
    for (auto& t : blocks) t.join();
  }

  // With jitter, one launch in four starts a block other than the first up to 1 ms late, as a
  // GPU whose SMs are busy elsewhere makes a block resident late: the blocks that started must
  // not settle the launch (its quit vote) in a way that strands the late one's work.
  static void startLate(uint32_t seed, uint32_t block) {
    if (seed == 0 || block == 0) return;
    const uint32_t h = seed * 2654435761u;
    if ((h >> 30) != 0) return;
    std::this_thread::sleep_for(std::chrono::microseconds((h >> 8) % 1000));
  }

  const int lanes_;
  const int slots_;
  const uint32_t jitterSeed_;
  SimtDevice& device_;
  std::unique_ptr<LaunchStream> stream_;
  uint64_t* quitWord_ = nullptr;
  uint32_t* endedEpoch_ = nullptr;
  ResidencyReservation residency_;
};

}  // namespace

Result<std::unique_ptr<Backend>> makeSimtBackend(const occlConfig_t& config) {
  auto backend = std::make_unique<SimtBackend>(config);
  if (Status s = backend->init(); !s.ok()) return s;
  return std::unique_ptr<Backend>(std::move(backend));
}

}  // namespace occl::backend
