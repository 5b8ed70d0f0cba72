// The Program validator (ir_loader/validate.hpp) on programs built by hand and by the generators:
// peers and directions, the slot counts a program needs (minConnectorSlots against an oracle that
// runs its tiles), deadlock with unbounded connectors, the wait graph's limit, where avg divides,
// and the peer AllReduce's notices.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "occl/occl.h"
#include "support/msccl_ir_files.hpp"

namespace occl::ir {
namespace {

using namespace test;

// A hand-built program, as the generators produce them (no source lines).
Program twoRankRing() {
  Program p;
  p.name = "gen";
  p.nRanks = 2;
  p.nChunksPerLoop = 2;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    RankProgram& rank = p.ranks[r];
    rank.inputChunks = rank.outputChunks = 2;
    BlockProgram b;
    b.sendPeer = b.recvPeer = 1 - r;
    b.steps = {makeStep(OpType::Send, r), makeStep(OpType::RecvReduceCopySend, 1 - r), makeStep(OpType::Recv, r)};
    rank.blocks.push_back(b);
  }
  return p;
}

TEST(ValidateProgram, AcceptsAndRejectsGeneratedPrograms) {
  Program p = twoRankRing();
  EXPECT_TRUE(validateProgram(p).empty()) << formatErrors(validateProgram(p), "gen");
  p.ranks[1].blocks[0].steps.pop_back();
  std::vector<LoadError> errors = validateProgram(p);
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].line, 0);
  EXPECT_EQ(errors[0].element, "<gpu id=0>/<tb id=0>/<step s=1>");
  EXPECT_NE(formatError(errors[0]).find("<gpu id=0>/<tb id=0>/<step s=1>: send #2 to rank 1"), std::string::npos);

  p = twoRankRing();
  p.ranks.pop_back();
  EXPECT_FALSE(validateProgram(p).empty());
  p = twoRankRing();
  p.ranks[0].blocks[0].steps[0].dstOff = 7;  // a send's destination is the peer's business
  EXPECT_TRUE(validateProgram(p).empty());
  p.ranks[0].blocks[0].steps[2].dstOff = 7;
  EXPECT_FALSE(validateProgram(p).empty());
}

// Steps that name their own peers (the direct AllToAll): each (peer, direction) still belongs to
// one block, peers are range-checked, and sends and receives still pair up per connection.
TEST(ValidateProgram, StepPeers) {
  const Program direct = makeAllToAll(4, 2);
  ASSERT_TRUE(validateProgram(direct).empty()) << formatErrors(validateProgram(direct), "direct");
  EXPECT_NE(summarize(direct).find("rank 0: 2 threadblocks, 7 steps, chunks i=4 o=4 s=0; connections (peer,channel,dir): "
                                   "(1,0,send) (3,0,send) (3,0,recv) (1,0,recv) (2,0,send) (2,0,recv)"),
            std::string::npos)
      << summarize(direct);

  Program p = direct;  // block 1 of rank 0 also sends to rank 1, which block 0 already does
  p.ranks[0].blocks[1].steps[0].sendPeer = 1;
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=0>/<tb id=1>", "send peer 1 on channel 0 is already used by <gpu id=0>/<tb id=0>"));
  p = direct;
  p.ranks[2].blocks[0].steps[3].recvPeer = 2;  // block 0: the copy, two sends, two receives
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=2>/<tb id=0>/<step s=3>", "step recv peer must not be the rank itself (2)"));
  p = direct;
  p.ranks[2].blocks[0].steps[1].sendPeer = 9;
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=2>/<tb id=0>/<step s=1>", "step send peer must be -1 or in 0..3, got 9"));
  p = direct;  // rank 3 never receives what rank 2 sends it
  auto& steps = p.ranks[3].blocks[0].steps;
  steps.erase(steps.begin() + 3);  // its receive from rank 2 (distance 1)
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=2>/<tb id=0>/<step s=1>", "sends to rank 3 on channel 0, but no threadblock of rank 3 receives from rank 2"));
}

// Every generator output passes validation, and where a generator marks avg's division agrees
// with what the replay infers (so IR programs and generated ones divide at the same places).
void expectValidGenerated(const Program& generated, const std::string& what) {
  const std::vector<LoadError> errors = validateProgram(generated);
  ASSERT_TRUE(errors.empty()) << what << ":\n" << formatErrors(errors, what);
  EXPECT_LE(minConnectorSlots(generated), 2) << what << ": more than the runtime's minimum connectorSlots";
  EXPECT_TRUE(SlotsMatchExecution(generated)) << what;
  Program inferred = generated;
  ASSERT_TRUE(markPostOps(inferred)) << what;
  for (size_t r = 0; r < generated.ranks.size(); ++r)
    for (size_t b = 0; b < generated.ranks[r].blocks.size(); ++b)
      for (size_t s = 0; s < generated.ranks[r].blocks[b].steps.size(); ++s)
        EXPECT_EQ(inferred.ranks[r].blocks[b].steps[s].postOp, generated.ranks[r].blocks[b].steps[s].postOp)
            << what << " " << stepElement(static_cast<int32_t>(r), static_cast<int32_t>(b), static_cast<int32_t>(s));
}

TEST(ValidateProgram, GeneratorsAreValidAndMarkTheSamePostOps) {
  // A lone rank only copies: valid, with nothing to divide.
  for (const Program& single : {makeRingAllReduce(1, 2), makeRingAllGather(1, 2), makeRingReduceScatter(1, 2),
                                makeChainReduce(1, 2, 0), makeChainBroadcast(1, 2, 0), makeAllToAll(1, 1)})
    EXPECT_TRUE(validateProgram(single).empty()) << collName(single.coll) << ":\n" << formatErrors(validateProgram(single), "1 rank");
  for (int n = 2; n <= 9; ++n) {
    for (int c = 1; c <= 3; ++c) {
      const std::string shape = std::to_string(n) + " ranks, " + std::to_string(c) + " channels";
      expectValidGenerated(makeRingAllReduce(n, c), "ring allreduce, " + shape);
      expectValidGenerated(makeRingAllGather(n, c), "ring allgather, " + shape);
      expectValidGenerated(makeRingReduceScatter(n, c), "ring reduce_scatter, " + shape);
      for (int root : {0, n / 2, n - 1}) {
        expectValidGenerated(makeChainReduce(n, c, root), "chain reduce root " + std::to_string(root) + ", " + shape);
        expectValidGenerated(makeChainBroadcast(n, c, root), "chain broadcast root " + std::to_string(root) + ", " + shape);
      }
      expectValidGenerated(makeSendRecv(n, c, 0, n - 1), "sendrecv 0->last, " + shape);
      expectValidGenerated(makeSendRecv(n, c, n - 1, 0), "sendrecv last->0, " + shape);
    }
    expectValidGenerated(makeDirectAllReduce(n), "direct allreduce, " + std::to_string(n) + " ranks");
    for (int blocks = 1; blocks <= n; ++blocks)
      expectValidGenerated(makeAllToAll(n, blocks), "alltoall " + std::to_string(n) + " ranks, " + std::to_string(blocks) + " blocks");
  }
}

TEST(ValidateProgram, GeneratedSlotCounts) {
  // Rings forward a held chunk with fused steps (rrs, rrcs, rcs), so they need 2 slots from 3
  // ranks on (AllGather and ReduceScatter), AllReduce from 2 (its rrcs). Chains, the direct
  // AllToAll and AllReduce and Send/Recv move one chunk per connection per tile, so capacity
  // never binds.
  for (int c = 1; c <= 2; ++c) {
    EXPECT_EQ(minConnectorSlots(makeRingAllReduce(2, c)), 2);
    EXPECT_EQ(minConnectorSlots(makeRingAllReduce(5, c)), 2);
    EXPECT_EQ(minConnectorSlots(makeRingAllGather(2, c)), 1);
    EXPECT_EQ(minConnectorSlots(makeRingAllGather(3, c)), 2);
    EXPECT_EQ(minConnectorSlots(makeRingReduceScatter(2, c)), 1);
    EXPECT_EQ(minConnectorSlots(makeRingReduceScatter(3, c)), 2);
    EXPECT_EQ(minConnectorSlots(makeChainReduce(5, c, 2)), 1);
    EXPECT_EQ(minConnectorSlots(makeChainBroadcast(5, c, 2)), 1);
    EXPECT_EQ(minConnectorSlots(makeSendRecv(5, c, 1, 3)), 1);
  }
  EXPECT_EQ(minConnectorSlots(makeAllToAll(6, 1)), 1);
  EXPECT_EQ(minConnectorSlots(makeDirectAllReduce(6)), 1);
  EXPECT_EQ(minConnectorSlots(makeAllToAll(6, 5)), 1);
}

// The peer AllReduce's steps are not MSCCL-IR (validateProgram's data-flow check does not model
// peer access): its protocol is checked here, the data it computes by allreduce_test.
TEST(PeerAllReduce, EveryRankPostsTwoNoticesToEachPeerAndReleasesTwoFromEach) {
  for (int n = 2; n <= 9; ++n) {
    const Program p = makePeerAllReduce(n);
    EXPECT_TRUE(p.peerReads);
    EXPECT_EQ(p.minConnectorSlots, static_cast<int32_t>(kPeerNotices));
    EXPECT_EQ(p.nChunksPerLoop, n);
    EXPECT_TRUE(p.raggedChunksAllowed && p.inPlace && p.outOfPlace);
    ASSERT_EQ(p.ranks.size(), static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      const std::string where = std::to_string(n) + " ranks, rank " + std::to_string(r);
      ASSERT_EQ(p.ranks[r].blocks.size(), 1u) << where;
      const BlockProgram& b = p.ranks[r].blocks[0];
      std::vector<int32_t> others;
      for (int q = 0; q < n; ++q)
        if (q != r) others.push_back(q);
      // Receive connectors in rank order: the order PeerReduce folds the peers' inputs in.
      EXPECT_EQ(connectionPeers(b, false), others) << where;
      EXPECT_EQ(connectionPeers(b, true), others) << where;
      std::vector<int> posted(static_cast<size_t>(n)), released(static_cast<size_t>(n));
      int reduces = 0;
      for (const Step& st : b.steps) {
        switch (st.op) {
          case OpType::PeerPost: ++posted[static_cast<size_t>(st.sendPeer)]; break;
          case OpType::PeerRelease:
            EXPECT_EQ(posted[static_cast<size_t>(st.recvPeer)], 2) << where;  // "done with yours" went out first
            EXPECT_EQ(reduces, 1) << where;
            ++released[static_cast<size_t>(st.recvPeer)];
            break;
          case OpType::PeerReduce:
            // Slice r of every input into slice r of every output, the final value (avg divides
            // here), after the addresses went out and before "done with yours" did.
            EXPECT_EQ(st.srcBuf, BufferKind::Input) << where;
            EXPECT_EQ(st.srcOff, r) << where;
            EXPECT_EQ(st.dstBuf, BufferKind::Output) << where;
            EXPECT_EQ(st.dstOff, r) << where;
            EXPECT_TRUE(st.postOp) << where;
            for (int32_t q : others) EXPECT_EQ(posted[static_cast<size_t>(q)], 1) << where;
            ++reduces;
            break;
          default: ADD_FAILURE() << where << ": unexpected op " << opName(st.op);
        }
      }
      EXPECT_EQ(reduces, 1) << where;
      for (int32_t q : others) {
        EXPECT_EQ(posted[static_cast<size_t>(q)], static_cast<int>(kPeerNotices)) << where << ", peer " << q;
        EXPECT_EQ(released[static_cast<size_t>(q)], 1) << where << ", peer " << q;
      }
      EXPECT_EQ(posted[static_cast<size_t>(r)] + released[static_cast<size_t>(r)], 0) << where;
    }
  }
}

// Two ranks with one block each, both peers the other rank: rank r runs ops[r], each step
// moving `count` chunks of a `count`-chunk buffer.
Program twoRankProgram(const std::vector<OpType>& ops0, const std::vector<OpType>& ops1, int32_t count) {
  Program p;
  p.name = "pair";
  p.nRanks = 2;
  p.nChunksPerLoop = count;
  p.ranks.resize(2);
  for (int r = 0; r < 2; ++r) {
    RankProgram& rank = p.ranks[r];
    rank.inputChunks = rank.outputChunks = count;
    BlockProgram b;
    b.sendPeer = b.recvPeer = 1 - r;
    for (OpType op : r == 0 ? ops0 : ops1) {
      b.steps.push_back(makeStep(op, 0));
      b.steps.back().count = count;
    }
    rank.blocks.push_back(b);
  }
  return p;
}

// Each rank sends c chunks to the other before it receives any: the first receive can only start
// once both have sent everything, so each connector must hold all c at once.
TEST(ValidateProgram, SendsAheadOfReceivesNeedASlotPerChunk) {
  for (int32_t c = 1; c <= 6; ++c) {
    const Program oneStep = twoRankProgram({OpType::Send, OpType::Recv}, {OpType::Send, OpType::Recv}, c);
    ASSERT_TRUE(validateProgram(oneStep).empty()) << formatErrors(validateProgram(oneStep), "pair");
    EXPECT_EQ(minConnectorSlots(oneStep), c);
    EXPECT_TRUE(SlotsMatchExecution(oneStep)) << "cnt=" << c;

    const std::vector<OpType> sendsThenRecvs = [&] {
      std::vector<OpType> ops(static_cast<size_t>(c), OpType::Send);
      ops.insert(ops.end(), static_cast<size_t>(c), OpType::Recv);
      return ops;
    }();
    const Program manySteps = twoRankProgram(sendsThenRecvs, sendsThenRecvs, 1);
    ASSERT_TRUE(validateProgram(manySteps).empty()) << formatErrors(validateProgram(manySteps), "pair");
    EXPECT_EQ(minConnectorSlots(manySteps), c);
    EXPECT_TRUE(SlotsMatchExecution(manySteps)) << c << " steps";
  }
}

// A cnt=c send matched with a cnt=c receive runs chunk by chunk: the receiver drains chunk k
// before the sender needs room for chunk k+1, so one slot is enough however large c is (a
// model where a send waits for the whole receiving step would see a cycle here).
TEST(ValidateProgram, MultiChunkTransfersNeedOneSlotUnlessFused) {
  for (int32_t c = 1; c <= 5; ++c) {
    const Program oneWay = twoRankProgram({OpType::Send}, {OpType::Recv}, c);
    ASSERT_TRUE(validateProgram(oneWay).empty()) << formatErrors(validateProgram(oneWay), "one way");
    EXPECT_EQ(minConnectorSlots(oneWay), 1);
    const Program pingPong = twoRankProgram({OpType::Send, OpType::Recv}, {OpType::Recv, OpType::Send}, c);
    EXPECT_EQ(minConnectorSlots(pingPong), 1);
    EXPECT_TRUE(SlotsMatchExecution(pingPong)) << "cnt=" << c;
  }
  // Fused: rrcs receives a chunk and needs room to forward it at once, and the peer's connector
  // is still full of the chunk the peer's own rrcs is holding.
  const Program ring = twoRankRing();
  EXPECT_EQ(minConnectorSlots(ring), 2);
  EXPECT_TRUE(SlotsMatchExecution(ring));
}

// Deadlock with unbounded connectors is still a validation error, reported by step; no slot
// count helps.
TEST(ValidateProgram, RejectsDeadlockWithUnboundedConnectors) {
  const Program p = twoRankProgram({OpType::Recv, OpType::Send}, {OpType::Recv, OpType::Send}, 3);
  const std::vector<LoadError> errors = validateProgram(p);
  EXPECT_TRUE(HasError(errors, 0, "<step s=", "deadlock: 4 steps wait on each other"));
  EXPECT_TRUE(HasError(errors, 0, "", "<gpu id=0>/<tb id=0>/<step s=0>"));
  EXPECT_TRUE(HasError(errors, 0, "", "<gpu id=1>/<tb id=0>/<step s=1>"));
  EXPECT_EQ(minConnectorSlots(p), 0);
  EXPECT_FALSE(runsToCompletion(p, 1024, 1));
}

TEST(ValidateProgram, RefusesWaitGraphsPastTheNodeLimit) {
  // 2 ranks x 33 steps x 65536 chunks: 4325376 chunk steps, past the 4194304 accepted.
  const Program p = twoRankProgram(std::vector<OpType>(33, OpType::Send), std::vector<OpType>(33, OpType::Recv), 65536);
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<algo>",
                       "one tile has 4325376 chunk steps (the cnt of every send or receive, 1 for each other step), "
                       "more than the 4194304 the deadlock check accepts"));
  EXPECT_EQ(minConnectorSlots(p), 0);
}

}  // namespace
}  // namespace occl::ir
