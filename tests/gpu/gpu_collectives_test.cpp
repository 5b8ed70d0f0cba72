// The CUDA backend end to end: ranks as threads on one GPU (occlCommInitAll with devlist {0,...}),
// device buffers, results checked bit for bit with the host suite's cases (collective_cases.hpp):
// every type, dtype and op, several daemon blocks, bad buffers, relaunch after an idle quit, a
// torture of random orders, PreMulSum's scalars, eight ranks on one GPU. The stream-ordered and
// Fig. 1(c) tests are gpu_streams_test. Every test skips without a CUDA device, except
// NoDeviceGivesClearError, which runs only then.
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

#include "gpu_case.hpp"
#include "gpu_comms.hpp"
#include "support/ranks.hpp"
#include "support/collective_cases.hpp"

namespace occl::test {
namespace {

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
