// MSCCL-IR programs run by the daemon: every fixture of ../shared/msccl-ir at its rank count, with
// counts spanning several tiles, bit-exact in the placement it declares and through the built-in
// fallback in the other, also with forced preemption at every wait; and IR and ring collectives
// submitted in random per-rank orders.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "support/collective_cases.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

const std::string kFixtureDir = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";
constexpr const char* kLoaded = "fixture";  // the name every rank loads the file under
constexpr uint64_t kSlotBytes = 1024;        // 256 floats a tile: the counts below span several

struct Fixture {
  const char* file;
  int type;
};

const Fixture kFixtures[] = {
    {"allreduce_ring_4r_1ch_1i_simple.xml", occlCollAllReduce},
    {"allreduce_ring_inplace_auto_4r_1i.xml", occlCollAllReduce},
    {"allreduce_allpairs_4r_1i_ll.xml", occlCollAllReduce},
    {"allgather_ring_inplace_4r_1ch_1i_simple.xml", occlCollAllGather},
    {"allgather_ring_oop_4r_auto.xml", occlCollAllGather},
    {"reduce_scatter_ring_oop_4r_1i_simple.xml", occlCollReduceScatter},
    {"alltoall_allpairs_4r_1i_simple.xml", occlCollAllToAll},
};

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.file; }

// What a submission the program does not take runs instead.
const char* builtInName(int type) { return type == occlCollAllToAll ? "direct" : "ring"; }

ir::Program loadOrDie(const std::string& path) {
  ir::LoadResult r = ir::loadMscclIrFile(path);
  if (!r.ok()) throw std::runtime_error(path + " does not load");
  return *r.program;
}

size_t maxBlocks(const ir::Program& p) {
  size_t most = 1;
  for (const ir::RankProgram& r : p.ranks) most = std::max(most, r.blocks.size());
  return most;
}

occlConfig_t irConfig(int daemonBlocks, bool forcePreempt) {
  occlConfig_t c = testConfig();
  c.daemonBlocks = daemonBlocks;
  c.connectorSlotBytes = kSlotBytes;
  c.forcePreempt = forcePreempt ? 1 : 0;
  return c;
}

// Counts of whole chunks (one element a chunk, a chunk of 3 tiles and a bit) and one the
// chunks do not divide, which MSCCL's rule sends to the built-in algorithm.
std::vector<size_t> countsFor(const ir::Program& p) {
  const size_t mult = ir::chunkMultiplier(p.coll, p.nRanks), loop = static_cast<size_t>(p.nChunksPerLoop);
  std::vector<size_t> counts = {loop / mult, (3 * kSlotBytes / 4 + 17) * loop / mult};
  if (loop % mult == 0 && loop / mult > 1) counts.push_back(loop / mult + 1);
  return counts;
}

bool runsProgram(const ir::Program& p, const Spec& s) {
  const size_t elems = s.count * ir::chunkMultiplier(p.coll, p.nRanks);
  return s.count > 0 && elems % static_cast<size_t>(p.nChunksPerLoop) == 0 && (s.inPlace ? p.inPlace : p.outOfPlace);
}

std::vector<std::pair<int, int>> dtypeOps(int type) {
  if (!reducing(type)) return {{occlFloat32, occlSum}};
  return {{occlFloat32, occlSum}, {occlInt32, occlMax}, {occlFloat64, occlAvg}};
}

// Registers `s` on every rank and checks which algorithm each placement runs.
void expectAlgorithm(const CommGroup& comms, const ir::Program& p, Spec s) {
  const uint64_t id = nextCollId();
  for (int r = 0; r < comms.size(); ++r) {
    const occlCollDesc_t d = descFor(s, r);
    expectOk(occlCollRegister(comms[r], id, &d), comms[r], "register " + describe(s));
  }
  for (bool inPlace : {false, true}) {
    s.inPlace = inPlace;
    const char* name = nullptr;
    expectOk(occlCollGetAlgorithm(comms[0], id, inPlace ? 1 : 0, &name), comms[0], "occlCollGetAlgorithm");
    EXPECT_EQ(std::string(name), runsProgram(p, s) ? p.name : builtInName(s.type)) << describe(s);
  }
  for (int r = 0; r < comms.size(); ++r) expectOk(occlCollDeregister(comms[r], id), comms[r], "deregister");
}

using RunParam = std::tuple<Fixture, bool>;  // fixture, forced preemption

class IrRun : public ::testing::TestWithParam<RunParam> {};

TEST_P(IrRun, BitExactInEveryPlacementAndCount) {
  const auto [fixture, forcePreempt] = GetParam();
  const std::string path = kFixtureDir + fixture.file;
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "../shared/msccl-ir not found at " << kFixtureDir;
  const ir::Program program = loadOrDie(path);
  CommGroup comms(program.nRanks, irConfig(static_cast<int>(maxBlocks(program)), forcePreempt));
  for (int r = 0; r < comms.size(); ++r) expectOk(occlAlgorithmLoad(comms[r], kLoaded, path.c_str()), comms[r], "load");
  std::vector<Case> cases;
  for (size_t count : countsFor(program)) {
    for (const auto& [dtype, op] : dtypeOps(fixture.type)) {
      for (bool inPlace : {false, true}) {
        if (inPlace && !hasInPlace(fixture.type)) continue;
        Spec s{fixture.type, dtype, op, count, inPlace};
        s.algorithm = kLoaded;
        ASSERT_NO_FATAL_FAILURE(expectAlgorithm(comms, program, s));
        cases.push_back(makeCase(s, program.nRanks));
      }
    }
  }
  runCases(comms, cases);
}

std::string runName(const ::testing::TestParamInfo<RunParam>& info) {
  std::string name = std::get<0>(info.param).file;
  name = name.substr(0, name.find('.'));
  return name + (std::get<1>(info.param) ? "_forced" : "");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IrRun, ::testing::Combine(::testing::ValuesIn(kFixtures), ::testing::Bool()),
                         runName);

// The tests above would pass if a submission silently ran the built-in algorithm instead of the
// program. So: a copy of the in-place ring whose first recv-reduce-send only copies (it drops a
// contribution) must give wrong sums in place, while out-of-place calls, which fall back to the
// built-in ring, stay exact.
TEST(IrRun, ASabotagedProgramIsWhatRunsInItsPlacement) {
  const std::string source = kFixtureDir + "allreduce_ring_4r_1ch_1i_simple.xml";
  if (!std::filesystem::exists(source)) GTEST_SKIP() << "../shared/msccl-ir not found at " << kFixtureDir;
  std::ifstream in(source);
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = xml.find(R"(type="rrs")");
  ASSERT_NE(at, std::string::npos);
  xml.replace(at, 10, R"(type="rcs")");
  const std::string path = std::string(OCCL_TEST_BINARY_DIR) + "/sabotaged_allreduce_ring.xml";
  std::ofstream(path) << xml;

  CommGroup comms(4, irConfig(1, false));
  for (int r = 0; r < comms.size(); ++r) expectOk(occlAlgorithmLoad(comms[r], kLoaded, path.c_str()), comms[r], "load");
  std::vector<Case> cases;
  for (bool inPlace : {false, true}) {
    Spec s{occlCollAllReduce, occlFloat32, occlSum, 4 * 1000, inPlace};
    s.algorithm = kLoaded;
    cases.push_back(makeCase(s, 4));
  }
  runCases(comms, cases, /*check=*/false);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(mismatch(cases[0].spec, r, cases[0].io[r]), "") << "out of place, rank " << r;
  bool wrong = false;
  for (int r = 0; r < 4; ++r) wrong = wrong || !mismatch(cases[1].spec, r, cases[1].io[r]).empty();
  EXPECT_TRUE(wrong) << "in place, the sabotaged program gave right sums: it did not run";
}

// all-pairs sends four chunks on a connection before it receives any: with fewer slots it would
// hang inside the collective, so registration refuses it (where the program would run at all).
TEST(IrRun, TooFewConnectorSlotsAreRefusedAtRegistration) {
  const std::string path = kFixtureDir + "allreduce_allpairs_4r_1i_ll.xml";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "../shared/msccl-ir not found at " << kFixtureDir;
  occlConfig_t config = irConfig(4, false);
  config.connectorSlots = 2;
  CommGroup comms(4, config);
  expectOk(occlAlgorithmLoad(comms[0], kLoaded, path.c_str()), comms[0], "load");
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 16 * 100;
  d.algorithm = kLoaded;
  EXPECT_EQ(occlCollRegister(comms[0], 1, &d), occlInvalidArgument);
  const std::string why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("algorithm allreduce_pairs needs config.connectorSlots >= 4"), std::string::npos) << why;
  d.count = 7;  // not whole chunks: the built-in ring runs, and needs only two slots
  expectOk(occlCollRegister(comms[0], 2, &d), comms[0], "register a count the program does not take");
}

// Every fixture in the placement it runs, next to ring collectives, registered and submitted
// in a different random order on every rank.
TEST(IrDisorder, IrAndRingCollectivesInRandomPerRankOrders) {
  if (!std::filesystem::exists(kFixtureDir)) GTEST_SKIP() << "../shared/msccl-ir not found at " << kFixtureDir;
  std::vector<std::string> names;
  std::vector<Spec> specs;
  size_t blocks = 1;
  for (const Fixture& f : kFixtures) {
    const ir::Program p = loadOrDie(kFixtureDir + f.file);
    blocks = std::max(blocks, maxBlocks(p));
    names.push_back(f.file);
    Spec s{f.type, occlFloat32, occlSum, countsFor(p)[1], /*inPlace=*/!p.outOfPlace};
    specs.push_back(s);
  }
  specs.push_back(Spec{occlCollAllReduce, occlFloat32, occlSum, 1000, true});
  specs.push_back(Spec{occlCollAllGather, occlInt32, occlSum, 333, false});
  specs.push_back(Spec{occlCollReduceScatter, occlFloat64, occlMin, 517, true});
  for (bool forcePreempt : {false, true}) {
    for (uint32_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(absl::StrFormat("seed %d%s", seed, forcePreempt ? ", forced preemption" : ""));
      CommGroup comms(4, irConfig(static_cast<int>(blocks), forcePreempt));
      for (int r = 0; r < comms.size(); ++r)
        for (const std::string& n : names)
          expectOk(occlAlgorithmLoad(comms[r], n.c_str(), (kFixtureDir + n).c_str()), comms[r], "load " + n);
      std::vector<Case> cases;
      for (size_t k = 0; k < specs.size(); ++k) {
        Spec s = specs[k];
        if (k < names.size()) s.algorithm = names[k].c_str();
        cases.push_back(makeCase(s, 4));
      }
      runRanks(comms.size(), [&](int r) {
        std::vector<size_t> order(cases.size());
        for (size_t k = 0; k < order.size(); ++k) order[k] = k;
        std::shuffle(order.begin(), order.end(), std::mt19937(seed * 100 + static_cast<uint32_t>(r)));
        runRank(comms[r], r, cases, order);
      });
      checkCases(cases);
      if (HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace occl::test
