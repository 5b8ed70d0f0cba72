// The collective matrix on the simt backend: every collective, a dtype of each size class (and
// every reduction op on one of them), counts from empty to several tiles, in and out of place, on
// 2 to 4 ranks with one to three daemon blocks; each block is OCCL_SIMT_LANES lane threads running
// the CUDA daemon's device code path. Results are bit-exact (inputs every reduction order sums
// alike) and, with inputs that do round, bit-identical at 1 and 7 lanes and on the host backend:
// lanes split each primitive's elements, never the order of a reduction. MSCCL-IR programs run
// too: one the test writes itself (all-pairs AllReduce, several threadblocks, cross-block
// dependencies) and, where ../shared/msccl-ir exists, the MSCCLang compiler's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "ir_loader/msccl_ir.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

// The backend under test, with OCCL_SIMT_LANES and OCCL_SIMT_JITTER as the environment sets them.
occlConfig_t simtConfig(int daemonBlocks, uint64_t slotBytes = 4096) {
  occlConfig_t c = testConfig();
  c.backend = occlBackendSimt;
  c.daemonBlocks = daemonBlocks;
  c.connectorSlotBytes = slotBytes;  // 1 KiB of float32 a tile: the larger counts span tiles
  return c;
}

int blocksFor(int nRanks) { return nRanks == 3 ? 1 : nRanks == 2 ? 2 : 3; }

constexpr size_t kCounts[] = {0, 1, 7, 1023, 5000};

// One dtype per size class with sum (or a copy), and float32 with every other op.
std::vector<std::pair<int, int>> dtypeOpsFor(int type) {
  std::vector<std::pair<int, int>> out = {{occlInt8, occlSum}, {occlBfloat16, occlSum}, {occlFloat32, occlSum},
                                          {occlFloat64, occlSum}};
  if (reducing(type))
    for (int op : {occlProd, occlMin, occlMax, occlAvg}) out.push_back({occlFloat32, op});
  return out;
}

// Every count and placement; roots and send/recv pairs rotate with the count.
std::vector<Spec> specsFor(int type, int dtype, int op, int n) {
  std::vector<Spec> out;
  for (size_t k = 0; k < std::size(kCounts); ++k) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !hasInPlace(type)) continue;
      Spec s{type, dtype, op, kCounts[k], inPlace, static_cast<int>(k) % n, 0};
      if (type == occlCollSend) s.peer = (s.root + 1 + static_cast<int>(k) % (n - 1)) % n;
      out.push_back(s);
    }
  }
  return out;
}

using MatrixParam = std::tuple<int, int>;  // ranks, collective type

class SimtMatrix : public ::testing::TestWithParam<MatrixParam> {};

TEST_P(SimtMatrix, BitExact) {
  const auto [nRanks, type] = GetParam();
  CommGroup comms(nRanks, simtConfig(blocksFor(nRanks)));
  std::vector<Case> cases;
  for (const auto& [dtype, op] : dtypeOpsFor(type))
    for (const Spec& s : specsFor(type, dtype, op, nRanks)) cases.push_back(makeCase(s, nRanks));
  runCases(comms, cases);
}

INSTANTIATE_TEST_SUITE_P(RanksAndCollectives, SimtMatrix,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::ValuesIn(caseTypes())),
                         [](const ::testing::TestParamInfo<MatrixParam>& info) {
                           return absl::StrFormat("r%d_%s", std::get<0>(info.param), caseName(std::get<1>(info.param)));
                         });

// ---- Parts by size (host/algorithms.hpp: partsFor) ----

// A kernel backend splits a collective that names no desc.nBlocks by its size: a part per eighth
// of a connector slot of its largest buffer, up to 16 and one per daemon block. With 4 KiB slots,
// 8 KiB is 16 parts by size: every collective here runs in as many parts as the daemon has
// blocks, 1 to 5, on 3 ranks, with and without preemption at every wait, bit-exact. Block 0 alone
// reads the SQ and relays the entries to the others (daemon/daemon.hpp: fan-out).
constexpr int kPartsRanks = 3;
constexpr uint64_t kPartsElems = 2048 + 5;  // int32 in the largest buffer: 8 KiB and a ragged bit

// The parts a completed collective ran in: every part loads its context once per completion
// besides its preemptions (occlCollStats_t::contextLoads).
uint64_t partsRun(occlComm_t comm, uint64_t collId) {
  occlCollStats_t st{};
  expectOk(occlCollGetStats(comm, collId, &st), comm, "occlCollGetStats");
  return st.completions == 0 ? 0 : (st.contextLoads - st.preemptions) / st.completions;
}

using PartsParam = std::tuple<int, bool>;  // daemon blocks, forced preemption

class SimtParts : public ::testing::TestWithParam<PartsParam> {};

TEST_P(SimtParts, EveryBlockRunsAPartBitExact) {
  const auto [blocks, forced] = GetParam();
  occlConfig_t config = simtConfig(blocks);
  config.forcePreempt = forced ? 1 : 0;
  CommGroup comms(kPartsRanks, config);
  std::vector<Case> cases;
  for (int type : caseTypes()) {
    if (type == occlCollSend) continue;  // a pair fills one link: one part
    for (bool inPlace : {false, true}) {
      if (inPlace && !hasInPlace(type)) continue;
      Spec s{type, occlInt32, occlSum, countForElems(type, kPartsElems, kPartsRanks), inPlace, 1, 0};
      cases.push_back(makeCase(s, kPartsRanks));
    }
  }
  runCases(comms, cases);

  // The count itself, on every rank.
  const uint64_t id = nextCollId();
  std::vector<std::vector<int32_t>> bufs(kPartsRanks, std::vector<int32_t>(kPartsElems, 1));
  runRanks(kPartsRanks, [&](int r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kPartsElems;
    d.datatype = occlInt32;
    expectOk(occlCollRegister(comms[r], id, &d), comms[r], "register");
    CallbackCounter done;
    expectOk(occlSubmit(comms[r], id, bufs[r].data(), bufs[r].data(), &CallbackCounter::callback, done.arg()), comms[r],
             "submit");
    if (!done.waitFor(1) || done.fired()[0].second != occlSuccess) throw std::runtime_error("allreduce failed");
  });
  for (int r = 0; r < kPartsRanks; ++r) {
    EXPECT_EQ(partsRun(comms[r], id), static_cast<uint64_t>(blocks)) << "rank " << r;
    occlCollStats_t st{};
    expectOk(occlCollGetStats(comms[r], id, &st), comms[r], "occlCollGetStats");
    EXPECT_EQ(st.parts, static_cast<uint32_t>(blocks)) << "rank " << r;
    EXPECT_EQ(bufs[r][0], kPartsRanks);
    EXPECT_EQ(bufs[r][kPartsElems - 1], kPartsRanks);
  }
}

INSTANTIATE_TEST_SUITE_P(BlocksAndPreemption, SimtParts, ::testing::Combine(::testing::Values(1, 2, 3, 5), ::testing::Bool()),
                         [](const ::testing::TestParamInfo<PartsParam>& info) {
                           return absl::StrFormat("b%d_%s", std::get<0>(info.param),
                                                  std::get<1>(info.param) ? "forced" : "free");
                         });

// ---- Lane count and backend do not change a single bit ----

// Every rank's AllReduce and ReduceScatter outputs of float inputs that round differently in
// different reduction orders, on `config`.
std::vector<std::vector<float>> roundingOutputs(occlConfig_t config) {
  constexpr int kRanks = 4;
  constexpr size_t kCount = 3001;  // several tiles, a ragged last one
  std::vector<std::vector<float>> in(kRanks), out(2 * kRanks);
  for (int r = 0; r < kRanks; ++r) {
    std::mt19937 gen(1234u + static_cast<unsigned>(r));
    std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
    for (size_t i = 0; i < kCount * kRanks; ++i) in[r].push_back(dist(gen) * (i % 3 == 0 ? 1e-4f : 1.0f));
    out[r].assign(kCount, 0.0f);
    out[kRanks + r].assign(kCount, 0.0f);
  }
  CommGroup comms(kRanks, config);
  runRanks(kRanks, [&](int r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kCount;
    d.datatype = occlFloat32;
    // The parts are named: the simt backend would split by size and the host backend over its
    // daemon blocks (partsFor), and a ring's chunks, whose reduction orders differ, follow the
    // part count. The lanes and the backend are what this compares.
    d.nBlocks = 2;
    expectOk(occlCollRegister(comms[r], 1, &d), comms[r], "register allreduce");
    d.type = occlCollReduceScatter;
    expectOk(occlCollRegister(comms[r], 2, &d), comms[r], "register reducescatter");
    CallbackCounter done;
    expectOk(occlSubmit(comms[r], 1, in[r].data(), out[r].data(), &CallbackCounter::callback, done.arg()), comms[r], "submit");
    expectOk(occlSubmit(comms[r], 2, in[r].data(), out[kRanks + r].data(), &CallbackCounter::callback, done.arg()), comms[r],
             "submit");
    if (!done.waitFor(2)) throw std::runtime_error("callbacks timed out");
    for (const auto& [id, status] : done.fired())
      if (status != occlSuccess) throw std::runtime_error(absl::StrFormat("collId %d: %s", id, occlGetErrorString(status)));
  });
  return out;
}

TEST(SimtLanes, OneAndSevenLanesAndTheHostBackendGiveIdenticalBits) {
  occlConfig_t one = simtConfig(2, 2048);
  one.simtLanes = 1;
  occlConfig_t seven = one;
  seven.simtLanes = 7;
  occlConfig_t host = one;
  host.backend = occlBackendHost;
  const auto a = roundingOutputs(one), b = roundingOutputs(seven), h = roundingOutputs(host);
  for (size_t k = 0; k < a.size(); ++k) {
    ASSERT_EQ(a[k].size(), b[k].size());
    EXPECT_EQ(std::memcmp(a[k].data(), b[k].data(), a[k].size() * sizeof(float)), 0) << "output " << k << ": 1 vs 7 lanes";
    EXPECT_EQ(std::memcmp(a[k].data(), h[k].data(), a[k].size() * sizeof(float)), 0) << "output " << k << ": simt vs host";
  }
}

// ---- MSCCL-IR programs ----

// All-pairs AllReduce on n ranks, in place, nchunksperloop = n (rank q owns chunk q): threadblock
// p (one per peer p) sends chunk p to p and receives p's copy of this rank's chunk into scratch;
// threadblock n-1 (no peer) reduces those into chunk `rank` once each receive is done (nop-free
// cross-block dependencies); then every peer threadblock sends the reduced chunk and receives
// the peer's reduced chunk in place.
std::string allPairsAllReduce(int n) {
  auto step = [](int s, const char* type, const char* src, int srcOff, const char* dst, int dstOff, int dep, int deps,
                 int hasDep) {
    return absl::StrFormat(
        "      <step s=\"%d\" type=\"%s\" srcbuf=\"%s\" srcoff=\"%d\" dstbuf=\"%s\" dstoff=\"%d\" cnt=\"1\" depid=\"%d\" "
        "deps=\"%d\" hasdep=\"%d\"/>\n",
        s, type, src, srcOff, dst, dstOff, dep, deps, hasDep);
  };
  std::string xml = absl::StrFormat(
      "<algo name=\"pairs\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"%d\" ngpus=\"%d\" coll=\"allreduce\" "
      "inplace=\"1\">\n",
      n, n);
  for (int r = 0; r < n; ++r) {
    absl::StrAppendFormat(&xml, "  <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"0\" s_chunks=\"%d\">\n", r, n, n - 1);
    const int reducer = n - 1;  // threadblock ids 0..n-2 serve the peers in order, then the reducer
    int tb = 0;
    for (int p = 0; p < n; ++p) {
      if (p == r) continue;
      absl::StrAppendFormat(&xml, "    <tb id=\"%d\" send=\"%d\" recv=\"%d\" chan=\"0\">\n", tb, p, p);
      xml += step(0, "s", "i", p, "i", p, -1, -1, 0);
      xml += step(1, "r", "i", r, "s", tb, -1, -1, 1);
      xml += step(2, "s", "i", r, "i", r, reducer, n - 2, 0);
      xml += step(3, "r", "i", p, "i", p, -1, -1, 0);
      xml += "    </tb>\n";
      ++tb;
    }
    absl::StrAppendFormat(&xml, "    <tb id=\"%d\" send=\"-1\" recv=\"-1\" chan=\"0\">\n", reducer);
    for (int k = 0; k < n - 1; ++k) xml += step(k, "re", "s", k, "i", r, k, 1, k == n - 2 ? 1 : 0);
    xml += "    </tb>\n  </gpu>\n";
  }
  return xml + "</algo>\n";
}

// Loads the program at `path` on every rank of a simt group and runs it bit-exactly in every
// placement it declares, at one and at several tiles per chunk, checking that it (not the
// built-in fallback) ran.
// daemonBlocks 0: one per threadblock of the program; fewer makes a block run several (parts).
void runProgram(const std::string& path, int type, bool forcePreempt, int daemonBlocks = 0) {
  ir::LoadResult loaded = ir::loadMscclIrFile(path);
  ASSERT_TRUE(loaded.ok()) << ir::formatErrors(loaded.errors, path);
  const ir::Program& p = *loaded.program;
  size_t blocks = 1;
  for (const ir::RankProgram& r : p.ranks) blocks = std::max(blocks, r.blocks.size());
  occlConfig_t config = simtConfig(daemonBlocks > 0 ? daemonBlocks : static_cast<int>(blocks), 1024);
  config.forcePreempt = forcePreempt ? 1 : 0;
  std::vector<Case> cases;  // before the ranks: a rank that fails leaves the others' daemons reading them
  CommGroup comms(p.nRanks, config);
  for (int r = 0; r < comms.size(); ++r) expectOk(occlAlgorithmLoad(comms[r], "program", path.c_str()), comms[r], "load");
  const size_t mult = ir::chunkMultiplier(p.coll, p.nRanks), loop = static_cast<size_t>(p.nChunksPerLoop);
  for (size_t count : {loop / mult, 700 * loop / mult}) {
    for (bool inPlace : {false, true}) {
      if (!(inPlace ? p.inPlace && hasInPlace(type) : p.outOfPlace) || count == 0) continue;
      Spec s{type, occlFloat32, occlSum, count, inPlace};
      s.algorithm = "program";
      cases.push_back(makeCase(s, p.nRanks));
    }
  }
  ASSERT_FALSE(cases.empty()) << path << " declares no placement";
  // Which algorithm a registration selects, on an id of its own (ids are never reused).
  for (const Case& c : cases) {
    const uint64_t probe = nextCollId();
    for (int r = 0; r < comms.size(); ++r) {
      const occlCollDesc_t d = descFor(c.spec, r);
      expectOk(occlCollRegister(comms[r], probe, &d), comms[r], "register");
      const char* name = nullptr;
      expectOk(occlCollGetAlgorithm(comms[r], probe, c.spec.inPlace ? 1 : 0, &name), comms[r], "algorithm");
      ASSERT_EQ(std::string(name), p.name) << describe(c.spec) << ": the program does not run";
      expectOk(occlCollDeregister(comms[r], probe), comms[r], "deregister");
    }
  }
  runCases(comms, cases);
}

class SimtIr : public ::testing::TestWithParam<bool> {};  // forced preemption

TEST_P(SimtIr, AllPairsProgramWithCrossBlockDependencies) {
  for (int n : {3, 4}) {
    const std::string path = ::testing::TempDir() + absl::StrFormat("occl_simt_pairs_%d_%d.xml", n, getpid());
    std::ofstream(path) << allPairsAllReduce(n);
    runProgram(path, occlCollAllReduce, GetParam());
    std::filesystem::remove(path);
    if (HasFatalFailure()) return;
  }
}

// The project's fixtures (tests/data/msccl-ir), and MSCCLang's own output where ../shared exists.
TEST_P(SimtIr, FixturePrograms) {
  const std::string data = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";
  const std::string shared = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";
  std::vector<std::pair<std::string, int>> programs = {
      {data + "allpairs_allreduce_4r.xml", occlCollAllReduce},
      {data + "edge_allreduce_2r_split_blocks.xml", occlCollAllReduce},
      {data + "ring_allgather_4r.xml", occlCollAllGather},
      {data + "direct_alltoall_4r.xml", occlCollAllToAll},
  };
  const std::pair<const char*, int> kMscclang[] = {
      {"allreduce_allpairs_4r_1i_ll.xml", occlCollAllReduce},
      {"allgather_ring_oop_4r_auto.xml", occlCollAllGather},
      {"reduce_scatter_ring_oop_4r_1i_simple.xml", occlCollReduceScatter},
      {"alltoall_allpairs_4r_1i_simple.xml", occlCollAllToAll},
  };
  for (const auto& [file, type] : kMscclang)
    if (std::filesystem::exists(shared + file)) programs.emplace_back(shared + file, type);
  for (const auto& [path, type] : programs) {
    SCOPED_TRACE(path);
    runProgram(path, type, GetParam());
    if (HasFatalFailure()) return;
  }
}

// One daemon block runs all four threadblocks of a rank's all-pairs part (daemonParts()),
// moving between them when one waits on a peer or on another's dependency.
TEST_P(SimtIr, AllPairsOnOneDaemonBlock) {
  runProgram(std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/allpairs_allreduce_4r.xml", occlCollAllReduce, GetParam(),
             /*daemonBlocks=*/1);
}

INSTANTIATE_TEST_SUITE_P(Preemption, SimtIr, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) { return info.param ? "forced" : "free"; });

}  // namespace
}  // namespace occl::test
