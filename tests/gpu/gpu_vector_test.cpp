// v-collectives on the CUDA backend (desc.vectorCounts, occlSubmitV): AllToAllv, AllGatherv,
// ReduceScatterv, Gatherv and Scatterv on 4 ranks of GPU 0 with random blocks (tests/support/vector_cases.hpp), in and
// out of place, device buffers mirrored from the host cases at the same offsets, every byte of
// every receive buffer checked, gaps included. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "gpu_comms.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"
#include "support/vector_cases.hpp"

namespace occl::test {
namespace {

// A host buffer's mirror in device memory.
struct Mirror {
  std::byte* device = nullptr;
  explicit Mirror(const std::vector<std::byte>& host) {
    checkCuda(cudaMalloc(reinterpret_cast<void**>(&device), std::max<size_t>(host.size(), 1)), "cudaMalloc");
    if (!host.empty()) checkCuda(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
  }
  ~Mirror() { cudaFree(device); }
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  // The device address of host pointer `p` into `host` (nullptr stays nullptr).
  void* at(const std::vector<std::byte>& host, const void* p) const {
    if (p == nullptr) return nullptr;
    return device + (static_cast<const std::byte*>(p) - host.data());
  }
  bool holds(const std::vector<std::byte>& host, const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return p != nullptr && b >= host.data() && b <= host.data() + host.size();
  }
};

TEST(GpuVector, RandomBlocksOfEveryVCollectiveAreExact) {
  if (deviceCount() == 0) GTEST_SKIP() << "no CUDA device";
  constexpr int kRanks = 4;
  GpuComms g(kRanks);
  std::vector<Spec> specs;
  for (int type : {occlCollAllToAll, occlCollAllGather, occlCollReduceScatter, occlCollGather, occlCollScatter})
    for (int dtype : {occlFloat32, occlBfloat16, occlInt8}) {
      Spec s;
      s.type = type;
      s.dtype = dtype;
      s.root = dtype % kRanks;  // Gatherv and Scatterv
      s.count = 70000;  // several tiles and parts
      specs.push_back(s);
    }
  for (size_t c = 0; c < specs.size(); ++c)
    for (int r = 0; r < kRanks; ++r) {
      const occlCollDesc_t d = vectorDescFor(specs[c]);
      expectOk(occlCollRegister(g[r], 0x7000 + c, &d), g[r], "occlCollRegister");
    }
  for (int run = 0; run < 4; ++run)
    for (size_t c = 0; c < specs.size(); ++c) {
      Spec s = specs[c];
      s.inPlace = s.type != occlCollAllToAll && run % 2 == 1;
      std::vector<VecRankIo> io = prepareVector(s, kRanks, 1000 * c + run);
      std::vector<std::unique_ptr<Mirror>> first, second;
      for (int r = 0; r < kRanks; ++r) {
        first.push_back(std::make_unique<Mirror>(io[r].io.first));
        second.push_back(std::make_unique<Mirror>(io[r].io.second));
      }
      CallbackCounter done;
      runRanks(kRanks, [&](int r) {
        const VecRankIo& v = io[r];
        auto device = [&](void* p) {
          return first[r]->holds(v.io.first, p) ? first[r]->at(v.io.first, p) : second[r]->at(v.io.second, p);
        };
        const occlVectors_t vectors = v.vectors();
        expectOk(occlSubmitV(g[r], 0x7000 + c, device(v.sendbuf), device(v.recvbuf), &vectors,
                             &CallbackCounter::callback, done.arg()),
                 g[r], "occlSubmitV " + describe(s));
      });
      ASSERT_TRUE(done.waitFor(kRanks, std::chrono::seconds(120)));
      for (auto [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << describe(s);
      for (int r = 0; r < kRanks; ++r) {
        RankIo& h = io[r].io;
        const bool inFirst = h.recv == static_cast<void*>(h.first.data());
        std::vector<std::byte>& host = inFirst ? h.first : h.second;
        checkCuda(cudaMemcpy(host.data(), inFirst ? first[r]->device : second[r]->device, host.size(),
                             cudaMemcpyDeviceToHost),
                  "download");
        const std::string bad = mismatch(s, r, h);
        ASSERT_TRUE(bad.empty()) << "run " << run << ": " << bad;
      }
    }
}

}  // namespace
}  // namespace occl::test
