// v-collectives (desc.vectorCounts, occlSubmitV): AllToAllv, AllGatherv and ReduceScatterv
// registered once, then submitted with random per-block counts (zeros and the maximum among them)
// and displacements (blocks shuffled, with gaps) in a different random order on every rank, in and
// out of place, every byte of every receive buffer checked, gaps included. Small connector slots
// make a block many tiles. Counts that disagree between ranks fail the submission, naming both
// lengths; bad arrays and registrations are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "occl/occl.h"
#include "occl/occl.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"
#include "support/refusals.hpp"
#include "support/vector_cases.hpp"

namespace occl::test {
namespace {

constexpr int kRanks = 4;
constexpr size_t kMax = 600;
// The int32 AllToAllv's most: 17 KiB a peer, above the 16 KiB up to which thread ranks run the
// direct AllToAll rather than the peer one (host/algorithms.cpp), so that both run here.
constexpr size_t kPeerAllToAllMax = 4352;

// Every dtype class (1, 2, 4 and 8 bytes; integers, floats, bfloat16, fp8), every op class on
// ReduceScatterv, the ring on two blocks, AllToAllv on one block and on three, Gatherv and Scatterv
// rooted at either end of `nRanks`.
std::vector<Spec> collectives(int nRanks) {
  std::vector<Spec> out;
  auto add = [&](int type, int dtype, int op, int nBlocks = 0, int root = 0, size_t count = kMax) {
    Spec s;
    s.type = type;
    s.dtype = dtype;
    s.op = op;
    s.count = count;
    s.nBlocks = nBlocks;
    s.root = root;
    out.push_back(s);
  };
  add(occlCollAllToAll, occlInt32, occlSum, 0, 0, kPeerAllToAllMax);
  add(occlCollAllToAll, occlBfloat16, occlSum, 3);
  add(occlCollAllToAll, occlFloat8e4m3, occlSum);
  add(occlCollAllGather, occlInt8, occlSum);
  add(occlCollAllGather, occlFloat64, occlSum, 2);
  add(occlCollReduceScatter, occlFloat32, occlSum);
  add(occlCollReduceScatter, occlInt64, occlMax, 2);
  add(occlCollReduceScatter, occlBfloat16, occlAvg);
  add(occlCollReduceScatter, occlUint8, occlMin);
  add(occlCollGather, occlFloat16, occlSum, 0, nRanks - 1);
  add(occlCollScatter, occlInt32, occlSum, 0, 0);
  add(occlCollScatter, occlFloat8e5m2, occlSum, 2, nRanks - 1);
  return out;
}

// Rounds of kPerColl submissions of every collective per rank in an order of its own on each rank;
// every receive buffer checked. Returns the submissions made per rank.
int runRandomVectors(int nRanks, int total, uint32_t seed, int daemonBlocks) {
  const std::vector<Spec> colls = collectives(nRanks);
  const int nColls = static_cast<int>(colls.size());
  constexpr int kPerColl = 3;
  const int rounds = (total + nColls * kPerColl - 1) / (nColls * kPerColl);
  std::vector<CallbackCounter> done(static_cast<size_t>(nRanks));
  occlConfig_t config = testConfig();
  config.daemonBlocks = daemonBlocks;
  config.connectorSlotBytes = 512;  // a block of 600 elements is up to 10 tiles
  CommGroup comms(nRanks, config);
  for (int r = 0; r < nRanks; ++r)
    for (int c = 0; c < nColls; ++c) {
      Spec spec = colls[static_cast<size_t>(c)];
      spec.nBlocks = std::min(spec.nBlocks, daemonBlocks);
      const occlCollDesc_t d = vectorDescFor(spec);
      expectOk(occlCollRegister(comms[r], 0x700u + static_cast<uint64_t>(c), &d), comms[r], "register");
      // Thread ranks with one block take an AllToAll's chunks from each other's inputs, where a
      // block holds more than 16 KiB (the int32 one); the 1-byte one runs direct.
      const char* algorithm = nullptr;
      expectOk(occlCollGetAlgorithm(comms[r], 0x700u + static_cast<uint64_t>(c), 0, &algorithm), comms[r], "algorithm");
      if (spec.type == occlCollAllToAll && nRanks > 1 && !onSimt()) {
        const bool peer = spec.nBlocks <= 1 && daemonBlocks == 1 && spec.count == kPeerAllToAllMax;
        EXPECT_STREQ(algorithm, peer ? "peer" : "direct") << describe(spec);
      }
    }
  int submitted = 0;
  for (int round = 0; round < rounds; ++round) {
    std::vector<Spec> specs;
    std::vector<std::vector<VecRankIo>> io;  // [run][rank]
    for (int c = 0; c < nColls; ++c)
      for (int j = 0; j < kPerColl; ++j) {
        Spec s = colls[static_cast<size_t>(c)];
        const uint64_t draw = seed + static_cast<uint64_t>((round * nColls + c) * kPerColl + j);
        s.inPlace = s.type != occlCollAllToAll && draw % 3 == 0;
        specs.push_back(s);
        io.push_back(prepareVector(s, nRanks, draw * 7919u));
      }
    runRanks(nRanks, [&](int r) {
      std::mt19937 rng(seed + static_cast<uint32_t>(round * nRanks + r));
      std::vector<int> order;
      for (int c = 0; c < nColls; ++c) order.insert(order.end(), kPerColl, c);
      std::shuffle(order.begin(), order.end(), rng);
      std::vector<int> next(static_cast<size_t>(nColls), 0);
      for (int c : order) {
        const size_t run = static_cast<size_t>(c * kPerColl + next[static_cast<size_t>(c)]++);
        VecRankIo& mine = io[run][static_cast<size_t>(r)];
        const occlVectors_t v = mine.vectors();
        expectOk(occlSubmitV(comms[r], 0x700u + static_cast<uint64_t>(c), mine.sendbuf, mine.recvbuf, &v,
                             &CallbackCounter::callback, done[static_cast<size_t>(r)].arg()),
                 comms[r], "occlSubmitV " + describe(specs[run]));
      }
      expectOk(occlCommWaitAll(comms[r], 60000), comms[r], "occlCommWaitAll");
    });
    submitted += nColls * kPerColl;
    for (int r = 0; r < nRanks; ++r) {
      CallbackCounter& mine = done[static_cast<size_t>(r)];
      EXPECT_TRUE(mine.waitFor(static_cast<size_t>(submitted), std::chrono::seconds(60)));
      for (auto [id, status] : mine.fired())
        EXPECT_EQ(status, occlSuccess) << "rank " << r << " collId 0x" << std::hex << id << ": " << occlGetLastError(comms[r]);
    }
    for (size_t run = 0; run < specs.size(); ++run)
      for (int r = 0; r < nRanks; ++r) {
        const std::string bad = mismatch(specs[run], r, io[run][static_cast<size_t>(r)].io);
        EXPECT_TRUE(bad.empty()) << nRanks << " ranks, round " << round << " run " << run << ": " << bad;
        if (!bad.empty()) return submitted;
      }
  }
  return submitted;
}

TEST(VectorCollectivesTest, RandomBlocksInRandomOrdersAreExact) {
  const int made = runRandomVectors(kRanks, onSimt() ? 100 : 500, 0xbeef, 3);
  EXPECT_GE(made, onSimt() ? 100 : 500);
}

// The matrix's rank counts: one rank (a self copy), two, odd ones, eight. One daemon block: thread
// ranks run AllToAllv on the peer program (the AllToAll of three blocks stays direct).
TEST(VectorCollectivesTest, EveryRankCountFromOneToEightIsExact) {
  for (int n : {1, 2, 3, 5, 8}) {
    const int made = runRandomVectors(n, onSimt() ? 27 : 54, 0xcafe + static_cast<uint32_t>(n), 1);
    EXPECT_GE(made, onSimt() ? 27 : 54) << n << " ranks";
  }
}

// The matrix's dtypes: every occlDataType_t on every v-collective (ReduceScatterv with each op class
// in turn), in and out of place, 3 ranks, one submission each, every byte checked.
TEST(VectorCollectivesTest, EveryDtypeOnEveryVCollectiveIsExact) {
  constexpr int n = 3;
  std::vector<CallbackCounter> done(n);
  CommGroup comms(n);
  std::vector<Spec> specs;
  for (int dtype = 0; dtype < occlNumTypes; ++dtype)
    for (int type : {occlCollAllToAll, occlCollAllGather, occlCollReduceScatter, occlCollGather, occlCollScatter})
      for (bool inPlace : {false, true}) {
        if (inPlace && type == occlCollAllToAll) continue;
        Spec s;
        s.type = type;
        s.dtype = dtype;
        s.op = type == occlCollReduceScatter ? (occlSum + dtype) % occlNumOps : occlSum;
        s.count = 300;
        s.inPlace = inPlace;
        s.root = dtype % n;  // Gatherv and Scatterv
        specs.push_back(s);
      }
  std::vector<std::vector<VecRankIo>> io;
  for (size_t c = 0; c < specs.size(); ++c) {
    io.push_back(prepareVector(specs[c], n, 31 * c + 7));
    for (int r = 0; r < n; ++r) {
      const occlCollDesc_t d = vectorDescFor(specs[c]);
      expectOk(occlCollRegister(comms[r], 0x7E00 + c, &d), comms[r], "register " + describe(specs[c]));
    }
  }
  runRanks(n, [&](int r) {
    for (size_t c = 0; c < specs.size(); ++c) {
      VecRankIo& mine = io[c][static_cast<size_t>(r)];
      const occlVectors_t v = mine.vectors();
      expectOk(occlSubmitV(comms[r], 0x7E00 + c, mine.sendbuf, mine.recvbuf, &v, &CallbackCounter::callback,
                           done[static_cast<size_t>(r)].arg()),
               comms[r], "occlSubmitV " + describe(specs[c]));
    }
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(done[static_cast<size_t>(r)].waitFor(specs.size(), std::chrono::seconds(60)));
    for (auto [id, status] : done[static_cast<size_t>(r)].fired()) EXPECT_EQ(status, occlSuccess) << occlGetLastError(comms[r]);
  }
  for (size_t c = 0; c < specs.size(); ++c)
    for (int r = 0; r < n; ++r) {
      const std::string bad = mismatch(specs[c], r, io[c][static_cast<size_t>(r)].io);
      EXPECT_TRUE(bad.empty()) << bad;
    }
}

// Rank 1 expects 7 elements from rank 0 where rank 0 sends 9: rank 1 fails the submission with
// occlInvalidUsage naming both lengths and never reads the block; a rank that completes holds
// exact data; rank 1's later submissions fail too (the collective stays failed).
TEST(VectorCollectivesTest, CountsThatDisagreeFailNamingBothLengths) {
  constexpr int n = 3;
  CallbackCounter done[n];
  std::vector<int32_t> send[n], recv[n];
  CommGroup comms(n);
  Spec s;
  s.type = occlCollAllToAll;
  s.dtype = occlInt32;
  s.count = 16;
  for (int r = 0; r < n; ++r) {
    const occlCollDesc_t d = vectorDescFor(s);
    expectOk(occlCollRegister(comms[r], 0x7A, &d), comms[r], "register");
    send[r].assign(n * 16, r * 100);
    recv[r].assign(n * 16, -1);
  }
  runRanks(n, [&](int r) {
    std::vector<size_t> counts(n, 9), displs{0, 16, 32};
    std::vector<size_t> recvCounts = counts;
    if (r == 1) recvCounts[0] = 7;
    const occlVectors_t v{counts.data(), displs.data(), recvCounts.data(), displs.data()};
    expectOk(occlSubmitV(comms[r], 0x7A, send[r].data(), recv[r].data(), &v, &CallbackCounter::callback, done[r].arg()),
             comms[r], "the disagreeing submission");
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(done[r].waitFor(1, std::chrono::seconds(60))) << "rank " << r;
    const occlResult_t status = done[r].fired()[0].second;
    const std::string why = occlGetLastError(comms[r]);
    if (r == 1) {
      EXPECT_EQ(status, occlInvalidUsage);
      EXPECT_NE(why.find("rank 0 sent 9 elements where this rank's blocks expect 7"), std::string::npos) << why;
      for (size_t i = 0; i < 16; ++i) EXPECT_EQ(recv[1][i], -1) << "rank 1 read the disagreeing block, element " << i;
    } else if (status == occlSuccess) {
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < 9; ++i) ASSERT_EQ(recv[r][q * 16 + i], q * 100) << "rank " << r << " block " << q;
    } else {
      EXPECT_EQ(status, occlInvalidUsage) << "rank " << r << ": " << why;
    }
  }
  std::vector<size_t> zeros(n, 0), displs{0, 16, 32};
  const occlVectors_t v{zeros.data(), displs.data(), zeros.data(), displs.data()};
  expectOk(occlSubmitV(comms[1], 0x7A, send[1].data(), recv[1].data(), &v, &CallbackCounter::callback, done[1].arg()),
           comms[1], "a later submission");
  ASSERT_TRUE(done[1].waitFor(2, std::chrono::seconds(60)));
  EXPECT_EQ(done[1].fired()[1].second, occlInvalidUsage);
}

// Every block empty on every rank: each submission completes and touches nothing.
TEST(VectorCollectivesTest, EmptyBlocksCompleteAndTouchNothing) {
  constexpr int n = 2;
  CallbackCounter done[n];
  std::vector<float> buf[n];
  CommGroup comms(n);
  for (int type : {occlCollAllToAll, occlCollAllGather, occlCollReduceScatter}) {
    Spec s;
    s.type = type;
    s.count = 8;
    const occlCollDesc_t d = vectorDescFor(s);
    for (int r = 0; r < n; ++r) expectOk(occlCollRegister(comms[r], 0x7B0u + type, &d), comms[r], "register");
  }
  for (int r = 0; r < n; ++r) buf[r].assign(32, 7.0f);
  runRanks(n, [&](int r) {
    const std::vector<size_t> zeros(n, 0), displs{0, 8};
    const occlVectors_t all{zeros.data(), displs.data(), zeros.data(), displs.data()};
    const occlVectors_t recvSide{nullptr, nullptr, zeros.data(), displs.data()};
    const occlVectors_t sendSide{zeros.data(), displs.data(), nullptr, nullptr};
    for (int k = 0; k < 3; ++k) {
      expectOk(occlSubmitV(comms[r], 0x7B0u + occlCollAllToAll, nullptr, nullptr, &all, &CallbackCounter::callback,
                           done[r].arg()),
               comms[r], "AllToAllv");
      expectOk(occlSubmitV(comms[r], 0x7B0u + occlCollAllGather, buf[r].data(), buf[r].data() + 16, &recvSide,
                           &CallbackCounter::callback, done[r].arg()),
               comms[r], "AllGatherv");
      expectOk(occlSubmitV(comms[r], 0x7B0u + occlCollReduceScatter, buf[r].data(), buf[r].data() + 16, &sendSide,
                           &CallbackCounter::callback, done[r].arg()),
               comms[r], "ReduceScatterv");
    }
  });
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(done[r].waitFor(9, std::chrono::seconds(60)));
    for (auto [id, status] : done[r].fired()) EXPECT_EQ(status, occlSuccess) << occlGetLastError(comms[r]);
    for (size_t i = 0; i < buf[r].size(); ++i) ASSERT_EQ(buf[r][i], 7.0f) << "rank " << r << " element " << i;
  }
}

TEST(VectorCollectivesTest, BadRegistrationsAndArraysAreRefusedByName) {
  CommGroup comms(2);
  occlComm_t c = comms[0];
  Spec s;
  s.type = occlCollAllReduce;
  s.count = 8;
  occlCollDesc_t d = vectorDescFor(s);
  const occlResult_t bad = occlInvalidArgument;
  EXPECT_OCCL_ERROR(occlCollRegister(c, 0x7C, &d), bad, c,
                    "desc.vectorCounts = 1 with desc.type allreduce: v-collectives are alltoall, allgather, reducescatter, "
                    "gather and scatter");
  d.type = occlCollAllToAll;
  d.algorithm = "direct";
  EXPECT_OCCL_ERROR(occlCollRegister(c, 0x7C, &d), bad, c, "desc.algorithm = \"direct\": a v-collective");
  d.algorithm = nullptr;
  d.variableCount = 1;
  EXPECT_OCCL_ERROR(occlCollRegister(c, 0x7C, &d), bad, c, "a v-collective's counts are per block already");
  d.variableCount = 0;
  d.vectorCounts = 2;
  EXPECT_OCCL_ERROR(occlCollRegister(c, 0x7C, &d), bad, c, "desc.vectorCounts = 2: expected 0 or 1");

  // Checked before anything goes out, so rank 0 alone registers and submits.
  d.vectorCounts = 1;
  expectOk(occlCollRegister(c, 0x7C, &d), c, "register AllToAllv");
  d.type = occlCollAllGather;
  expectOk(occlCollRegister(c, 0x7D, &d), c, "register AllGatherv");
  occlCollDesc_t plain;
  occlCollDescInit(&plain);
  plain.count = 8;
  expectOk(occlCollRegister(c, 0x7E, &plain), c, "register a plain AllReduce");
  std::vector<float> a(64), b(64);
  std::vector<size_t> counts{4, 4}, displs{0, 8}, over{4, 9}, overlapping{0, 2};
  occlVectors_t v{counts.data(), displs.data(), counts.data(), displs.data()};
  EXPECT_OCCL_ERROR(occlSubmit(c, 0x7C, a.data(), b.data(), nullptr, nullptr), occlInvalidUsage, c,
                    "collId 0x7c is a v-collective (desc.vectorCounts): submit it with occlSubmitV");
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7E, a.data(), b.data(), &v, nullptr, nullptr), occlInvalidUsage, c,
                    "occlSubmitV: collId 0x7e was registered without desc.vectorCounts");
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, a.data(), b.data(), nullptr, nullptr, nullptr), bad, c, "vectors is NULL");
  v.recvDispls = nullptr;
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, a.data(), b.data(), &v, nullptr, nullptr), bad, c,
                    "vectors->recvDispls is NULL: AllToAllv needs 2 of them");
  v.recvDispls = displs.data();
  v.sendCounts = over.data();
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, a.data(), b.data(), &v, nullptr, nullptr), bad, c,
                    "sendCounts[1] = 9: a block of AllToAllv holds at most desc.count = 8 elements");
  v.sendCounts = counts.data();
  v.recvDispls = overlapping.data();
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, a.data(), b.data(), &v, nullptr, nullptr), bad, c,
                    "recvDispls: block 0 (elements 0..3) overlaps block 1 (from 2)");
  v.recvDispls = displs.data();
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, a.data(), a.data() + 4, &v, nullptr, nullptr), bad, c,
                    "sendbuf and recvbuf overlap but are not in place (AllToAllv has no in-place form)");
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7C, nullptr, b.data(), &v, nullptr, nullptr), bad, c,
                    "sendbuf is NULL, and its blocks hold 12 elements");
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7D, a.data(), b.data(), &v, nullptr, nullptr), bad, c,
                    "vectors->sendCounts and sendDispls must be NULL for AllGatherv");
  const occlVectors_t gather{nullptr, nullptr, counts.data(), displs.data()};
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7D, b.data() + 2, b.data(), &gather, nullptr, nullptr), bad, c,
                    "in place: sendbuf == recvbuf + recvDispls[rank]");

  // Gatherv and Scatterv: every rank passes the counts, the root (rank 0 here) its displacements.
  d.type = occlCollGather;
  expectOk(occlCollRegister(c, 0x7F, &d), c, "register Gatherv");
  d.type = occlCollScatter;
  expectOk(occlCollRegister(c, 0x80, &d), c, "register Scatterv");
  const occlVectors_t gatherNoDispls{nullptr, nullptr, counts.data(), nullptr};
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x7F, a.data(), b.data(), &gatherNoDispls, nullptr, nullptr), bad, c,
                    "vectors->recvDispls is NULL: Gatherv needs 2 of them at the root");
  const occlVectors_t scatterNoCounts{nullptr, displs.data(), nullptr, nullptr};
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x80, a.data(), b.data(), &scatterNoCounts, nullptr, nullptr), bad, c,
                    "vectors->sendCounts is NULL: Scatterv needs 2 of them");
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x80, a.data(), b.data(), &v, nullptr, nullptr), bad, c,
                    "vectors->recvCounts and recvDispls must be NULL for Scatterv");
  const occlVectors_t scatter{counts.data(), displs.data(), nullptr, nullptr};
  EXPECT_OCCL_ERROR(occlSubmitV(c, 0x80, a.data(), a.data() + 2, &scatter, nullptr, nullptr), bad, c,
                    "in place: recvbuf == sendbuf + sendDispls[rank]");
}

// The C++ wrapper: submitV, and a refusal as an occl::Error.
TEST(VectorCollectivesTest, TheWrapperSubmitsV) {
  occlConfig_t config = testConfig();
  std::vector<occl::Comm> comms = occl::Comm::all(2, &config);
  std::vector<int32_t> send[2], recv[2];
  runRanks(2, [&](int r) {
    occl::Comm& c = comms[static_cast<size_t>(r)];
    Spec s;
    s.type = occlCollAllToAll;
    s.dtype = occlInt32;
    s.count = 8;
    c.registerCollective(0x7D1, vectorDescFor(s));
    // Rank r sends r + 1 elements to each rank; rank r's block for q holds 10 * r + q.
    const size_t n = static_cast<size_t>(r) + 1;
    send[r].clear();
    for (int q = 0; q < 2; ++q) send[r].insert(send[r].end(), n, 10 * r + q);
    recv[r].assign(3, -1);
    const std::vector<size_t> sendCounts{n, n}, sendDispls{0, n}, recvCounts{1, 2}, recvDispls{0, 1};
    const occlVectors_t v{sendCounts.data(), sendDispls.data(), recvCounts.data(), recvDispls.data()};
    c.submitV(0x7D1, send[r].data(), recv[r].data(), v, [](uint64_t, occlResult_t) {});
    c.waitAll(60000);
    EXPECT_THROW(c.submit(0x7D1, send[r].data(), recv[r].data(), [](uint64_t, occlResult_t) {}), occl::Error);
  });
  for (int r = 0; r < 2; ++r) EXPECT_EQ(recv[r], (std::vector<int32_t>{r, 10 + r, 10 + r})) << "rank " << r;
}

}  // namespace
}  // namespace occl::test
