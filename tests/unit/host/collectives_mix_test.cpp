// Collectives of every type submitted in a different random order on every rank, and the errors
// of registrations that cannot work: out-of-range fields, send/recv to self, and ranks that
// registered one collId differently (the later registrant fails, the waiting submission fails
// through its callback).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

// ---- Disordered mix ----

Spec mixSpec(int type, int dtype, int op, size_t count, bool inPlace, int root = 0, int peer = 0, int nBlocks = 0) {
  return Spec{type, dtype, op, count, inPlace, root, peer, nBlocks};
}

// Four ranks, two daemon blocks: every collective type, rings on one and two channels, AllToAll
// both with a relay (one block) and mixed direct/relay (two blocks), Send/Recv in both directions.
std::vector<Spec> mixSpecs() {
  return {
      mixSpec(occlCollAllReduce, occlFloat32, occlSum, 70001, false),
      mixSpec(occlCollAllReduce, occlInt64, occlAvg, 513, true, 0, 0, 1),
      mixSpec(occlCollAllGather, occlFloat16, occlSum, 1000, false),
      mixSpec(occlCollAllGather, occlUint32, occlSum, 1, true),
      mixSpec(occlCollReduceScatter, occlBfloat16, occlMax, 4097, false),
      mixSpec(occlCollReduceScatter, occlInt8, occlAvg, 33, true),
      mixSpec(occlCollReduce, occlInt32, occlProd, 999, false, 2),
      mixSpec(occlCollReduce, occlFloat64, occlMin, 0, false, 0),
      mixSpec(occlCollBroadcast, occlUint8, occlSum, 65537, true, 3),
      mixSpec(occlCollBroadcast, occlInt64, occlSum, 12345, false, 1),
      mixSpec(occlCollAllToAll, occlFloat64, occlSum, 300, false),
      mixSpec(occlCollAllToAll, occlInt8, occlSum, 7, false, 0, 0, 1),
      mixSpec(occlCollSend, occlFloat32, occlSum, 5000, false, 0, 3, 2),
      mixSpec(occlCollSend, occlInt32, occlSum, 17, false, 3, 0),
      mixSpec(occlCollSend, occlUint64, occlSum, 4096, false, 1, 2),
      mixSpec(occlCollSend, occlFloat16, occlSum, 1, false, 2, 1),
  };
}

using MixParam = std::tuple<unsigned, bool>;  // seed, preempt at every wait

class DisorderedMix : public ::testing::TestWithParam<MixParam> {};

TEST_P(DisorderedMix, EveryRankInItsOwnOrderCompletesWithCorrectData) {
  const auto [seed, forcePreempt] = GetParam();
  constexpr int kRanks = 4;
  occlConfig_t config = testConfig();
  config.daemonBlocks = 2;
  config.connectorSlotBytes = 4096;
  config.forcePreempt = forcePreempt ? 1 : 0;
  CommGroup comms(kRanks, config);
  std::vector<Case> cases;
  for (const Spec& s : mixSpecs()) cases.push_back(makeCase(s, kRanks));
  runRanks(kRanks, [&](int r) {
    std::vector<size_t> order(cases.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::mt19937 rng(seed * 131 + static_cast<unsigned>(r));
    std::shuffle(order.begin(), order.end(), rng);
    runRank(comms[r], r, cases, order);
  });
  checkCases(cases);
}

INSTANTIATE_TEST_SUITE_P(SeedsAndPreemption, DisorderedMix,
                         ::testing::Combine(::testing::Values(1u, 2u, 3u), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<MixParam>& info) {
                           return absl::StrCat("seed", std::get<0>(info.param),
                                               std::get<1>(info.param) ? "_forcePreempt" : "");
                         });

// Fields a collective does not use may differ between ranks: the op of an AllGather, the root of
// an AllReduce, the op of the two ends of a Send/Recv.
TEST(CollectiveFields, IgnoredFieldsNeedNotMatch) {
  CommGroup comms(2);
  std::vector<Case> cases;
  cases.push_back(makeCase(mixSpec(occlCollAllGather, occlInt32, occlSum, 100, false), 2));
  cases.push_back(makeCase(mixSpec(occlCollAllReduce, occlInt32, occlMax, 100, false), 2));
  cases.push_back(makeCase(mixSpec(occlCollSend, occlInt32, occlSum, 100, false, 1, 0), 2));
  runRanks(2, [&](int r) {
    CallbackCounter done;
    for (Case& c : cases) {
      occlCollDesc_t d = descFor(c.spec, r);
      if (c.spec.type != occlCollAllReduce) d.op = r == 0 ? 99 : -7;
      if (c.spec.type == occlCollAllReduce) d.root = r == 0 ? 5 : -1;
      expectOk(occlCollRegister(comms[r], c.collId, &d), comms[r], "register " + describe(c.spec));
      RankIo& io = c.io[static_cast<size_t>(r)];
      expectOk(occlSubmit(comms[r], c.collId, io.send, io.recv, &CallbackCounter::callback, done.arg()), comms[r], "submit");
    }
    ASSERT_TRUE(done.waitFor(cases.size()));
    for (const auto& fired : done.fired()) EXPECT_EQ(fired.second, occlSuccess);
  });
  checkCases(cases);
}

// ---- Invalid registrations ----

occlCollDesc_t makeDesc(int type, int root = 0) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = type;
  d.count = 16;
  d.root = root;
  return d;
}

void expectRejected(occlComm_t comm, occlCollDesc_t d, const std::string& message) {
  static uint64_t id = 0xE0000;
  EXPECT_EQ(occlCollRegister(comm, ++id, &d), occlInvalidArgument) << message;
  const std::string got = occlGetLastError(comm);
  EXPECT_NE(got.find(message), std::string::npos) << "got \"" << got << "\", expected \"" << message << "\"";
}

TEST(CollectiveErrors, InvalidDescriptionsNameTheFieldAndRange) {
  CommGroup comms(4);  // registration is local: a rejected one never reaches a peer
  expectRejected(comms[0], makeDesc(occlCollReduce, 4), "desc.root = 4: expected the root rank of reduce in 0..3");
  expectRejected(comms[0], makeDesc(occlCollBroadcast, -1), "desc.root = -1: expected the root rank of broadcast in 0..3");
  expectRejected(comms[2], makeDesc(occlCollSend, 2), "desc.root = 2 is this rank: send/recv needs a peer");
  expectRejected(comms[1], makeDesc(occlCollRecv, 1), "desc.root = 1 is this rank: send/recv needs a peer");
  expectRejected(comms[0], makeDesc(occlCollSend, 7), "desc.root = 7: expected the receiving peer of send in 0..3");
  expectRejected(comms[0], makeDesc(occlCollRecv, -2), "desc.root = -2: expected the sending peer of recv in 0..3");
  occlCollDesc_t negative = makeDesc(occlCollReduceScatter);
  negative.op = -1;
  expectRejected(comms[0], negative, "desc.op = -1: expected an occlRedOp_t (0..4) for reducescatter");
  // Past the built-in ops, a PreMulSum handle this communicator never made.
  occlCollDesc_t unknown = makeDesc(occlCollReduceScatter);
  unknown.op = occlNumOps;
  expectRejected(comms[0], unknown,
                 "desc.op = 5: expected an occlRedOp_t (0..4) or a live PreMulSum op of this communicator "
                 "(occlRedOpCreatePreMulSum) for reducescatter");
  for (int dtype : {-1, int{occlNumTypes}}) {
    occlCollDesc_t d = makeDesc(occlCollAllGather);
    d.datatype = dtype;
    expectRejected(comms[0], d, "desc.datatype = " + std::to_string(dtype) + ": expected an occlDataType_t (0..11)");
  }
  expectRejected(comms[0], makeDesc(occlNumCollTypes),
                 absl::StrFormat("desc.type = %d: expected an occlCollType_t (0..%d)", occlNumCollTypes,
                                 occlNumCollTypes - 1));
  occlCollDesc_t blocks = makeDesc(occlCollAllToAll);
  blocks.nBlocks = 2;
  expectRejected(comms[0], blocks, "desc.nBlocks = 2 exceeds config.daemonBlocks = 1");
}

// Rank 0 registers and submits first, so it waits on rank 1; rank 1 then registers another count.
// Roots are chosen so that rank 0 receives (it cannot finish alone).
TEST(CollectiveErrors, CountMismatchFailsTheLaterRegistrantAndTheWaitingSubmission) {
  CommGroup comms(2);
  uint64_t id = 0xF0000;
  for (int type : {occlCollAllReduce, occlCollAllGather, occlCollReduceScatter, occlCollReduce, occlCollBroadcast,
                   occlCollAllToAll, occlCollRecv}) {
    SCOPED_TRACE(type == occlCollRecv ? "sendrecv" : caseName(type));
    ++id;
    occlCollDesc_t first = makeDesc(type, type == occlCollBroadcast || type == occlCollRecv ? 1 : 0);
    first.count = 1000;
    std::vector<std::byte> send(64 * 1024), recv(64 * 1024);
    CallbackCounter done;
    ASSERT_EQ(occlCollRegister(comms[0], id, &first), occlSuccess) << occlGetLastError(comms[0]);
    ASSERT_EQ(occlSubmit(comms[0], id, send.data(), recv.data(), &CallbackCounter::callback, done.arg()), occlSuccess);

    occlCollDesc_t later = type == occlCollRecv ? makeDesc(occlCollSend, 0) : first;
    later.count = 1001;
    EXPECT_EQ(occlCollRegister(comms[1], id, &later), occlInvalidUsage);
    const std::string message = occlGetLastError(comms[1]);
    EXPECT_NE(message.find("rank 0 registered it differently"), std::string::npos) << message;
    EXPECT_NE(message.find("count=1001"), std::string::npos) << message;

    ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(20))) << "rank 0's submission never completed";
    EXPECT_EQ(done.fired()[0].second, occlInvalidUsage);
    EXPECT_EQ(occlCollDeregister(comms[0], id), occlSuccess);
  }
}

// Three ranks: rank 1 disagrees; rank 2 sees it on its connector, and rank 0, which only talks to
// ranks that agree with it, learns it from rank 2's poisoned connector.
TEST(CollectiveErrors, CountMismatchReachesRanksThatAgree) {
  CommGroup comms(3);
  constexpr uint64_t kId = 0xF1000;
  occlCollDesc_t d = makeDesc(occlCollAllReduce);
  d.count = 4096;
  std::vector<float> buf0(4096), buf2(4096);
  CallbackCounter done0, done2;
  ASSERT_EQ(occlCollRegister(comms[0], kId, &d), occlSuccess);
  ASSERT_EQ(occlCollRegister(comms[2], kId, &d), occlSuccess);
  ASSERT_EQ(occlSubmit(comms[0], kId, buf0.data(), buf0.data(), &CallbackCounter::callback, done0.arg()), occlSuccess);
  ASSERT_EQ(occlSubmit(comms[2], kId, buf2.data(), buf2.data(), &CallbackCounter::callback, done2.arg()), occlSuccess);
  d.count = 4095;
  EXPECT_EQ(occlCollRegister(comms[1], kId, &d), occlInvalidUsage);
  ASSERT_TRUE(done0.waitFor(1, std::chrono::seconds(20)));
  ASSERT_TRUE(done2.waitFor(1, std::chrono::seconds(20)));
  EXPECT_EQ(done0.fired()[0].second, occlInvalidUsage);
  EXPECT_EQ(done2.fired()[0].second, occlInvalidUsage);
}

}  // namespace
}  // namespace occl::test
