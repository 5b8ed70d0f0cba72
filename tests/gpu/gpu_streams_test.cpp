// The CUDA backend with CUDA streams on one GPU: OCCL Fig. 1(c) (a device-wide synchronisation
// between submissions in opposite orders), an abort that fails a pending submission, and
// stream-ordered submission (occlSubmitOnStream) between the rank's own copies, tortured in random
// orders. Every test skips without a CUDA device.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpu_case.hpp"
#include "gpu_comms.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

// ---- OCCL Fig. 1(c): a device-wide synchronisation between submissions ----

// Two collectives A and B of one AllReduce case on two ranks of GPU 0, each rank's buffers in
// device memory: what both Fig. 1(c) tests submit in opposite orders and then check.
struct CrossedPair {
  explicit CrossedPair(GpuComms& comms) : g(comms) {
    s.count = 1 << 16;
    registerCase(g, s, a);
    registerCase(g, s, b);
    for (const RankIo& x : prepare(s, 2)) {
      devA.push_back(std::make_unique<DeviceIo>(x));
      devB.push_back(std::make_unique<DeviceIo>(x));
    }
  }
  ~CrossedPair() {
    deregisterCase(g, s, a);
    deregisterCase(g, s, b);
  }
  // Rank r's collectives in its order (rank 0: A then B, rank 1: B then A) and their buffers.
  uint64_t first(int r) const { return r == 0 ? a : b; }
  uint64_t second(int r) const { return r == 0 ? b : a; }
  const DeviceIo& firstIo(int r) const { return r == 0 ? *devA[static_cast<size_t>(r)] : *devB[static_cast<size_t>(r)]; }
  const DeviceIo& secondIo(int r) const { return r == 0 ? *devB[static_cast<size_t>(r)] : *devA[static_cast<size_t>(r)]; }
  void expectResults() const {
    for (int r = 0; r < 2; ++r)
      for (const auto* dev : {&devA, &devB}) {
        std::vector<RankIo> got = prepare(s, 2);
        (*dev)[static_cast<size_t>(r)]->download(got[static_cast<size_t>(r)]);
        EXPECT_EQ(mismatch(s, r, got[static_cast<size_t>(r)]), "");
      }
  }

  GpuComms& g;
  Spec s;
  const uint64_t a = nextCollId(), b = nextCollId();
  std::vector<std::unique_ptr<DeviceIo>> devA, devB;
};

// Rank 0 submits A then B, rank 1 B then A, and each calls cudaDeviceSynchronize after its first
// submission. Both daemons wait for a peer that is blocked in the synchronisation, which waits for
// the daemons: only the daemon's voluntary quit on being stuck lets the synchronisations return.
TEST_F(Gpu, Fig1cDeviceSynchronizeBetweenSubmissionsCompletes) {
  GpuComms g(2);
  CrossedPair pair(g);
  CallbackCounter counter;
  const auto start = std::chrono::steady_clock::now();
  runRanks(2, [&](int r) {
    expectOk(occlSubmit(g[r], pair.first(r), pair.firstIo(r).send, pair.firstIo(r).recv, CallbackCounter::callback,
                        counter.arg()),
             g[r], "occlSubmit");
    checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize on rank " + std::to_string(r));
    expectOk(occlSubmit(g[r], pair.second(r), pair.secondIo(r).send, pair.secondIo(r).recv, CallbackCounter::callback,
                        counter.arg()),
             g[r], "occlSubmit");
  });
  ASSERT_TRUE(counter.waitFor(4, std::chrono::seconds(30))) << "Fig. 1(c) did not complete within 30 s";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  RecordProperty("seconds", std::to_string(seconds));
  for (const auto& [id, status] : counter.fired()) EXPECT_EQ(status, occlSuccess);
  pair.expectResults();
}

// ---- occlCommAbort on the GPU ----

// Rank 1 never submits, so rank 0's ring AllReduce waits in the running kernel; occlCommAbort
// fails it with occlAborted. The daemon sees the abort in its copy of the flag in device memory,
// which the host writes with a copy beside the running kernel (Comm::raiseAbort), and the poison
// on the connectors fails rank 1's later submission with occlRemoteError instead of a hang.
TEST_F(Gpu, AbortFailsAPendingSubmissionAndThePeersLaterOne) {
  constexpr size_t kCount = 65536;
  GpuComms g(2);
  const uint64_t collId = nextCollId();
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = kCount;
  d.algorithm = "ring";  // the peer still waits for the aborted rank after the abort
  for (int r = 0; r < 2; ++r) expectOk(occlCollRegister(g[r], collId, &d), g[r], "occlCollRegister");
  float* bufs[2] = {nullptr, nullptr};
  for (float*& b : bufs) {
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&b), kCount * sizeof(float)), "cudaMalloc");
    checkCuda(cudaMemset(b, 0, kCount * sizeof(float)), "cudaMemset");
  }
  syncLegacyStream();
  CallbackCounter aborted, peer;
  expectOk(occlSubmit(g[0], collId, bufs[0], bufs[0], CallbackCounter::callback, aborted.arg()), g[0], "occlSubmit");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the kernel runs it and waits for rank 1
  EXPECT_TRUE(aborted.fired().empty());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(occlCommAbort(g[0]), occlSuccess);
  g.forget(0);
  ASSERT_TRUE(aborted.waitFor(1, std::chrono::seconds(10))) << "the callback did not fire after occlCommAbort";
  EXPECT_EQ(aborted.fired()[0].second, occlAborted);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  expectOk(occlSubmit(g[1], collId, bufs[1], bufs[1], CallbackCounter::callback, peer.arg()), g[1], "occlSubmit");
  ASSERT_TRUE(peer.waitFor(1, std::chrono::seconds(10))) << "the peer's collective hung instead of failing";
  EXPECT_EQ(peer.fired()[0].second, occlRemoteError);
  for (float* b : bufs) cudaFree(b);
}

// ---- Stream-ordered submission (occlSubmitOnStream, issue 41) ----

// Holds `stream` for `ms` milliseconds (a host function on it), so that what follows on the stream
// happens well after the host's submission returned.
void CUDART_CB holdStream(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(reinterpret_cast<intptr_t>(ms)));
}

// On each rank's own stream: a hold, the input copied in, the AllReduce (in place), the result
// copied out. A gate opened at submission would sum the garbage the buffer held before the copy
// in; a stream not held by the completion would copy out before the sum.
TEST_F(Gpu, StreamOrderedAllReduceBetweenCopies) {
  constexpr int kRanks = 2, kIters = 4;
  constexpr size_t kCount = 4099;
  GpuComms g(kRanks);
  const uint64_t collId = nextCollId();
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = kCount;
  for (int r = 0; r < kRanks; ++r) expectOk(occlCollRegister(g[r], collId, &d), g[r], "occlCollRegister");
  CallbackCounter counter;
  runRanks(kRanks, [&](int r) {
    checkCuda(cudaSetDevice(0), "cudaSetDevice");
    float *in = nullptr, *out = nullptr, *dev = nullptr;
    cudaStream_t stream = nullptr;
    checkCuda(cudaMallocHost(reinterpret_cast<void**>(&in), kCount * sizeof(float)), "cudaMallocHost");
    checkCuda(cudaMallocHost(reinterpret_cast<void**>(&out), kCount * sizeof(float)), "cudaMallocHost");
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&dev), kCount * sizeof(float)), "cudaMalloc");
    checkCuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    for (size_t i = 0; i < kCount; ++i) in[i] = inputValue(r, i);
    for (int iter = 0; iter < kIters; ++iter) {
      std::fill(out, out + kCount, -1.0f);
      checkCuda(cudaMemsetAsync(dev, 0xff, kCount * sizeof(float), stream), "cudaMemsetAsync");  // NaNs
      checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      checkCuda(cudaLaunchHostFunc(stream, holdStream, reinterpret_cast<void*>(intptr_t{20})), "cudaLaunchHostFunc");
      checkCuda(cudaMemcpyAsync(dev, in, kCount * sizeof(float), cudaMemcpyHostToDevice, stream), "copy in");
      expectOk(occlSubmitOnStream(g[r], collId, dev, dev, stream, CallbackCounter::callback, counter.arg()), g[r],
               "occlSubmitOnStream");
      checkCuda(cudaMemcpyAsync(out, dev, kCount * sizeof(float), cudaMemcpyDeviceToHost, stream), "copy out");
      checkCuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      for (size_t i = 0; i < kCount; ++i) {
        float want = 0;
        for (int q = 0; q < kRanks; ++q) want += inputValue(q, i);
        if (out[i] != want)
          throw std::runtime_error("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " element " +
                                   std::to_string(i) + ": " + std::to_string(out[i]) + ", expected " +
                                   std::to_string(want));
      }
    }
    cudaStreamDestroy(stream);
    cudaFree(dev);
    cudaFreeHost(in);
    cudaFreeHost(out);
  });
  ASSERT_TRUE(counter.waitFor(kRanks * kIters, std::chrono::seconds(30)));
  for (const auto& [id, status] : counter.fired()) EXPECT_EQ(status, occlSuccess);
}

// OCCL Fig. 1(c) with streams: rank 0 enqueues A on one stream and B on another, rank 1 B then A,
// and both call cudaDeviceSynchronize, which returns once every stream's wait was released (both
// collectives done on both ranks) and the daemons, idle, have quit.
TEST_F(Gpu, Fig1cOppositeOrdersOnStreamsThenDeviceSynchronize) {
  GpuComms g(2);
  CrossedPair pair(g);
  CallbackCounter counter;
  runRanks(2, [&](int r) {
    checkCuda(cudaSetDevice(0), "cudaSetDevice");
    cudaStream_t s1 = nullptr, s2 = nullptr;
    checkCuda(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    checkCuda(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    expectOk(occlSubmitOnStream(g[r], pair.first(r), pair.firstIo(r).send, pair.firstIo(r).recv, s1,
                                CallbackCounter::callback, counter.arg()),
             g[r], "occlSubmitOnStream");
    expectOk(occlSubmitOnStream(g[r], pair.second(r), pair.secondIo(r).send, pair.secondIo(r).recv, s2,
                                CallbackCounter::callback, counter.arg()),
             g[r], "occlSubmitOnStream");
    checkCuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize on rank " + std::to_string(r));
    cudaStreamDestroy(s1);
    cudaStreamDestroy(s2);
  });
  ASSERT_TRUE(counter.waitFor(4, std::chrono::seconds(30)));
  for (const auto& [id, status] : counter.fired()) EXPECT_EQ(status, occlSuccess);
  pair.expectResults();
}

// ---- Torture with streams: gates that open in a different order on every rank ----

// Four ranks, eight collectives of both dtype classes, each rank with four streams of its own.
// Stream k carries collectives k and k + 4, in that order, on every rank (two collectives of one
// stream in opposite orders on two ranks would be a cycle the streams themselves make, which no
// runtime can break); what differs per rank and iteration is the order in which the host enqueues
// the streams' work and how long each stream is held before it, so that the submissions' gates
// open in a different order on every rank. Per collective on its stream: a hold, the buffers
// poisoned, the input copied in, occlSubmitOnStream, the result copied out. The host never waits
// between enqueues (pinned copies only); each rank synchronises its streams once per iteration,
// then every byte is checked.
TEST_F(Gpu, TortureStreamOrderedGatesInRandomOrders) {
  constexpr int kRanks = 4, kColls = 8, kStreams = 4, kIterations = 6;
  constexpr std::chrono::milliseconds kDrainLimit{20000};  // an iteration's work takes ~0.1 s
  constexpr size_t kCounts[kColls] = {1, 1000, 4099, 65536, 100003, 262147, 5, 33};
  GpuComms g(kRanks);
  std::vector<Spec> specs(kColls);
  std::vector<uint64_t> ids(kColls);
  std::vector<std::vector<RankIo>> io(kColls);
  std::vector<std::vector<std::unique_ptr<DeviceIo>>> dev(kColls);
  std::vector<std::vector<std::unique_ptr<PinnedIo>>> pinned(kColls);
  for (int c = 0; c < kColls; ++c) {
    specs[c].count = kCounts[c];
    specs[c].dtype = c % 2 == 0 ? occlFloat32 : occlInt32;
    specs[c].inPlace = c % 3 == 0;
    ids[c] = nextCollId();
    registerCase(g, specs[c], ids[c]);
    io[c] = prepare(specs[c], kRanks);
    for (const RankIo& x : io[c]) {
      dev[c].push_back(std::make_unique<DeviceIo>(x));
      pinned[c].push_back(std::make_unique<PinnedIo>(x));
    }
  }
  CallbackCounter counter;
  const auto run = [&](int r) {
    const auto i = static_cast<size_t>(r);
    checkCuda(cudaSetDevice(0), "cudaSetDevice");
    // Destroyed however the rank ends: streams a failed run left would hold hardware queues into
    // the next (--gtest_repeat), whose daemons could then queue behind them.
    std::vector<cudaStream_t> streams(kStreams);
    const std::unique_ptr<std::vector<cudaStream_t>, void (*)(std::vector<cudaStream_t>*)> owned(
        &streams, [](std::vector<cudaStream_t>* v) {
          for (cudaStream_t st : *v)
            if (st != nullptr) cudaStreamDestroy(st);
        });
    for (cudaStream_t& st : streams)
      checkCuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    std::mt19937 rng(static_cast<unsigned>(r * 7919 + 17));
    for (int iter = 0; iter < kIterations; ++iter) {
      // Which stream enqueues next: each stream k twice (collective k, then k + kStreams), shuffled.
      std::vector<int> turns;
      for (int k = 0; k < kStreams; ++k) turns.insert(turns.end(), {k, k});
      std::shuffle(turns.begin(), turns.end(), rng);
      int enqueued[kStreams] = {};
      for (int k : turns) {
        const int c = k + kStreams * enqueued[k]++;
        cudaStream_t st = streams[static_cast<size_t>(k)];
        const auto holdMs = static_cast<intptr_t>(std::uniform_int_distribution<int>(0, 8)(rng));
        checkCuda(cudaLaunchHostFunc(st, holdStream, reinterpret_cast<void*>(holdMs)), "cudaLaunchHostFunc");
        const DeviceIo& d = *dev[c][i];
        const PinnedIo& p = *pinned[c][i];
        d.poisonOn(st);
        d.uploadOn(st, p.in[0], p.in[1]);
        expectOk(occlSubmitOnStream(g[r], ids[c], d.send, d.recv, st, CallbackCounter::callback, counter.arg()), g[r],
                 "occlSubmitOnStream");
        d.downloadOn(st, p.out[0], p.out[1]);
      }
      for (int k = 0; k < kStreams; ++k)
        drainStream(streams[static_cast<size_t>(k)], g[r], kDrainLimit,
                    "rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " stream " + std::to_string(k));
      for (int c = 0; c < kColls; ++c) {
        RankIo got = prepare(specs[c], kRanks)[i];
        pinned[c][i]->copyOutTo(got);
        const std::string bad = mismatch(specs[c], r, got);
        if (!bad.empty()) {
          // Whether the device buffers hold the same: tells a wrong result from a copy out that
          // had not landed when the stream said it had drained.
          RankIo onDevice = prepare(specs[c], kRanks)[i];
          dev[c][i]->download(onDevice);
          const std::string badOnDevice = mismatch(specs[c], r, onDevice);
          throw std::runtime_error("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " " +
                                   describe(specs[c]) + ": " + bad + "; the device buffers now: " +
                                   (badOnDevice.empty() ? "right" : badOnDevice));
        }
      }
    }
  };
  try {
    runRanks(kRanks, run);
  } catch (const std::exception& e) {
    // A rank's streams did not drain: abort every rank, which releases the streams' waits, so
    // that the test ends with the reason rather than hanging in the streams' teardown.
    for (int r = 0; r < kRanks; ++r) {
      occlCommAbort(g[r]);
      g.forget(r);
    }
    FAIL() << e.what();
  }
  ASSERT_TRUE(counter.waitFor(kRanks * kColls * kIterations, std::chrono::seconds(30)));
  for (const auto& [id, status] : counter.fired()) EXPECT_EQ(status, occlSuccess) << "collId " << id;
  for (int c = 0; c < kColls; ++c) deregisterCase(g, specs[c], ids[c]);
}

}  // namespace
}  // namespace occl::test
