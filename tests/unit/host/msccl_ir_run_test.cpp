// MSCCL-IR programs run by the daemon: every fixture of tests/data/msccl-ir (and of
// ../shared/msccl-ir, MSCCLang's own output, where it exists) at its rank count, with counts
// spanning several tiles, bit-exact in the placement it declares and through the built-in
// fallback in the other: with the default configuration (one daemon block running every
// threadblock of a rank, the default connector slots), with a daemon block per threadblock, and
// with forced preemption at every wait; connectors sized from what a program needs; and IR and
// ring collectives submitted in random per-rank orders.
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
#include "host/algorithms.hpp"
#include "ir_loader/msccl_ir.hpp"
#include "queues/fifo.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

const std::string kDataDir = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";
const std::string kSharedDir = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";
constexpr const char* kLoaded = "fixture";  // the name every rank loads the file under
constexpr uint64_t kSlotBytes = 1024;        // 256 floats a tile: the counts below span several

struct Fixture {
  std::string path;
  int type;
  int root = 0;  // the root a rooted program was written for
};

// The project's fixtures always; MSCCLang's where ../shared is checked out, as extra cases.
std::vector<Fixture> fixtures() {
  std::vector<Fixture> all = {
      {kDataDir + "ring_allreduce_4r.xml", occlCollAllReduce},
      {kDataDir + "ring_allreduce_3r_2ch.xml", occlCollAllReduce},
      {kDataDir + "ring_allgather_4r.xml", occlCollAllGather},
      {kDataDir + "ring_reduce_scatter_4r.xml", occlCollReduceScatter},
      {kDataDir + "chain_reduce_4r_root1.xml", occlCollReduce, 1},
      {kDataDir + "chain_broadcast_4r_root2.xml", occlCollBroadcast, 2},
      {kDataDir + "direct_alltoall_4r.xml", occlCollAllToAll},
      {kDataDir + "allpairs_allreduce_4r.xml", occlCollAllReduce},
      {kDataDir + "edge_allgather_2r_scratch.xml", occlCollAllGather},
      {kDataDir + "edge_allreduce_2r_split_blocks.xml", occlCollAllReduce},
  };
  const std::pair<const char*, int> shared[] = {
      {"allreduce_ring_4r_1ch_1i_simple.xml", occlCollAllReduce},
      {"allreduce_ring_inplace_auto_4r_1i.xml", occlCollAllReduce},
      {"allreduce_allpairs_4r_1i_ll.xml", occlCollAllReduce},
      {"allgather_ring_inplace_4r_1ch_1i_simple.xml", occlCollAllGather},
      {"allgather_ring_oop_4r_auto.xml", occlCollAllGather},
      {"reduce_scatter_ring_oop_4r_1i_simple.xml", occlCollReduceScatter},
      {"alltoall_allpairs_4r_1i_simple.xml", occlCollAllToAll},
  };
  for (const auto& [file, type] : shared)
    if (std::filesystem::exists(kSharedDir + file)) all.push_back({kSharedDir + file, type});
  return all;
}

std::string fileName(const Fixture& f) { return std::filesystem::path(f.path).filename().string(); }

void PrintTo(const Fixture& f, std::ostream* os) { *os << f.path; }


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

// Registers `s` on every rank, reads every rank's statistics, deregisters it.
std::vector<occlCollStats_t> registeredStats(const CommGroup& comms, const Spec& s) {
  const uint64_t id = nextCollId();
  std::vector<occlCollStats_t> stats(static_cast<size_t>(comms.size()));
  for (int r = 0; r < comms.size(); ++r) {
    const occlCollDesc_t d = descFor(s, r);
    expectOk(occlCollRegister(comms[r], id, &d), comms[r], "register " + describe(s));
  }
  for (int r = 0; r < comms.size(); ++r) {
    expectOk(occlCollGetStats(comms[r], id, &stats[static_cast<size_t>(r)]), comms[r], "stats");
    expectOk(occlCollDeregister(comms[r], id), comms[r], "deregister");
  }
  return stats;
}

// Thread-ranks on host threads read each other's buffers: their large AllReduce falls back to the
// "peer" program (host/algorithms.cpp), not the ring.
bool ranksShareMemory(const CommGroup& comms) {
  occlConfig_t config;
  const char* transport = nullptr;
  expectOk(occlCommGetConfig(comms[0], &config), comms[0], "occlCommGetConfig");
  expectOk(occlCommPeerTransport(comms[0], 1, &transport), comms[0], "occlCommPeerTransport");
  return config.backend != occlBackendSimt && config.backend != occlBackendCuda && std::string(transport) == "in-process";
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
    occlConfig_t config;
    expectOk(occlCommGetConfig(comms[0], &config), comms[0], "occlCommGetConfig");
    const host::PartsRule parts{config.daemonBlocks, config.backend == occlBackendSimt || config.backend == occlBackendCuda,
                                config.connectorSlotBytes};
    const std::string builtIn =
        host::builtInAlgorithm(descFor(s, 0), comms.size(), parts,
                               ranksShareMemory(comms) ? host::PeerAccess::InProcess : host::PeerAccess::None);  // the fallback
    EXPECT_EQ(std::string(name), runsProgram(p, s) ? p.name : builtIn) << describe(s);
  }
  for (int r = 0; r < comms.size(); ++r) expectOk(occlCollDeregister(comms[r], id), comms[r], "deregister");
}

// How the daemon runs the program: the default configuration (one daemon block, so it moves
// between a rank's threadblocks when one waits), a daemon block per threadblock, or one block
// per threadblock preempted at every wait.
enum class Mode { Defaults, BlockPerThreadblock, Forced };
using RunParam = std::tuple<Fixture, Mode>;

class IrRun : public ::testing::TestWithParam<RunParam> {};

TEST_P(IrRun, BitExactInEveryPlacementAndCount) {
  const auto [fixture, mode] = GetParam();
  const ir::Program program = loadOrDie(fixture.path);
  const int blocks = mode == Mode::Defaults ? testConfig().daemonBlocks : static_cast<int>(maxBlocks(program));
  CommGroup comms(program.nRanks, irConfig(blocks, mode == Mode::Forced));
  for (int r = 0; r < comms.size(); ++r)
    expectOk(occlAlgorithmLoad(comms[r], kLoaded, fixture.path.c_str()), comms[r], "load");
  std::vector<Case> cases;
  for (size_t count : countsFor(program)) {
    for (const auto& [dtype, op] : dtypeOps(fixture.type)) {
      for (bool inPlace : {false, true}) {
        if (inPlace && !hasInPlace(fixture.type)) continue;
        Spec s{fixture.type, dtype, op, count, inPlace};
        s.root = fixture.root;
        s.algorithm = kLoaded;
        ASSERT_NO_FATAL_FAILURE(expectAlgorithm(comms, program, s));
        cases.push_back(makeCase(s, program.nRanks));
      }
    }
  }
  runCases(comms, cases);
}

std::string runName(const ::testing::TestParamInfo<RunParam>& info) {
  const Fixture& f = std::get<0>(info.param);
  std::string name = fileName(f);
  name = name.substr(0, name.find('.'));
  if (f.path.rfind(kSharedDir, 0) == 0) name = "mscclang_" + name;
  static const char* const kModes[] = {"", "_blocks", "_forced"};
  return name + kModes[static_cast<int>(std::get<1>(info.param))];
}

INSTANTIATE_TEST_SUITE_P(Fixtures, IrRun,
                         ::testing::Combine(::testing::ValuesIn(fixtures()),
                                            ::testing::Values(Mode::Defaults, Mode::BlockPerThreadblock, Mode::Forced)),
                         runName);

// The tests above would pass if a submission silently ran the built-in algorithm instead of the
// program. So: a copy of the in-place ring whose first recv-reduce-send only copies (it drops a
// contribution) must give wrong sums in place, while out-of-place calls, which fall back to the
// built-in ring, stay exact.
TEST(IrRun, ASabotagedProgramIsWhatRunsInItsPlacement) {
  const std::string source = kDataDir + "ring_allreduce_4r.xml";
  std::ifstream in(source);
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = xml.find(R"(type="rrs")");
  ASSERT_NE(at, std::string::npos);
  xml.replace(at, 10, R"(type="rcs")");
  const std::string both = R"(inplace="1" outofplace="1")";  // the emitted ring serves both placements
  const size_t placement = xml.find(both);
  ASSERT_NE(placement, std::string::npos);
  xml.replace(placement, both.size(), R"(inplace="1")");
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

// All-pairs sends n chunks on a connection before it receives any: with fewer slots it would hang
// inside the collective, so its connectors get n slots whatever config.connectorSlots says (the
// minimum), and the statistics say what that costs. MSCCL runs it as is; so must occl.
TEST(IrRun, ConnectorsGetTheSlotsTheProgramNeeds) {
  const std::string path = kDataDir + "allpairs_allreduce_4r.xml";
  occlConfig_t config = irConfig(1, false);
  config.connectorSlots = 2;
  CommGroup comms(4, config);
  for (int r = 0; r < comms.size(); ++r) expectOk(occlAlgorithmLoad(comms[r], kLoaded, path.c_str()), comms[r], "load");
  Spec s{occlCollAllReduce, occlFloat32, occlSum, 16 * 100, /*inPlace=*/true};
  s.algorithm = kLoaded;
  const std::vector<occlCollStats_t> stats = registeredStats(comms, s);
  for (size_t r = 0; r < stats.size(); ++r) {
    const occlCollStats_t& st = stats[r];
    // Out of place the built-in direct AllReduce (6.25 KiB) runs on config's 2 slots; in place the
    // program's. Each has 6 connector ends (3 peers, both ways); the program's get 4 slots. A slot
    // holds what one step sends: a tile of the direct program, one of the program's 100-float
    // chunks (400 bytes, 448 in whole lines).
    EXPECT_EQ(st.connectorSlots, 4u);
    EXPECT_EQ(st.connectorBytes, 6 * fifoBytes(4, 448) + 6 * fifoBytes(2, kSlotBytes));
    // The program's 12 chunks of 100 floats; direct folds the inputs in rank order, in a scratch
    // chunk of the whole count on every rank after the first.
    EXPECT_EQ(st.scratchBytes, (12 * 100 + (r > 0 ? 16 * 100 : 0)) * sizeof(float)) << "rank " << r;
  }
  std::vector<Case> cases;
  cases.push_back(makeCase(s, 4));
  runCases(comms, cases);
}

// The issue's case: MSCCLang's allreduce_allpairs on 8 ranks (8 threadblocks a rank, 8 chunks a
// connection) with the default configuration: one daemon block, 4 connector slots.
TEST(IrRun, AllPairsOnEightRanksRunsWithTheDefaultConfiguration) {
  const std::string path = kDataDir + "allpairs_allreduce_8r.xml";
  CommGroup comms(8);
  for (int r = 0; r < comms.size(); ++r) expectOk(occlAlgorithmLoad(comms[r], kLoaded, path.c_str()), comms[r], "load");
  std::vector<Case> cases;
  for (auto [dtype, op] : dtypeOps(occlCollAllReduce)) {
    Spec s{occlCollAllReduce, dtype, op, 64 * 1000, /*inPlace=*/true};
    s.algorithm = kLoaded;
    ASSERT_NO_FATAL_FAILURE(expectAlgorithm(comms, loadOrDie(path), s));
    for (const occlCollStats_t& st : registeredStats(comms, s)) EXPECT_EQ(st.connectorSlots, 8u);
    cases.push_back(makeCase(s, 8));
  }
  runCases(comms, cases);
}

// MSCCL-IR carries no root: a rooted program's is where its data ends (reduce) or starts
// (broadcast), and a registration naming another root is refused instead of delivering there.
TEST(IrRun, ARootedProgramRunsOnlyForItsRoot) {
  CommGroup comms(4, irConfig(1, false));
  const std::pair<const char*, int> programs[] = {{"chain_reduce_4r_root1.xml", occlCollReduce},
                                                  {"chain_broadcast_4r_root2.xml", occlCollBroadcast}};
  for (const auto& [file, type] : programs) {
    const std::string path = kDataDir + file;
    expectOk(occlAlgorithmLoad(comms[0], file, path.c_str()), comms[0], "load");
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = type;
    d.count = 100;
    d.algorithm = file;
    d.root = 0;
    EXPECT_EQ(occlCollRegister(comms[0], nextCollId(), &d), occlInvalidArgument) << file;
    const std::string why = occlGetLastError(comms[0]);
    const int root = type == occlCollReduce ? 1 : 2;
    EXPECT_NE(why.find(absl::StrFormat("is written for root %d; desc.root = 0", root)), std::string::npos) << why;
  }
}

// A daemon block that runs several threadblocks of one collective needs preemption to move
// between them: without it registration says so instead of hanging.
TEST(IrRun, MoreThreadblocksThanDaemonBlocksNeedPreemption) {
  const std::string path = kDataDir + "allpairs_allreduce_4r.xml";
  occlConfig_t config = irConfig(2, false);
  config.disablePreemption = 1;
  CommGroup comms(4, config);
  expectOk(occlAlgorithmLoad(comms[0], kLoaded, path.c_str()), comms[0], "load");
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 16 * 100;
  d.algorithm = kLoaded;
  EXPECT_EQ(occlCollRegister(comms[0], 1, &d), occlInvalidArgument);
  const std::string why = occlGetLastError(comms[0]);
  EXPECT_NE(why.find("algorithm allpairs_allreduce gives rank 0 4 threadblocks, more than config.daemonBlocks = 2, "
                     "which needs preemption; config.disablePreemption is set"),
            std::string::npos)
      << why;
}

// Every fixture in the placement it runs, next to ring collectives, registered and submitted
// in a different random order on every rank.
TEST(IrDisorder, IrAndRingCollectivesInRandomPerRankOrders) {
  std::vector<std::string> names;
  std::vector<Spec> specs;
  size_t blocks = 1;
  for (const Fixture& f : fixtures()) {
    const ir::Program p = loadOrDie(f.path);
    if (p.nRanks != 4) continue;
    blocks = std::max(blocks, maxBlocks(p));
    names.push_back(f.path);
    Spec s{f.type, occlFloat32, occlSum, countsFor(p)[1], /*inPlace=*/!p.outOfPlace};
    s.root = f.root;
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
          expectOk(occlAlgorithmLoad(comms[r], n.c_str(), n.c_str()), comms[r], "load " + n);
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
