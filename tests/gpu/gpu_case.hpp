// What the CUDA backend's end-to-end suites share (gpu_collectives_test, gpu_streams_test): device
// and pinned mirrors of a case's host buffers, the fixture that skips without a device, and a case
// registered, run and checked bit for bit on n device ranks of GPU 0 (collective_cases.hpp).
//
// Buffers are filled before a submission and read after its callback with the legacy default
// stream, then that stream is synchronised: occlSubmit has no stream argument, so the data a
// collective reads must be in place when it is submitted. The stream-ordered tests
// (occlSubmitOnStream) order their copies on the rank's own stream instead.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_comms.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {

// Makes host-side copies visible to the daemon, whose kernels run on non-blocking streams.
inline void syncLegacyStream() { checkCuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize"); }

// What rank `comm` still waits for (occlCommGetPending), one line per row.
inline std::string pendingText(occlComm_t comm) {
  std::vector<occlPendingWait_t> rows(64);
  int count = 0;
  if (occlCommGetPending(comm, rows.data(), static_cast<int>(rows.size()), &count) != occlSuccess)
    return "occlCommGetPending failed: " + std::string(occlGetLastError(comm));
  std::string text = std::to_string(count) + " pending:";
  for (int i = 0; i < std::min<int>(count, static_cast<int>(rows.size())); ++i) {
    const occlPendingWait_t& w = rows[static_cast<size_t>(i)];
    char id[24];
    std::snprintf(id, sizeof(id), "0x%llx", static_cast<unsigned long long>(w.collId));
    text += "\n  collId " + std::string(id) + " seq " + std::to_string(w.seq) + " peer " + std::to_string(w.peer) +
            ": " + occlWaitReasonString(w.reason) + " (peer submitted " + std::to_string(w.peerSubmitted) + ")";
  }
  return text;
}

// Waits at most `limit` for `stream` to drain, instead of cudaStreamSynchronize, which waits for
// good: a stream-ordered submission that never completes then fails the test with what `comm`
// still waits for. The caller aborts the communicators (occlCommAbort releases every stream
// waiting on a gate), so that the streams drain and the test ends.
inline void drainStream(cudaStream_t stream, occlComm_t comm, std::chrono::milliseconds limit,
                        const std::string& what) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const cudaError_t e = cudaStreamQuery(stream);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) checkCuda(e, what);
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error(what + ": the stream did not drain within " + std::to_string(limit.count()) +
                               " ms; " + pendingText(comm));
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// A RankIo's two host buffers mirrored in device memory, at the same offsets.
class DeviceIo {
 public:
  explicit DeviceIo(const RankIo& io) : firstBytes_(io.first.size()), secondBytes_(io.second.size()) {
    if (firstBytes_ > 0) checkCuda(cudaMalloc(&first_, firstBytes_), "cudaMalloc");
    if (secondBytes_ > 0) checkCuda(cudaMalloc(&second_, secondBytes_), "cudaMalloc");
    upload(io);
    send = translate(io, io.send);
    recv = translate(io, io.recv);
  }
  ~DeviceIo() {
    cudaFree(first_);
    cudaFree(second_);
  }
  DeviceIo(const DeviceIo&) = delete;
  DeviceIo& operator=(const DeviceIo&) = delete;

  void upload(const RankIo& io) {
    if (firstBytes_ > 0) checkCuda(cudaMemcpy(first_, io.first.data(), firstBytes_, cudaMemcpyHostToDevice), "upload");
    if (secondBytes_ > 0)
      checkCuda(cudaMemcpy(second_, io.second.data(), secondBytes_, cudaMemcpyHostToDevice), "upload");
    syncLegacyStream();
  }
  // Copies the device buffers back into `io`, so mismatch() checks what the GPU holds.
  void download(RankIo& io) const {
    if (firstBytes_ > 0) checkCuda(cudaMemcpy(io.first.data(), first_, firstBytes_, cudaMemcpyDeviceToHost), "download");
    if (secondBytes_ > 0)
      checkCuda(cudaMemcpy(io.second.data(), second_, secondBytes_, cudaMemcpyDeviceToHost), "download");
  }

  // The same copies ordered on `stream`, from and to pinned host buffers laid out as `io`'s two
  // (PinnedIo), so that the host enqueues them without waiting for the stream.
  void uploadOn(cudaStream_t stream, const std::byte* first, const std::byte* second) const {
    if (firstBytes_ > 0)
      checkCuda(cudaMemcpyAsync(first_, first, firstBytes_, cudaMemcpyHostToDevice, stream), "upload on stream");
    if (secondBytes_ > 0)
      checkCuda(cudaMemcpyAsync(second_, second, secondBytes_, cudaMemcpyHostToDevice, stream), "upload on stream");
  }
  void downloadOn(cudaStream_t stream, std::byte* first, std::byte* second) const {
    if (firstBytes_ > 0)
      checkCuda(cudaMemcpyAsync(first, first_, firstBytes_, cudaMemcpyDeviceToHost, stream), "download on stream");
    if (secondBytes_ > 0)
      checkCuda(cudaMemcpyAsync(second, second_, secondBytes_, cudaMemcpyDeviceToHost, stream), "download on stream");
  }
  // Fills both device buffers with 0xff bytes (NaN floats), so that data a collective read before
  // its input arrived shows in the result.
  void poisonOn(cudaStream_t stream) const {
    if (firstBytes_ > 0) checkCuda(cudaMemsetAsync(first_, 0xff, firstBytes_, stream), "cudaMemsetAsync");
    if (secondBytes_ > 0) checkCuda(cudaMemsetAsync(second_, 0xff, secondBytes_, stream), "cudaMemsetAsync");
  }

  void* send = nullptr;
  void* recv = nullptr;

 private:
  void* translate(const RankIo& io, const void* p) const {
    if (p == nullptr) return nullptr;
    auto at = [](const std::vector<std::byte>& v, const void* q) {
      return q >= static_cast<const void*>(v.data()) && q <= static_cast<const void*>(v.data() + v.size());
    };
    if (at(io.first, p)) return static_cast<char*>(first_) + (static_cast<const std::byte*>(p) - io.first.data());
    return static_cast<char*>(second_) + (static_cast<const std::byte*>(p) - io.second.data());
  }

  size_t firstBytes_, secondBytes_;
  void* first_ = nullptr;
  void* second_ = nullptr;
};

// Pinned host copies of a RankIo's two buffers: what stream-ordered copies read from (`in`, the
// rank's input) and write to (`out`, copied back into a RankIo for mismatch()).
class PinnedIo {
 public:
  explicit PinnedIo(const RankIo& io) : bytes_{io.first.size(), io.second.size()} {
    const std::vector<std::byte>* src[2] = {&io.first, &io.second};
    for (size_t k = 0; k < 2; ++k) {
      if (bytes_[k] == 0) continue;
      checkCuda(cudaMallocHost(reinterpret_cast<void**>(&in[k]), bytes_[k]), "cudaMallocHost");
      checkCuda(cudaMallocHost(reinterpret_cast<void**>(&out[k]), bytes_[k]), "cudaMallocHost");
      std::copy(src[k]->begin(), src[k]->end(), in[k]);
    }
  }
  ~PinnedIo() {
    for (size_t k = 0; k < 2; ++k) {
      cudaFreeHost(in[k]);
      cudaFreeHost(out[k]);
    }
  }
  PinnedIo(const PinnedIo&) = delete;
  PinnedIo& operator=(const PinnedIo&) = delete;

  // Overwrites `io`'s buffers with what `out` holds.
  void copyOutTo(RankIo& io) const {
    if (bytes_[0] > 0) std::copy(out[0], out[0] + bytes_[0], io.first.begin());
    if (bytes_[1] > 0) std::copy(out[1], out[1] + bytes_[1], io.second.begin());
  }

  std::byte* in[2] = {nullptr, nullptr};
  std::byte* out[2] = {nullptr, nullptr};

 private:
  size_t bytes_[2];
};

// n device ranks on GPU 0.
class Gpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (deviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  }
};

// Registers `s` under `collId` on every participating rank.
inline void registerCase(const GpuComms& g, const Spec& s, uint64_t collId) {
  for (int r = 0; r < g.size(); ++r) {
    if (!participates(s, r)) continue;
    const occlCollDesc_t d = descFor(s, r);
    expectOk(occlCollRegister(g[r], collId, &d), g[r], "occlCollRegister(" + describe(s) + ")");
  }
}

inline void deregisterCase(const GpuComms& g, const Spec& s, uint64_t collId) {
  for (int r = 0; r < g.size(); ++r)
    if (participates(s, r)) expectOk(occlCollDeregister(g[r], collId), g[r], "occlCollDeregister");
}

// Runs one case `repeats` times on device buffers and checks every receive buffer.
inline void runCase(const GpuComms& g, const Spec& s, int repeats = 1) {
  const int n = g.size();
  const uint64_t collId = nextCollId();
  registerCase(g, s, collId);
  std::vector<RankIo> io = prepare(s, n);
  std::vector<std::unique_ptr<DeviceIo>> dev;
  for (const RankIo& x : io) dev.push_back(std::make_unique<DeviceIo>(x));
  int participants = 0;
  for (int r = 0; r < n; ++r) participants += participates(s, r) ? 1 : 0;
  for (int rep = 0; rep < repeats; ++rep) {
    if (rep > 0)
      for (int r = 0; r < n; ++r) dev[static_cast<size_t>(r)]->upload(io[static_cast<size_t>(r)]);
    CallbackCounter counter;
    runRanks(n, [&](int r) {
      if (!participates(s, r)) return;
      const DeviceIo& d = *dev[static_cast<size_t>(r)];
      expectOk(occlSubmit(g[r], collId, d.send, d.recv, CallbackCounter::callback, counter.arg()), g[r], "occlSubmit");
    });
    if (!counter.waitFor(static_cast<size_t>(participants)))
      throw std::runtime_error(describe(s) + ": callbacks missing after 60 s");
    for (const auto& [id, status] : counter.fired())
      EXPECT_EQ(status, occlSuccess) << describe(s) << ": " << occlGetErrorString(status);
    std::vector<RankIo> got = prepare(s, n);
    for (int r = 0; r < n; ++r) {
      const auto i = static_cast<size_t>(r);
      dev[i]->download(got[i]);  // `got` expects what `io` expects; its buffers now hold the GPU's
      EXPECT_EQ(mismatch(s, r, got[i]), "");
    }
  }
  deregisterCase(g, s, collId);
}

}  // namespace occl::test
