// Writing programs as MSCCL-IR (occl-ir emit): every generated program reads back as the same
// steps, the all-pairs AllReduce is what its comment says, the writer refuses what MSCCL-IR cannot
// say, and the emitted fixtures under tests/data/msccl-ir are what the generators write today.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"

namespace occl::ir {
namespace {

const std::string kDataDir = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Program reloaded(const Program& p, const std::string& what) {
  Result<std::string> xml = writeMscclIr(p);
  if (!xml.ok()) {
    ADD_FAILURE() << what << ": " << xml.status().message;
    return {};
  }
  LoadResult r = loadMscclIrString(xml.value(), what);
  if (!r.ok()) {
    ADD_FAILURE() << what << " does not load back:\n" << formatErrors(r.errors, what) << xml.value();
    return {};
  }
  EXPECT_TRUE(r.warnings.empty()) << what << ":\n" << formatWarnings(r.warnings, what);
  return *r.program;
}

// Everything the executor runs: the program's shape, and per step its op, buffers, offsets,
// count, dependency, the peers it uses and where avg divides. Generated programs may split ragged
// chunks; a loaded one never does (MSCCL-IR has no way to say it).
void expectSameProgram(const Program& want, const Program& got, const std::string& what) {
  EXPECT_EQ(got.name, want.name) << what;
  EXPECT_EQ(got.coll, want.coll) << what;
  EXPECT_EQ(got.nRanks, want.nRanks) << what;
  EXPECT_EQ(got.nChannels, want.nChannels) << what;
  EXPECT_EQ(got.nChunksPerLoop, want.nChunksPerLoop) << what;
  EXPECT_EQ(got.inPlace, want.inPlace) << what;
  EXPECT_EQ(got.outOfPlace, want.outOfPlace) << what;
  EXPECT_EQ(got.minConnectorSlots, minConnectorSlots(want)) << what;
  EXPECT_FALSE(got.raggedChunksAllowed) << what;
  ASSERT_EQ(got.ranks.size(), want.ranks.size()) << what;
  for (size_t r = 0; r < want.ranks.size(); ++r) {
    const RankProgram &w = want.ranks[r], &g = got.ranks[r];
    EXPECT_EQ(g.inputChunks, w.inputChunks) << what << " rank " << r;
    EXPECT_EQ(g.outputChunks, w.outputChunks) << what << " rank " << r;
    EXPECT_EQ(g.scratchChunks, w.scratchChunks) << what << " rank " << r;
    ASSERT_EQ(g.blocks.size(), w.blocks.size()) << what << " rank " << r;
    for (size_t b = 0; b < w.blocks.size(); ++b) {
      const BlockProgram &wb = w.blocks[b], &gb = g.blocks[b];
      const std::string where = what + " " + blockElement(static_cast<int32_t>(r), static_cast<int32_t>(b));
      EXPECT_EQ(gb.channel, wb.channel) << where;
      EXPECT_EQ(connectionPeers(gb, true), connectionPeers(wb, true)) << where;
      EXPECT_EQ(connectionPeers(gb, false), connectionPeers(wb, false)) << where;
      ASSERT_EQ(gb.steps.size(), wb.steps.size()) << where;
      for (size_t s = 0; s < wb.steps.size(); ++s) {
        const Step &ws = wb.steps[s], &gs = gb.steps[s];
        const std::string at = absl::StrFormat("%s step %d", where, s);
        EXPECT_EQ(gs.op, ws.op) << at;
        EXPECT_EQ(gs.srcBuf, ws.srcBuf) << at;
        EXPECT_EQ(gs.dstBuf, ws.dstBuf) << at;
        EXPECT_EQ(gs.srcOff, ws.srcOff) << at;
        EXPECT_EQ(gs.dstOff, ws.dstOff) << at;
        EXPECT_EQ(gs.count, ws.count) << at;
        EXPECT_EQ(gs.depBlock, ws.depBlock) << at;
        EXPECT_EQ(gs.depStep, ws.depStep) << at;
        EXPECT_EQ(gs.hasDep, ws.hasDep) << at;
        EXPECT_EQ(gs.postOp, ws.postOp) << at;
        if (stepUsesSendConnector(ws.op)) {
          EXPECT_EQ(sendPeerOf(gb, gs), sendPeerOf(wb, ws)) << at;
        }
        if (stepUsesRecvConnector(ws.op)) {
          EXPECT_EQ(recvPeerOf(gb, gs), recvPeerOf(wb, ws)) << at;
        }
      }
    }
  }
}

TEST(IrEmit, GeneratedProgramsReadBackAsTheSameSteps) {
  for (int n = 1; n <= 8; ++n) {
    for (int c = 1; c <= 3; ++c) {
      const std::string shape = absl::StrFormat("%d ranks, %d channels", n, c);
      for (const Program& p : {makeRingAllReduce(n, c), makeRingAllGather(n, c), makeRingReduceScatter(n, c)})
        expectSameProgram(p, reloaded(p, "ring " + shape), std::string(collName(p.coll)) + " " + shape);
      for (int root : {0, n - 1}) {
        for (const Program& p : {makeChainReduce(n, c, root), makeChainBroadcast(n, c, root)})
          expectSameProgram(p, reloaded(p, "chain " + shape), absl::StrFormat("%s root %d, %s", collName(p.coll), root, shape));
      }
    }
    const Program a2a = makeAllToAll(n, n - 1);  // one peer per block
    expectSameProgram(a2a, reloaded(a2a, "alltoall"), absl::StrFormat("alltoall %d ranks", n));
  }
}

// The all-pairs AllReduce: n threadblocks per rank, and a connection carries n chunks before its
// first receive, so it needs n slots (MSCCLang's allreduce_allpairs needs the same). Its postOps
// are the ones the loader infers for any MSCCL-IR program.
TEST(IrEmit, AllPairsAllReduce) {
  for (int n = 2; n <= 8; ++n) {
    const Program p = makeAllPairsAllReduce(n);
    const std::string what = absl::StrFormat("allpairs %d ranks", n);
    ASSERT_TRUE(validateProgram(p).empty()) << what << ":\n" << formatErrors(validateProgram(p), what);
    EXPECT_EQ(minConnectorSlots(p), n) << what;
    for (const RankProgram& r : p.ranks) EXPECT_EQ(r.blocks.size(), static_cast<size_t>(n)) << what;
    Program inferred = p;
    for (RankProgram& r : inferred.ranks)
      for (BlockProgram& b : r.blocks)
        for (Step& s : b.steps) s.postOp = false;
    ASSERT_TRUE(markPostOps(inferred)) << what;
    inferred.minConnectorSlots = minConnectorSlots(inferred);
    expectSameProgram(p, inferred, what + " (inferred postOps)");
    expectSameProgram(p, reloaded(p, what), what);
  }
}

TEST(IrEmit, RefusesWhatMscclIrCannotSay) {
  Result<std::string> p2p = writeMscclIr(makeSendRecv(2, 1, 0, 1));
  ASSERT_FALSE(p2p.ok());
  EXPECT_NE(p2p.status().message.find("point-to-point"), std::string::npos) << p2p.status().message;
  // The library's AllToAll on one block talks to every peer from it.
  Result<std::string> oneBlock = writeMscclIr(makeAllToAll(4, 1));
  ASSERT_FALSE(oneBlock.ok());
  EXPECT_NE(oneBlock.status().message.find("<gpu id=0>/<tb id=0> sends to 3 peers; an MSCCL-IR threadblock names one"),
            std::string::npos)
      << oneBlock.status().message;
  Program broken = makeRingAllReduce(3, 1);
  broken.ranks[1].blocks[0].steps.pop_back();  // a send nobody receives
  Result<std::string> invalid = writeMscclIr(broken);
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message.find("is not valid"), std::string::npos) << invalid.status().message;
}

// The emitted fixtures (tests/data/msccl-ir/regenerate.sh) are what the generators write today:
// a generator that changes shows here until the fixtures are regenerated.
TEST(IrEmit, EmittedFixturesAreCurrent) {
  struct Emitted {
    const char* file;
    Program program;
  };
  const auto named = [](Program p) {
    p.name = absl::StrFormat("%s_%s", p.name, collName(p.coll));
    return p;
  };
  const Emitted fixtures[] = {
      {"ring_allreduce_4r.xml", named(makeRingAllReduce(4, 1))},
      {"ring_allreduce_3r_2ch.xml", named(makeRingAllReduce(3, 2))},
      {"ring_allgather_4r.xml", named(makeRingAllGather(4, 1))},
      {"ring_reduce_scatter_4r.xml", named(makeRingReduceScatter(4, 1))},
      {"chain_reduce_4r_root1.xml", named(makeChainReduce(4, 1, 1))},
      {"chain_broadcast_4r_root2.xml", named(makeChainBroadcast(4, 1, 2))},
      {"direct_alltoall_4r.xml", named(makeAllToAll(4, 3))},
      {"allpairs_allreduce_4r.xml", named(makeAllPairsAllReduce(4))},
      {"allpairs_allreduce_8r.xml", named(makeAllPairsAllReduce(8))},
  };
  for (const Emitted& f : fixtures) {
    Result<std::string> xml = writeMscclIr(f.program);
    ASSERT_TRUE(xml.ok()) << f.file << ": " << xml.status().message;
    EXPECT_EQ(readFile(kDataDir + f.file), xml.value())
        << f.file << " differs from what the generator writes: run tests/data/msccl-ir/regenerate.sh";
  }
}

}  // namespace
}  // namespace occl::ir
