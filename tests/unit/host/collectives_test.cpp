// Every collective, datatype and reduction op, verified bit-exactly like nccl-tests: generated
// programs are statically valid; each (collective, dtype, op, count, in/out-of-place, root) runs on
// ranks as threads with inputs whose reductions are exact in any order. The disordered mix and the
// invalid registrations are in collectives_mix_test.cpp.
#include <gtest/gtest.h>
#include <malloc.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "support/collective_cases.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr size_t kCounts[] = {0, 1, 7, 1023, 65537};
constexpr int kDtypes[] = {occlInt8,    occlUint8,    occlInt32,   occlUint32,  occlInt64,      occlUint64,
                           occlFloat16, occlBfloat16, occlFloat32, occlFloat64, occlFloat8e4m3, occlFloat8e5m2};
constexpr int kOps[] = {occlSum, occlProd, occlMin, occlMax, occlAvg};

// Batches allocate the same large buffers over and over: keeping freed memory in the heap instead
// of returning it to the kernel saves a page fault per page per batch (half of this test's CPU time).
const bool kHeapKept = [] {
  mallopt(M_MMAP_THRESHOLD, 512 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  return true;
}();

// Daemon blocks per rank count: channels for the rings; for AllToAll, one block serving every
// peer, n-1 blocks with one peer each, and blocks serving several peers each.
int daemonBlocksFor(int nRanks) {
  static constexpr int kBlocks[] = {1, 1, 2, 1, 3, 4, 2, 1, 2};
  return kBlocks[nRanks];
}

occlConfig_t groupConfig(int nRanks) {
  occlConfig_t c = testConfig();
  c.daemonBlocks = daemonBlocksFor(nRanks);
  // Small slots give several tiles per chunk at the largest counts (tile boundaries, ragged last
  // tiles); with more ranks every tile costs more thread hand-offs, so those keep the default.
  if (nRanks <= 3) c.connectorSlotBytes = 16 * 1024;
  return c;
}

// Every count and placement of one (collective, dtype, op). Roots and Send/Recv pairs rotate
// with the count; a Send/Recv uses the placement flag to flip the pair's direction instead.
std::vector<Spec> specsFor(int type, int dtype, int op, int nRanks) {
  std::vector<Spec> out;
  for (size_t k = 0; k < std::size(kCounts); ++k) {
    for (int variant = 0; variant < 2; ++variant) {
      Spec s{type, dtype, op, kCounts[k], variant == 1, 0, 0};
      const int n = nRanks, idx = static_cast<int>(k);
      if (type == occlCollSend) {
        s.inPlace = false;
        s.root = idx % n;
        s.peer = ((variant == 1 ? s.root - 1 : s.root + 1) % n + n) % n;
      } else if (s.inPlace && !hasInPlace(type)) {
        continue;
      }
      if (type == occlCollReduce || type == occlCollBroadcast) s.root = (idx + variant) % n;
      out.push_back(s);
    }
  }
  return out;
}

std::vector<int> opsFor(int type) {
  if (reducing(type)) return {std::begin(kOps), std::end(kOps)};
  return {occlSum};
}

// ---- Generated programs ----

void expectValid(const ir::Program& p, const std::string& what) {
  const std::vector<ir::LoadError> errors = ir::validateProgram(p);
  EXPECT_TRUE(errors.empty()) << what << ":\n" << ir::formatErrors(errors, what);
}

// markPostOps() infers where a reduction completes; the generators must mark the same steps.
void expectSamePostOps(const ir::Program& generated, const std::string& what) {
  ir::Program inferred = generated;
  ASSERT_TRUE(ir::markPostOps(inferred)) << what;
  for (size_t r = 0; r < generated.ranks.size(); ++r)
    for (size_t b = 0; b < generated.ranks[r].blocks.size(); ++b)
      for (size_t s = 0; s < generated.ranks[r].blocks[b].steps.size(); ++s)
        EXPECT_EQ(inferred.ranks[r].blocks[b].steps[s].postOp, generated.ranks[r].blocks[b].steps[s].postOp)
            << what << " " << ir::stepElement(static_cast<int32_t>(r), static_cast<int32_t>(b), static_cast<int32_t>(s));
}

// Direct, on any number of blocks: each rank sends chunk q of its input to rank q itself and
// receives rank q's share into chunk q of its output, once each, with no relay through scratch.
void expectDirect(const ir::Program& a2a, const std::string& what) {
  const int n = a2a.nRanks;
  for (int r = 0; r < n; ++r) {
    const ir::RankProgram& rp = a2a.ranks[static_cast<size_t>(r)];
    EXPECT_EQ(rp.scratchChunks, 0) << what;
    std::vector<int> sentTo(n, 0), receivedFrom(n, 0);
    for (const ir::BlockProgram& b : rp.blocks) {
      for (const ir::Step& s : b.steps) {
        if (stepUsesSendConnector(s.op)) {
          ASSERT_EQ(s.op, ir::OpType::Send) << what;
          EXPECT_EQ(s.srcOff, ir::sendPeerOf(b, s)) << what << ": rank " << r << " sends another rank's chunk";
          sentTo[static_cast<size_t>(ir::sendPeerOf(b, s))] += 1;
        }
        if (stepUsesRecvConnector(s.op)) {
          ASSERT_EQ(s.op, ir::OpType::Recv) << what;
          EXPECT_EQ(s.dstOff, ir::recvPeerOf(b, s)) << what << ": rank " << r << " stores a share in the wrong chunk";
          receivedFrom[static_cast<size_t>(ir::recvPeerOf(b, s))] += 1;
        }
      }
    }
    for (int q = 0; q < n; ++q) {
      EXPECT_EQ(sentTo[static_cast<size_t>(q)], q == r ? 0 : 1) << what << ": rank " << r << " -> " << q;
      EXPECT_EQ(receivedFrom[static_cast<size_t>(q)], q == r ? 0 : 1) << what << ": rank " << q << " -> " << r;
    }
  }
}

// A RankIo copied out of a temporary (as gpu_streams_test's torture did) must still check its own
// buffers: the copy's send and recv point into the copy, at the original's offsets; a move keeps
// the buffers. (With the original's pointers the check read freed memory, and the torture reported
// the garbage as a wrong result.)
TEST(RankIoCopies, PointIntoTheirOwnBuffers) {
  Spec s;
  s.type = occlCollReduceScatter;
  s.count = 5;
  s.inPlace = true;
  const std::vector<RankIo> all = prepare(s, 4);
  const RankIo& original = all[2];
  const RankIo copy = prepare(s, 4)[2];  // the temporary dies here
  const auto offset = [](const RankIo& io, const void* p) { return static_cast<const std::byte*>(p) - io.first.data(); };
  EXPECT_EQ(offset(copy, copy.send), offset(original, original.send));
  EXPECT_EQ(offset(copy, copy.recv), offset(original, original.recv));
  EXPECT_NE(offset(original, original.recv), 0) << "in place, rank 2's block lies inside the buffer";
  EXPECT_EQ(mismatch(s, 2, copy), mismatch(s, 2, original));
  RankIo assigned;
  assigned = original;
  EXPECT_EQ(offset(assigned, assigned.recv), offset(original, original.recv));
  const void* buffer = assigned.first.data();
  RankIo moved = std::move(assigned);
  EXPECT_EQ(moved.first.data(), buffer);
  EXPECT_EQ(offset(moved, moved.recv), offset(original, original.recv));
}

TEST(Generators, ProgramsAreValidAndMarkPostOps) {
  for (int n = 1; n <= 9; ++n) {
    for (int c = 1; c <= 3; ++c) {
      const std::string at = absl::StrFormat(" n=%d c=%d", n, c);
      expectValid(ir::makeRingAllGather(n, c), "allgather" + at);
      expectValid(ir::makeRingReduceScatter(n, c), "reducescatter" + at);
      if (n > 1) expectSamePostOps(ir::makeRingReduceScatter(n, c), "reducescatter" + at);
      for (int root = 0; root < n; ++root) {
        expectValid(ir::makeChainReduce(n, c, root), absl::StrFormat("reduce root=%d%s", root, at));
        if (n > 1) expectSamePostOps(ir::makeChainReduce(n, c, root), absl::StrFormat("reduce root=%d%s", root, at));
        expectValid(ir::makeChainBroadcast(n, c, root), absl::StrFormat("broadcast root=%d%s", root, at));
        for (int peer = 0; peer < n; ++peer)
          if (peer != root) expectValid(ir::makeSendRecv(n, c, root, peer), absl::StrFormat("p2p %d->%d%s", root, peer, at));
      }
    }
    for (int blocks = 1; blocks <= n + 1; ++blocks) {
      const ir::Program a2a = ir::makeAllToAll(n, blocks);
      expectValid(a2a, absl::StrFormat("alltoall n=%d blocks=%d", n, blocks));
      EXPECT_EQ(a2a.ranks[0].blocks.size(), static_cast<size_t>(std::max(1, std::min(blocks, n - 1))));
      expectDirect(a2a, absl::StrFormat("alltoall n=%d blocks=%d", n, blocks));
    }
  }
}

// ---- The dtype x op x count x placement matrix ----

using MatrixParam = std::tuple<int, int>;  // ranks, collective type

class CollectiveMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(CollectiveMatrix, BitExactForEveryDtypeOpCountAndPlacement) {
  const auto [nRanks, type] = GetParam();
  CommGroup comms(nRanks, groupConfig(nRanks));
  for (int dtype : kDtypes) {
    for (int op : opsFor(type)) {
      std::vector<Case> cases;
      for (const Spec& s : specsFor(type, dtype, op, nRanks)) cases.push_back(makeCase(s, nRanks));
      runCases(comms, cases);
      if (HasFatalFailure()) return;
    }
  }
}

std::string matrixName(const ::testing::TestParamInfo<MatrixParam>& info) {
  return absl::StrFormat("r%d_%s", std::get<0>(info.param), caseName(std::get<1>(info.param)));
}

// Every collective on 1..8 ranks, but send/recv from 2: one rank has no peer to send to (its
// registration is refused, collectives_mix_test).
std::vector<MatrixParam> matrixParams() {
  std::vector<MatrixParam> params;
  for (int n = 1; n <= 8; ++n)
    for (int type : caseTypes())
      if (type != occlCollSend || n > 1) params.emplace_back(n, type);
  return params;
}

INSTANTIATE_TEST_SUITE_P(RanksAndCollectives, CollectiveMatrix, ::testing::ValuesIn(matrixParams()), matrixName);

}  // namespace
}  // namespace occl::test
