// v-collectives between processes: four ranks as processes run AllToAllv on occlMemAlloc buffers
// registered with desc.sharedBuffers (the peer AllToAll, each rank taking its chunks straight from
// the others' buffers, mapped across processes), AllToAllv on the same buffers without it (the
// direct program through shm slots), AllGatherv, ReduceScatterv, Gatherv and Scatterv, with random blocks
// (tests/support/vector_cases.hpp) in a different random order on every rank, every byte of every
// receive buffer checked, gaps included.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "support/collective_cases.hpp"
#include "support/process_job.hpp"
#include "support/ranks.hpp"
#include "support/vector_cases.hpp"

namespace occl::test {
namespace {

constexpr int kRanks = 4;
constexpr int kRounds = 12;

struct VCase {
  Spec spec;
  int sharedBuffers;
  const char* algorithm;  // what the registration must run
};

std::vector<VCase> cases() {
  auto spec = [](int type, int dtype, int op, int root = 0) {
    Spec s;
    s.type = type;
    s.dtype = dtype;
    s.op = op;
    s.count = 5000;
    s.root = root;
    return s;
  };
  return {{spec(occlCollAllToAll, occlInt32, occlSum), 1, "peer"},
          {spec(occlCollAllToAll, occlBfloat16, occlSum), 0, "direct"},
          {spec(occlCollAllGather, occlFloat32, occlSum), 0, "ring"},
          {spec(occlCollReduceScatter, occlInt64, occlSum), 0, "ring"},
          {spec(occlCollGather, occlFloat16, occlSum, kRanks - 1), 0, "direct"},
          {spec(occlCollScatter, occlUint8, occlSum, 1), 0, "direct"}};
}

// A host buffer's copy in occlMemAlloc memory, at the same offsets.
struct Shared {
  void* data = nullptr;
  explicit Shared(const std::vector<std::byte>& host) {
    expectOk(occlMemAlloc(&data, std::max<size_t>(host.size(), 1)), nullptr, "occlMemAlloc");
    if (!host.empty()) std::memcpy(data, host.data(), host.size());
  }
  ~Shared() { occlMemFree(data); }
  Shared(const Shared&) = delete;
  Shared& operator=(const Shared&) = delete;
};

TEST(VectorProcessTest, FourProcessesRunEveryVCollectivePeerAndDirect) {
  std::vector<pid_t> pids = proc::spawnWithUniqueId("VectorProcessChild.DISABLED_Entry", "vector", kRanks);
  ASSERT_EQ(pids.size(), static_cast<size_t>(kRanks));
  const std::vector<int> codes = proc::reap(pids, std::chrono::seconds(240));
  for (size_t r = 0; r < codes.size(); ++r) EXPECT_EQ(codes[r], 0) << "rank " << r << " failed (exit code)";
}

TEST(VectorProcessChild, DISABLED_Entry) {
  ASSERT_NE(std::getenv("OCCL_MP_SCENARIO"), nullptr) << "run only as a child of VectorProcessTest";
  const int rank = proc::envInt("OCCL_MP_RANK", -1), nRanks = proc::envInt("OCCL_MP_NRANKS", 0);
  occlConfig_t cfg = testConfig();
  if (cfg.backend == occlBackendAuto) cfg.backend = occlBackendHost;  // plain host buffers below
  occlComm_t comm = proc::initRank(rank, nRanks, cfg);
  const std::vector<VCase> all = cases();
  for (size_t c = 0; c < all.size(); ++c) {
    occlCollDesc_t d = vectorDescFor(all[c].spec);
    d.sharedBuffers = all[c].sharedBuffers;
    expectOk(occlCollRegister(comm, 0x7100 + c, &d), comm, "register");
    const char* algorithm = nullptr;
    expectOk(occlCollGetAlgorithm(comm, 0x7100 + c, 0, &algorithm), comm, "algorithm");
    EXPECT_STREQ(algorithm, all[c].algorithm) << describe(all[c].spec);
  }
  std::mt19937 rng(77 + static_cast<uint32_t>(rank));
  for (int round = 0; round < kRounds; ++round) {
    std::vector<size_t> order(all.size());
    for (size_t c = 0; c < order.size(); ++c) order[c] = c;
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::vector<VecRankIo>> io(all.size());
    std::vector<std::unique_ptr<Shared>> first(all.size()), second(all.size());
    CallbackCounter done;
    for (size_t c : order) {
      Spec s = all[c].spec;
      s.inPlace = s.type != occlCollAllToAll && round % 2 == 1;
      io[c] = prepareVector(s, nRanks, 5000u * c + static_cast<uint64_t>(round));
      VecRankIo& mine = io[c][static_cast<size_t>(rank)];
      first[c] = std::make_unique<Shared>(mine.io.first);
      second[c] = std::make_unique<Shared>(mine.io.second);
      auto shared = [&](void* p) -> void* {
        const auto* b = static_cast<const std::byte*>(p);
        const std::vector<std::byte>& f = mine.io.first;
        if (b >= f.data() && b <= f.data() + f.size()) return static_cast<std::byte*>(first[c]->data) + (b - f.data());
        return static_cast<std::byte*>(second[c]->data) + (b - mine.io.second.data());
      };
      const occlVectors_t v = mine.vectors();
      expectOk(occlSubmitV(comm, 0x7100 + c, shared(mine.sendbuf), shared(mine.recvbuf), &v,
                           &CallbackCounter::callback, done.arg()),
               comm, "occlSubmitV " + describe(s));
    }
    ASSERT_TRUE(done.waitFor(all.size(), std::chrono::seconds(120))) << "round " << round;
    for (auto [id, status] : done.fired()) ASSERT_EQ(status, occlSuccess) << occlGetLastError(comm);
    for (size_t c = 0; c < all.size(); ++c) {
      Spec s = all[c].spec;
      s.inPlace = s.type != occlCollAllToAll && round % 2 == 1;
      RankIo& h = io[c][static_cast<size_t>(rank)].io;
      const bool inFirst = h.recv == static_cast<void*>(h.first.data());
      std::vector<std::byte>& host = inFirst ? h.first : h.second;
      if (!host.empty()) std::memcpy(host.data(), inFirst ? first[c]->data : second[c]->data, host.size());
      const std::string bad = mismatch(s, rank, h);
      ASSERT_TRUE(bad.empty()) << "round " << round << ": " << bad;
    }
  }
  expectOk(occlCommFinalize(comm), comm, "finalize");
  expectOk(occlCommDestroy(comm), nullptr, "destroy");
}

}  // namespace
}  // namespace occl::test
