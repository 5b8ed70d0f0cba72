// The CUDA backend end to end: ranks as threads on one GPU (occlCommInitAll with devlist {0,...}),
// device buffers, results checked bit for bit with the host suite's cases (collective_cases.hpp).
// Every test skips without a CUDA device, except NoDeviceGivesClearError, which runs only then.
//
// Buffers are filled before a submission and read after its callback with the legacy default
// stream, then that stream is synchronised: occlSubmit has no stream argument, so the data a
// collective reads must be in place when it is submitted. The stream-ordered tests
// (occlSubmitOnStream) order their copies on the rank's own stream instead.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gpu_comms.hpp"
#include "support/ranks.hpp"
#include "support/collective_cases.hpp"

namespace occl::test {
namespace {

// Makes host-side copies visible to the daemon, whose kernels run on non-blocking streams.
void syncLegacyStream() { checkCuda(cudaStreamSynchronize(cudaStreamLegacy), "cudaStreamSynchronize"); }

uint64_t nextCollId() {
  static std::atomic<uint64_t> next{0x6000};
  return next++;
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
void registerCase(const GpuComms& g, const Spec& s, uint64_t collId) {
  for (int r = 0; r < g.size(); ++r) {
    if (!participates(s, r)) continue;
    const occlCollDesc_t d = descFor(s, r);
    expectOk(occlCollRegister(g[r], collId, &d), g[r], "occlCollRegister(" + describe(s) + ")");
  }
}

void deregisterCase(const GpuComms& g, const Spec& s, uint64_t collId) {
  for (int r = 0; r < g.size(); ++r)
    if (participates(s, r)) expectOk(occlCollDeregister(g[r], collId), g[r], "occlCollDeregister");
}

// Runs one case `repeats` times on device buffers and checks every receive buffer.
void runCase(const GpuComms& g, const Spec& s, int repeats = 1) {
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

// ---- Without a device ----

TEST(GpuNoDevice, NoDeviceGivesClearError) {
  if (deviceCount() > 0) GTEST_SKIP() << "a CUDA device is present";
  std::vector<occlComm_t> comms(2, nullptr);
  const int devlist[] = {0, 0};
  occlConfig_t config = testConfig();
  EXPECT_EQ(occlCommInitAll(comms.data(), 2, devlist, &config), occlUnhandledCudaError);
  EXPECT_NE(std::string(occlGetLastError(nullptr)).find("no CUDA device"), std::string::npos) << occlGetLastError(nullptr);
  EXPECT_EQ(comms[0], nullptr);
  config.backend = occlBackendCuda;
  EXPECT_EQ(occlCommInitAll(comms.data(), 2, nullptr, &config), occlUnhandledCudaError);
}

// ---- AllReduce, bit-exact ----

class GpuAllReduce : public Gpu, public ::testing::WithParamInterface<int> {};

TEST_P(GpuAllReduce, Float32SumEveryCountInAndOutOfPlace) {
  GpuComms g(GetParam());
  for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1023}, (size_t{1} << 20) + 3}) {
    for (bool inPlace : {false, true}) {
      Spec s;
      s.count = count;
      s.inPlace = inPlace;
      SCOPED_TRACE(describe(s));
      runCase(g, s);
    }
  }
}

TEST_P(GpuAllReduce, EveryDatatypeAndOp) {
  GpuComms g(GetParam());
  for (int dtype = 0; dtype < occlNumTypes; ++dtype) {
    for (int op = 0; op < occlNumOps; ++op) {
      Spec s;
      s.dtype = dtype;
      s.op = op;
      s.count = 4099;
      SCOPED_TRACE(describe(s));
      runCase(g, s);
    }
  }
}

// Several daemon blocks per rank: cross-block dependencies, concurrent CQ pushes and a quit
// vote with more than one voter.
TEST_P(GpuAllReduce, FourDaemonBlocks) {
  occlConfig_t config = testConfig();
  config.daemonBlocks = 4;
  GpuComms g(GetParam(), config);
  for (size_t count : {size_t{1023}, (size_t{1} << 20) + 3}) {
    Spec s;
    s.count = count;
    SCOPED_TRACE(describe(s));
    runCase(g, s, /*repeats=*/3);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, GpuAllReduce, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return "Ranks" + std::to_string(p.param); });

// ---- The other collectives ----

class GpuCollectives : public Gpu, public ::testing::WithParamInterface<int> {};

TEST_P(GpuCollectives, EveryTypeInAndOutOfPlace) {
  const int type = GetParam();
  GpuComms g(4);
  for (size_t count : {size_t{1}, size_t{1023}, (size_t{1} << 16) + 5}) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !hasInPlace(type)) continue;
      Spec s;
      s.type = type;
      s.count = count;
      s.inPlace = inPlace;
      s.root = 1;
      s.peer = 3;
      SCOPED_TRACE(describe(s));
      runCase(g, s);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GpuCollectives,
                         ::testing::Values(occlCollAllGather, occlCollReduceScatter, occlCollReduce, occlCollBroadcast,
                                           occlCollAllToAll, occlCollSend, occlCollGather, occlCollScatter),
                         [](const ::testing::TestParamInfo<int>& p) { return std::string(caseName(p.param)); });

// ---- Buffers the daemon cannot reach ----

TEST_F(Gpu, PlainHostBufferIsRejected) {
  int pageable = 0;
  checkCuda(cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, 0), "cudaDeviceGetAttribute");
  if (pageable != 0) GTEST_SKIP() << "device 0 reads pageable host memory: plain host buffers are valid";
  GpuComms g(1);
  Spec s;
  s.count = 16;
  const uint64_t id = nextCollId();
  registerCase(g, s, id);
  std::vector<float> host(16);
  EXPECT_EQ(occlSubmit(g[0], id, host.data(), host.data(), nullptr, nullptr), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(g[0])).find("cannot access"), std::string::npos) << occlGetLastError(g[0]);
  deregisterCase(g, s, id);
  // A PreMulSum scalar the daemon reads at every run (occlScalarDevice) is checked at registration.
  float scalar = 2.0f;
  occlRedOp_t op;
  expectOk(occlRedOpCreatePreMulSum(&op, &scalar, occlFloat32, occlScalarDevice, g[0]), g[0], "create");
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 16;
  d.op = op;
  EXPECT_EQ(occlCollRegister(g[0], nextCollId(), &d), occlInvalidArgument);
  EXPECT_NE(std::string(occlGetLastError(g[0])).find("the PreMulSum op's scalar (occlScalarDevice)"), std::string::npos)
      << occlGetLastError(g[0]);
}

// A communicator with a CUDA rank takes the GPU's auto slot size (host/config.hpp).
TEST_F(Gpu, AutoSlotSizeIsTheGpus) {
  occlConfig_t config = testConfig();
  if (config.connectorSlotBytes != 0) GTEST_SKIP() << "OCCL_CONN_SLOT_BYTES is set in this environment";
  GpuComms g(2, config);
  for (int r = 0; r < 2; ++r) {
    occlConfig_t c{};
    ASSERT_EQ(occlCommGetConfig(g[r], &c), occlSuccess) << occlGetLastError(g[r]);
    EXPECT_EQ(c.connectorSlotBytes, size_t{1024} * 1024) << "rank " << r;
  }
}

// ---- Quit and relaunch ----

// The daemon quits after idleQuitUs without work; the next submission must relaunch it.
TEST_F(Gpu, RelaunchesAfterIdleQuit) {
  occlConfig_t config = testConfig();
  config.idleQuitUs = 1000;
  GpuComms g(2, config);
  Spec s;
  s.count = 1023;
  for (int round = 0; round < 3; ++round) {
    runCase(g, s);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// ---- Torture: 8 AllReduces submitted in a different order on every rank, 20 times ----

TEST_F(Gpu, TortureEightAllReducesInRandomOrders) {
  constexpr int kRanks = 4, kColls = 8, kIterations = 20;
  constexpr size_t kCounts[kColls] = {1, 1000, 4099, 65536, 100003, 262147, size_t{1} << 20, 5};
  GpuComms g(kRanks);
  std::vector<Spec> specs(kColls);
  std::vector<uint64_t> ids(kColls);
  std::vector<std::vector<RankIo>> io(kColls);
  std::vector<std::vector<std::unique_ptr<DeviceIo>>> dev(kColls);
  for (int c = 0; c < kColls; ++c) {
    specs[c].count = kCounts[c];
    specs[c].dtype = c % 2 == 0 ? occlFloat32 : occlInt32;
    ids[c] = nextCollId();
    registerCase(g, specs[c], ids[c]);
    io[c] = prepare(specs[c], kRanks);
    for (const RankIo& x : io[c]) dev[c].push_back(std::make_unique<DeviceIo>(x));
  }
  for (int iter = 0; iter < kIterations; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    for (int c = 0; c < kColls; ++c)
      for (int r = 0; r < kRanks; ++r) dev[c][static_cast<size_t>(r)]->upload(io[c][static_cast<size_t>(r)]);
    CallbackCounter counter;
    runRanks(kRanks, [&](int r) {
      std::vector<int> order(kColls);
      std::iota(order.begin(), order.end(), 0);
      std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(iter * 131 + r * 7919)));
      for (int c : order) {
        const DeviceIo& d = *dev[c][static_cast<size_t>(r)];
        expectOk(occlSubmit(g[r], ids[c], d.send, d.recv, CallbackCounter::callback, counter.arg()), g[r], "occlSubmit");
      }
    });
    ASSERT_TRUE(counter.waitFor(kRanks * kColls)) << "callbacks missing after 60 s";
    for (const auto& [id, status] : counter.fired()) ASSERT_EQ(status, occlSuccess) << "collId " << id;
    for (int c = 0; c < kColls; ++c) {
      std::vector<RankIo> got = prepare(specs[c], kRanks);
      for (int r = 0; r < kRanks; ++r) {
        const auto i = static_cast<size_t>(r);
        dev[c][i]->download(got[i]);
        ASSERT_EQ(mismatch(specs[c], r, got[i]), "");
      }
    }
  }
  for (int c = 0; c < kColls; ++c) deregisterCase(g, specs[c], ids[c]);
}

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
  runRanks(kRanks, [&](int r) {
    const auto i = static_cast<size_t>(r);
    checkCuda(cudaSetDevice(0), "cudaSetDevice");
    std::vector<cudaStream_t> streams(kStreams);
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
      for (cudaStream_t st : streams) checkCuda(cudaStreamSynchronize(st), "cudaStreamSynchronize");
      for (int c = 0; c < kColls; ++c) {
        RankIo got = prepare(specs[c], kRanks)[i];
        pinned[c][i]->copyOutTo(got);
        const std::string bad = mismatch(specs[c], r, got);
        if (!bad.empty())
          throw std::runtime_error("rank " + std::to_string(r) + " iteration " + std::to_string(iter) + " " +
                                   describe(specs[c]) + ": " + bad);
      }
    }
    for (cudaStream_t st : streams) cudaStreamDestroy(st);
  });
  ASSERT_TRUE(counter.waitFor(kRanks * kColls * kIterations, std::chrono::seconds(30)));
  for (const auto& [id, status] : counter.fired()) EXPECT_EQ(status, occlSuccess) << "collId " << id;
  for (int c = 0; c < kColls; ++c) deregisterCase(g, specs[c], ids[c]);
}

// ---- PreMulSum on the GPU: each rank's scalar, by value and by device address ----

// An AllReduce of `count` elements of T on 4 ranks: rank r's input is (i + r) % 3 - 1 and its
// scalar 2 or -1 (1 or -1 for e5m2); every order of the sum is exact. By address, the scalar sits
// in device memory and is changed between two submissions.
template <typename T>
void preMulSumOnGpu(occlScalarResidence_t residence) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 65537;
  const auto dtype = static_cast<occlDataType_t>(kDtypeOf<T>);
  GpuComms g(kRanks);
  const uint64_t collId = nextCollId();
  std::vector<int64_t> scalars(kRanks);
  for (int r = 0; r < kRanks; ++r) scalars[r] = r % 2 == 0 ? (dtype == occlFloat8e5m2 ? 1 : 2) : -1;
  std::vector<T*> dSend(kRanks), dRecv(kRanks), dScalar(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    std::vector<T> in(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = fromInt<T>(static_cast<int64_t>((i + r) % 3) - 1);
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&dSend[r]), kCount * sizeof(T)), "cudaMalloc");
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&dRecv[r]), kCount * sizeof(T)), "cudaMalloc");
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&dScalar[r]), sizeof(T)), "cudaMalloc");
    checkCuda(cudaMemcpy(dSend[r], in.data(), kCount * sizeof(T), cudaMemcpyHostToDevice), "upload");
    const T s = fromInt<T>(scalars[r]);
    checkCuda(cudaMemcpy(dScalar[r], &s, sizeof(T), cudaMemcpyHostToDevice), "upload scalar");
    T host = s;
    void* where = residence == occlScalarDevice ? static_cast<void*>(dScalar[r]) : static_cast<void*>(&host);
    occlRedOp_t op;
    expectOk(occlRedOpCreatePreMulSum(&op, where, dtype, residence, g[r]), g[r], "occlRedOpCreatePreMulSum");
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kCount;
    d.datatype = dtype;
    d.op = op;
    expectOk(occlCollRegister(g[r], collId, &d), g[r], "occlCollRegister");
  }
  for (int round = 0; round < 2; ++round) {
    CallbackCounter counter;
    runRanks(kRanks, [&](int r) {
      expectOk(occlSubmit(g[r], collId, dSend[r], dRecv[r], CallbackCounter::callback, counter.arg()), g[r], "occlSubmit");
    });
    ASSERT_TRUE(counter.waitFor(kRanks));
    for (int r = 0; r < kRanks; ++r) {
      std::vector<T> out(kCount);
      checkCuda(cudaMemcpy(out.data(), dRecv[r], kCount * sizeof(T), cudaMemcpyDeviceToHost), "download");
      for (size_t i = 0; i < kCount; ++i) {
        int64_t want = 0;
        for (int q = 0; q < kRanks; ++q) want += scalars[q] * (static_cast<int64_t>((i + q) % 3) - 1);
        const T w = fromInt<T>(want);
        ASSERT_EQ(std::memcmp(&out[i], &w, sizeof(T)), 0) << dtypeName(dtype) << " round " << round << " rank " << r << " element " << i;
      }
    }
    if (residence != occlScalarDevice) break;
    for (int r = 0; r < kRanks; ++r) {  // a new scalar between submissions: -1 and 1 swap signs
      scalars[r] = -scalars[r];
      const T s = fromInt<T>(scalars[r]);
      checkCuda(cudaMemcpy(dScalar[r], &s, sizeof(T), cudaMemcpyHostToDevice), "upload scalar");
    }
  }
  for (int r = 0; r < kRanks; ++r) {
    expectOk(occlCollDeregister(g[r], collId), g[r], "occlCollDeregister");
    cudaFree(dSend[r]);
    cudaFree(dRecv[r]);
    cudaFree(dScalar[r]);
  }
}

TEST_F(Gpu, PreMulSumEveryRanksOwnScalar) {
  preMulSumOnGpu<float>(occlScalarHostImmediate);
  preMulSumOnGpu<BFloat16>(occlScalarHostImmediate);
  preMulSumOnGpu<Fp8E4M3>(occlScalarHostImmediate);
  preMulSumOnGpu<Fp8E5M2>(occlScalarHostImmediate);
  preMulSumOnGpu<float>(occlScalarDevice);
}

// ---- Eight ranks on one GPU: eight persistent kernels resident together ----

// An AllReduce of `count` floats on `ranks` ranks of GPU 0, `repeats` times out of place, then once
// in place.
void outOfPlaceThenInPlace(int ranks, size_t count, int repeats) {
  GpuComms g(ranks);
  Spec s;
  s.count = count;
  runCase(g, s, repeats);
  s.inPlace = true;
  runCase(g, s);
}

TEST_F(Gpu, EightRanksOnOneGpu) { outOfPlaceThenInPlace(8, 65537, 3); }

// ---- Small enough for compute-sanitizer (tools/gpu/run_gpu_suite.sh filters on this name) ----

TEST_F(Gpu, SanitizerSmoke) { outOfPlaceThenInPlace(2, 1023, 2); }

}  // namespace
}  // namespace occl::test
