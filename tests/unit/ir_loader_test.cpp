// MSCCL-IR loader and Program validator: the project's fixtures (tests/data/msccl-ir: programs
// occl-ir emit writes from occl's generators, and hand-written edge cases) load, mutated copies of
// them are rejected with an error naming the element and line at fault, and so are the invalid
// fixtures. Where ../shared/msccl-ir (the MSCCLang compiler's output) is checked out next to the
// repository, its files are extra cases; without it nothing is skipped.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <sys/wait.h>

#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "occl/occl.h"

namespace occl::ir {
namespace {

const std::string kDataDir = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";
const std::string kSharedDir = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";

// The project's fixtures the tests below mutate.
constexpr const char* kRing = "ring_allreduce_4r.xml";
constexpr const char* kAllGather = "ring_allgather_4r.xml";
constexpr const char* kReduceScatter = "ring_reduce_scatter_4r.xml";
constexpr const char* kChainReduce = "chain_reduce_4r_root1.xml";
constexpr const char* kAllToAll = "direct_alltoall_4r.xml";
constexpr const char* kAllPairs = "allpairs_allreduce_4r.xml";
constexpr const char* kSplitBlocks = "edge_allreduce_2r_split_blocks.xml";
constexpr const char* kUnknownAttributes = "edge_unknown_attributes_2r.xml";

// A file's text; one that cannot be read fails the test (every path given here should exist).
std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A project fixture (tests/data/msccl-ir/NAME): part of the repository, so always there.
std::string fixture(const std::string& name) { return readFile(kDataDir + name); }

std::string replaceOnce(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "fixture no longer contains: " << from;
    return text;
  }
  return text.replace(at, from.size(), to);
}

std::string allErrors(const LoadResult& r) { return formatErrors(r.errors, "test"); }

// Passes when some error has this line (0 = any), mentions `element` and contains `message`.
::testing::AssertionResult HasError(const LoadResult& r, int line, std::string_view element, std::string_view message) {
  if (r.ok()) return ::testing::AssertionFailure() << "loaded without errors";
  for (const LoadError& e : r.errors)
    if ((line == 0 || e.line == line) && e.element.find(element) != std::string::npos &&
        e.message.find(message) != std::string::npos)
      return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no error at line " << line << " on " << element << " containing '"
                                       << message << "'; got:\n" << allErrors(r);
}

::testing::AssertionResult HasError(std::vector<LoadError> errors, int line, std::string_view element,
                                    std::string_view message) {
  LoadResult r;
  r.errors = std::move(errors);
  return HasError(r, line, element, message);
}

// An oracle independent of the wait graph: runs `tiles` tiles of a program the way the executor
// does, with `slots` slots per connector, and says whether every block finishes. A block takes
// its next chunk once its receive connector has data and its send connector has room, and at a
// step's sub 0 once its dependency has completed that step in this tile. A chunk that may go stays
// allowed until its block takes it, so the order blocks take turns in cannot change the outcome.
bool runsToCompletion(const Program& p, int32_t slots, int32_t tiles) {
  struct Cursor {
    int32_t tile = 0, step = 0, sub = 0;
  };
  struct Fifo {
    int64_t sent = 0, received = 0;
  };
  std::map<std::tuple<int32_t, int32_t, int32_t>, Fifo> fifos;  // (sender, receiver, channel)
  std::vector<std::vector<Cursor>> at(p.ranks.size());
  for (size_t r = 0; r < p.ranks.size(); ++r) at[r].resize(p.ranks[r].blocks.size());
  auto stepDone = [&](int32_t r, int32_t b, int32_t tile, int32_t step) {
    const Cursor& c = at[r][b];
    return c.tile > tile || (c.tile == tile && c.step > step);
  };
  // Advances block b of rank r by one chunk, step or tile if it may; false when it must wait.
  auto advance = [&](int32_t r, int32_t b) {
    const BlockProgram& block = p.ranks[r].blocks[b];
    Cursor& c = at[r][b];
    if (c.tile == tiles) return false;
    if (c.step == static_cast<int32_t>(block.steps.size())) {
      c = {c.tile + 1, 0, 0};
      return true;
    }
    const Step& st = block.steps[c.step];
    if (c.sub == 0 && st.depBlock >= 0 && !stepDone(r, st.depBlock, c.tile, st.depStep)) return false;
    if (c.sub == st.count) {
      c = {c.tile, c.step + 1, 0};
      return true;
    }
    Fifo* in = stepUsesRecvConnector(st.op) ? &fifos[{recvPeerOf(block, st), r, block.channel}] : nullptr;
    Fifo* out = stepUsesSendConnector(st.op) ? &fifos[{r, sendPeerOf(block, st), block.channel}] : nullptr;
    if ((in != nullptr && in->received == in->sent) || (out != nullptr && out->sent - out->received == slots))
      return false;
    if (in != nullptr) ++in->received;
    if (out != nullptr) ++out->sent;
    ++c.sub;
    return true;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int32_t r = 0; r < static_cast<int32_t>(p.ranks.size()); ++r)
      for (int32_t b = 0; b < static_cast<int32_t>(p.ranks[r].blocks.size()); ++b)
        while (advance(r, b)) moved = true;
  }
  for (const std::vector<Cursor>& blocks : at)
    for (const Cursor& c : blocks)
      if (c.tile != tiles) return false;
  return true;
}

// minConnectorSlots(p) is exact: with that many slots several tiles run through, with one fewer
// even the first tile hangs.
::testing::AssertionResult SlotsMatchExecution(const Program& p) {
  const int32_t slots = minConnectorSlots(p);
  if (slots < 1) return ::testing::AssertionFailure() << "minConnectorSlots = " << slots;
  if (!runsToCompletion(p, slots, 3)) return ::testing::AssertionFailure() << "hangs with " << slots << " slots";
  if (slots > 1 && runsToCompletion(p, slots - 1, 1))
    return ::testing::AssertionFailure() << "runs with " << slots - 1 << " slots, fewer than " << slots;
  return ::testing::AssertionSuccess();
}

struct FixtureShape {
  std::string path;
  CollKind coll;
  int ranks;
  int blocksPerRank;  // every rank of every fixture has as many
  int totalSteps;
  int minSlots;
  size_t warnings = 0;  // unknown attributes, one warning per element kind and name
};

void PrintTo(const FixtureShape& f, std::ostream* os) { *os << f.path; }

// Connector slots each fixture needs (minSlots). A ring block holds the chunk it received while its
// fused step (rcs, rrs, rrcs) waits for room to forward it; with one slot every rank's connector
// still holds the chunk its successor is holding, so all wait in a circle: rings need 2.
std::vector<FixtureShape> projectFixtures() {
  auto at = [](const char* file) { return kDataDir + file; };
  return {
      // s, rrs, rrs, rrcs, rcs, rcs, r: fused steps forward while holding, so 2.
      {at(kRing), CollKind::AllReduce, 4, 1, 28, 2},
      // The same ring on 3 ranks, one block per channel: 2.
      {at("ring_allreduce_3r_2ch.xml"), CollKind::AllReduce, 3, 2, 30, 2},
      // cpy, s, rcs, rcs, r: the rcs steps forward while holding, so 2.
      {at(kAllGather), CollKind::AllGather, 4, 1, 20, 2},
      // s, rrs, rrs, rrc: the rrs steps forward while holding, so 2.
      {at(kReduceScatter), CollKind::ReduceScatter, 4, 1, 16, 2},
      // A chain moves one chunk per connection per tile: nothing ever waits for room, so 1.
      {at(kChainReduce), CollKind::Reduce, 4, 1, 4, 1},
      {at("chain_broadcast_4r_root2.xml"), CollKind::Broadcast, 4, 1, 5, 1},
      // One threadblock per peer, one chunk each way per tile: 1.
      {at(kAllToAll), CollKind::AllToAll, 4, 3, 28, 1},
      // Each pair's threadblocks send cnt=4 before receiving cnt=4 from each other: with fewer
      // than 4 slots both stop mid-send on a full connector that only the other's receive could
      // drain. The second exchange (s cnt=4, r cnt=4) again needs room for 4, so 4; on 8 ranks
      // the exchanges move cnt=8, so 8.
      {at(kAllPairs), CollKind::AllReduce, 4, 4, 168, 4},
      {at("allpairs_allreduce_8r.xml"), CollKind::AllReduce, 8, 8, 1456, 8},
      // cpy, s, r, cpy: one chunk each way per tile, through scratch: 1.
      {at("edge_allgather_2r_scratch.xml"), CollKind::AllGather, 2, 1, 8, 1},
      // Sends and receives in different blocks, one chunk per connection per tile: 1.
      {at(kSplitBlocks), CollKind::AllReduce, 2, 2, 10, 1},
      // The same program with compiler, version (<algo>) and prio (<step>) added: 3 warnings.
      {at(kUnknownAttributes), CollKind::AllReduce, 2, 2, 10, 1, 3},
  };
}

// The MSCCLang compiler's output in ../shared/msccl-ir, where it is checked out.
std::vector<FixtureShape> mscclangFixtures() {
  auto at = [](const char* file) { return kSharedDir + file; };
  return {
      // s, rcs, rcs, r around the ring: the two rcs steps forward while holding, so 2.
      {at("allgather_ring_inplace_4r_1ch_1i_simple.xml"), CollKind::AllGather, 4, 1, 16, 2},
      // Every connection (one per channel) carries one chunk per tile: nothing ever waits for
      // room, so 1.
      {at("allgather_ring_oop_4r_auto.xml"), CollKind::AllGather, 4, 5, 20, 1},
      // The all-pairs exchange as above, in MSCCLang's layout: 4.
      {at("allreduce_allpairs_4r_1i_ll.xml"), CollKind::AllReduce, 4, 4, 140, 4},
      {at("allreduce_ring_4r_1ch_1i_simple.xml"), CollKind::AllReduce, 4, 1, 28, 2},
      {at("allreduce_ring_inplace_auto_4r_1i.xml"), CollKind::AllReduce, 4, 1, 28, 2},
      // One threadblock per (peer, direction), one chunk each per tile: 1.
      {at("alltoall_allpairs_4r_1i_simple.xml"), CollKind::AllToAll, 4, 6, 28, 1},
      // s, rrcs, rrcs, rrc: the rrcs steps forward while holding, so 2.
      {at("reduce_scatter_ring_oop_4r_1i_simple.xml"), CollKind::ReduceScatter, 4, 1, 20, 2},
  };
}

// Every project fixture, and those of ../shared that exist: the list is built from what is there,
// so a checkout without ../shared has fewer cases, not skipped ones.
std::vector<FixtureShape> fixtureCases() {
  std::vector<FixtureShape> cases = projectFixtures();
  for (FixtureShape& f : mscclangFixtures())
    if (std::filesystem::exists(f.path)) cases.push_back(std::move(f));
  return cases;
}

class FixtureTest : public ::testing::TestWithParam<FixtureShape> {};

TEST_P(FixtureTest, LoadsAndValidates) {
  const FixtureShape& f = GetParam();
  const std::string file = std::filesystem::path(f.path).filename().string();
  LoadResult r = loadMscclIrString(readFile(f.path), file);
  ASSERT_TRUE(r.ok()) << allErrors(r);
  // Neither MSCCLang nor occl-ir emit writes attributes occl does not know.
  EXPECT_EQ(r.warnings.size(), f.warnings) << formatWarnings(r.warnings, file);
  const Program& p = *r.program;
  EXPECT_EQ(p.coll, f.coll);
  EXPECT_EQ(p.nRanks, f.ranks);
  int steps = 0;
  for (const RankProgram& rank : p.ranks) {
    EXPECT_EQ(static_cast<int>(rank.blocks.size()), f.blocksPerRank);
    for (const BlockProgram& b : rank.blocks) steps += static_cast<int>(b.steps.size());
  }
  EXPECT_EQ(steps, f.totalSteps);
  EXPECT_TRUE(validateProgram(p).empty());
  EXPECT_EQ(p.minConnectorSlots, f.minSlots);
  EXPECT_EQ(minConnectorSlots(p), f.minSlots);
  EXPECT_TRUE(SlotsMatchExecution(p));
  const std::string summary = summarize(p);
  const std::string slots = std::to_string(f.minSlots);
  EXPECT_NE(summary.find(", " + std::to_string(f.ranks) + " ranks, "), std::string::npos) << summary;
  EXPECT_NE(summary.find(" " + std::to_string(f.totalSteps) + " steps\n"), std::string::npos) << summary;
  EXPECT_NE(summary.find("rank " + std::to_string(f.ranks - 1) + ": " + std::to_string(f.blocksPerRank) + " threadblocks"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("\n  connectors need >= " + slots + " slots (registration gives each max(config.connectorSlots, " +
                         slots + "))\n"),
            std::string::npos)
      << summary;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest, ::testing::ValuesIn(fixtureCases()),
                         [](const ::testing::TestParamInfo<FixtureShape>& info) {
                           const std::string stem = std::filesystem::path(info.param.path).stem().string();
                           std::string name = info.param.path.starts_with(kSharedDir) ? "mscclang_" + stem : stem;
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

// Every valid fixture of tests/data/msccl-ir is a case of FixtureTest: a new one cannot go
// unchecked.
TEST(IrLoader, FixtureTestCoversEveryProjectFixture) {
  std::vector<std::string> listed, present;
  for (const FixtureShape& f : projectFixtures()) listed.push_back(std::filesystem::path(f.path).filename().string());
  for (const auto& entry : std::filesystem::directory_iterator(kDataDir))
    if (entry.is_regular_file() && entry.path().extension() == ".xml") present.push_back(entry.path().filename().string());
  std::sort(listed.begin(), listed.end());
  std::sort(present.begin(), present.end());
  EXPECT_EQ(present, listed);
}

// Each file of tests/data/msccl-ir/invalid with the errors it must be rejected with, exactly.
struct InvalidFixture {
  const char* file;
  const char* errors;  // formatErrors(errors, file)
};

constexpr InvalidFixture kInvalidFixtures[] = {
    {"deadlock_2r.xml",
     "deadlock_2r.xml: line 6, <gpu id=0>/<tb id=0>/<step s=1>: deadlock: 4 steps wait on each other in a cycle (each "
     "must finish before the next can): <gpu id=0>/<tb id=0>/<step s=1> (line 6) -> <gpu id=1>/<tb id=0>/<step s=0> "
     "(line 11) -> <gpu id=1>/<tb id=0>/<step s=1> (line 12) -> <gpu id=0>/<tb id=0>/<step s=0> (line 5) -> <gpu "
     "id=0>/<tb id=0>/<step s=1> (line 6)\n"},
    {"unmatched_send_2r.xml",
     "unmatched_send_2r.xml: line 6, <gpu id=0>/<tb id=0>/<step s=1>: sends to rank 1 on channel 0, but no threadblock "
     "of rank 1 receives from rank 0 on channel 0\n"},
};

TEST(IrLoader, RejectsEveryInvalidFixture) {
  size_t checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kDataDir + "invalid")) {
    const std::string file = entry.path().filename().string();
    const auto* known = std::find_if(std::begin(kInvalidFixtures), std::end(kInvalidFixtures),
                                     [&](const InvalidFixture& f) { return file == f.file; });
    if (known == std::end(kInvalidFixtures)) {
      ADD_FAILURE() << "invalid/" << file << " has no expected errors in kInvalidFixtures";
      continue;
    }
    const LoadResult r = loadMscclIrFile(entry.path().string());
    EXPECT_FALSE(r.ok()) << file;
    EXPECT_EQ(formatErrors(r.errors, file), known->errors);
    ++checked;
  }
  EXPECT_EQ(checked, std::size(kInvalidFixtures));
}

// A 2-rank ring AllReduce written by hand, with attributes MSCCL-IR does not have: on <algo>, on
// two <step>s, and one whose name is not printable. MSCCL ignores unknown attributes; occl loads
// the program too, with one warning per element kind and name.
TEST(IrLoader, UnknownAttributesAreAcceptedWithAWarning) {
  const std::string xml =
      "<algo name=\"ar2\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" coll=\"allreduce\" "
      "inplace=\"1\" color=\"blue\">\n"
      "  <gpu id=\"0\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\">\n"
      "    <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
      "      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" prio=\"2\"/>\n"
      "      <step s=\"1\" type=\"rrcs\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
      "      <step s=\"2\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
      "    </tb>\n"
      "  </gpu>\n"
      "  <gpu id=\"1\" i_chunks=\"2\" o_chunks=\"0\" s_chunks=\"0\" x\xc3\xa9=\"1\">\n"
      "    <tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
      "      <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
      "      <step s=\"1\" type=\"rrcs\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"i\" dstoff=\"0\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\" prio=\"1\"/>\n"
      "      <step s=\"2\" type=\"r\" srcbuf=\"i\" srcoff=\"1\" dstbuf=\"i\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
      "    </tb>\n"
      "  </gpu>\n"
      "</algo>\n";
  LoadResult r = loadMscclIrString(xml, "ar2");
  ASSERT_TRUE(r.ok()) << allErrors(r);
  EXPECT_EQ(formatWarnings(r.warnings, "ar2.xml"),
            "ar2.xml: warning: line 1, <algo>: unknown attribute 'color' ignored, as MSCCL ignores it\n"
            "ar2.xml: warning: line 9, <gpu>: unknown attribute 'x?\?' ignored, as MSCCL ignores it\n"
            "ar2.xml: warning: line 4, <step>: unknown attribute 'prio' ignored, as MSCCL ignores it (on 2 <step> "
            "elements)\n");
  // Without them: the same program, no warning.
  std::string plain = replaceOnce(replaceOnce(xml, " color=\"blue\"", ""), " x\xc3\xa9=\"1\"", "");
  plain = replaceOnce(replaceOnce(plain, " prio=\"2\"", ""), " prio=\"1\"", "");
  LoadResult clean = loadMscclIrString(plain, "ar2");
  ASSERT_TRUE(clean.ok()) << allErrors(clean);
  EXPECT_TRUE(clean.warnings.empty()) << formatWarnings(clean.warnings, "ar2");
  EXPECT_EQ(summarize(*clean.program), summarize(*r.program));
}

// edge_unknown_attributes_2r.xml: edge_allreduce_2r_split_blocks.xml with attributes MSCCL-IR
// does not have. It loads as the same program, with one warning per element kind and name.
TEST(IrLoader, UnknownAttributesFixtureLoadsAsItsPlainTwin) {
  const LoadResult r = loadMscclIrFile(kDataDir + kUnknownAttributes);
  ASSERT_TRUE(r.ok()) << allErrors(r);
  EXPECT_EQ(formatWarnings(r.warnings, "u.xml"),
            "u.xml: warning: line 3, <algo>: unknown attribute 'compiler' ignored, as MSCCL ignores it\n"
            "u.xml: warning: line 3, <algo>: unknown attribute 'version' ignored, as MSCCL ignores it\n"
            "u.xml: warning: line 11, <step>: unknown attribute 'prio' ignored, as MSCCL ignores it (on 2 <step> "
            "elements)\n");
  const LoadResult plain = loadMscclIrFile(kDataDir + kSplitBlocks);
  ASSERT_TRUE(plain.ok()) << allErrors(plain);
  EXPECT_TRUE(plain.warnings.empty()) << formatWarnings(plain.warnings, kSplitBlocks);
  Program renamed = *plain.program;
  renamed.name = r.program->name;
  EXPECT_EQ(summarize(renamed), summarize(*r.program));
}

TEST(IrLoader, RingFieldsAndSummary) {
  const std::string xml = fixture(kRing);
  LoadResult r = loadMscclIrString(xml, kRing);
  ASSERT_TRUE(r.ok()) << allErrors(r);
  const Program& p = *r.program;
  EXPECT_EQ(p.name, "ring_allreduce");
  EXPECT_EQ(p.protocol, "Simple");
  EXPECT_TRUE(p.inPlace);
  EXPECT_TRUE(p.outOfPlace);
  EXPECT_EQ(p.nChannels, 1);
  EXPECT_EQ(p.nChunksPerLoop, 4);
  const BlockProgram& b = p.ranks[1].blocks[0];
  EXPECT_EQ(b.sendPeer, 2);
  EXPECT_EQ(b.recvPeer, 0);
  EXPECT_EQ(b.sourceLine, 14);
  ASSERT_EQ(b.steps.size(), 7u);
  EXPECT_EQ(b.steps[3].op, OpType::RecvReduceCopySend);
  EXPECT_EQ(b.steps[3].srcOff, 2);
  EXPECT_EQ(b.steps[3].sourceLine, 18);
  EXPECT_NE(summarize(p).find("rank 0: 1 threadblocks, 7 steps, chunks i=4 o=4 s=0; connections "
                              "(peer,channel,dir): (1,0,send) (3,0,recv)"), std::string::npos) << summarize(p);
}

TEST(IrLoader, RejectsDroppedReceive) {
  const std::string xml = fixture(kRing);
  // gpu 1's last step receives rank 0's sixth send (gpu 0, step 5, line 9).
  std::string bad = replaceOnce(xml, R"(      <step s="6" type="r" srcbuf="o" srcoff="3" dstbuf="o" dstoff="3" cnt="1" depid="-1" deps="-1" hasdep="0"/>
)", "");
  LoadResult r = loadMscclIrString(bad, "dropped");
  EXPECT_TRUE(HasError(r, 9, "<gpu id=0>/<tb id=0>/<step s=5>", "is never received"));
  EXPECT_TRUE(HasError(r, 9, "", "<gpu id=1>/<tb id=0> (line 14) has only 5 receive(s)"));
}

TEST(IrLoader, RejectsCountMismatch) {
  const std::string xml = fixture(kRing);
  // gpu 2's last step (line 32) receives what gpu 1's step 5 (line 20) sends.
  std::string bad = replaceOnce(xml, R"(<step s="6" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="1")",
                                R"(<step s="6" type="r" srcbuf="o" srcoff="0" dstbuf="o" dstoff="0" cnt="2")");
  LoadResult r = loadMscclIrString(bad, "count");
  EXPECT_TRUE(HasError(r, 32, "<gpu id=2>/<tb id=0>/<step s=6>", "has cnt=2, but the matching send"));
  EXPECT_TRUE(HasError(r, 32, "", "<gpu id=1>/<tb id=0>/<step s=5> (line 20) has cnt=1"));
}

TEST(IrLoader, RejectsDependencyCycleBetweenBlocks) {
  const std::string xml = fixture(kSplitBlocks);
  // gpu 0: tb 0 step 1 already waits on tb 1 step 0; make tb 1 step 0 wait on tb 0 step 1 too.
  std::string bad = replaceOnce(xml, R"(cnt="1" depid="-1" deps="-1" hasdep="1"/>)", R"(cnt="1" depid="0" deps="1" hasdep="1"/>)");
  bad = replaceOnce(bad, R"(cnt="0" depid="1" deps="0" hasdep="0"/>)", R"(cnt="0" depid="1" deps="0" hasdep="1"/>)");
  LoadResult r = loadMscclIrString(bad, "cycle");
  EXPECT_TRUE(HasError(r, 0, "<gpu id=0>/<tb id=", "deadlock: 2 steps wait on each other"));
  EXPECT_TRUE(HasError(r, 0, "", "<gpu id=0>/<tb id=1>/<step s=0> (line 12)"));
  EXPECT_TRUE(HasError(r, 0, "", "<gpu id=0>/<tb id=0>/<step s=1> (line 8)"));
}

TEST(IrLoader, RejectsCrossRankDeadlock) {
  // Both ranks receive before they send on the same threadblock: each waits for the other.
  const std::string xml = R"(<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="allreduce" inplace="1">
  <gpu id="0" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="2" o_chunks="0" s_chunks="0">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="r" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="s" srcbuf="i" srcoff="1" dstbuf="i" dstoff="1" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";
  LoadResult r = loadMscclIrString(xml, "xrank");
  EXPECT_TRUE(HasError(r, 0, "<step s=", "deadlock: 4 steps wait on each other"));
  // Swapping one rank's order (send first) breaks the cycle.
  std::string fixed = replaceOnce(xml, R"(<step s="0" type="r" srcbuf="i" srcoff="1")", R"(<step s="0" type="s" srcbuf="i" srcoff="1")");
  fixed = replaceOnce(fixed, R"(<step s="1" type="s" srcbuf="i" srcoff="0")", R"(<step s="1" type="r" srcbuf="i" srcoff="0")");
  LoadResult ok = loadMscclIrString(fixed, "xrank-fixed");
  EXPECT_TRUE(ok.ok()) << allErrors(ok);
}

TEST(IrLoader, RejectsDependencyProblems) {
  const std::string xml = fixture(kSplitBlocks);
  // The step tb 0 step 1 (line 8) waits on (tb 1 step 0, line 12) no longer publishes its progress.
  LoadResult r = loadMscclIrString(replaceOnce(xml, R"(depid="-1" deps="-1" hasdep="1"/>)", R"(depid="-1" deps="-1" hasdep="0"/>)"), "d");
  EXPECT_TRUE(HasError(r, 8, "<gpu id=0>/<tb id=0>/<step s=1>", "lacks hasdep=1"));
  r = loadMscclIrString(replaceOnce(xml, R"(depid="1" deps="0")", R"(depid="1" deps="5")"), "d");
  EXPECT_TRUE(HasError(r, 8, "<gpu id=0>/<tb id=0>/<step s=1>", "deps=5 names no step"));
  r = loadMscclIrString(replaceOnce(xml, R"(depid="1" deps="0")", R"(depid="9" deps="0")"), "d");
  EXPECT_TRUE(HasError(r, 8, "<step s=1>", "depid=9 names no threadblock"));
  r = loadMscclIrString(replaceOnce(xml, R"(depid="1" deps="0")", R"(depid="1" deps="-1")"), "d");
  EXPECT_TRUE(HasError(r, 8, "<step s=1>", "depid and deps must both be -1"));
  const std::string ring = fixture(kRing);
  r = loadMscclIrString(replaceOnce(ring, R"(hasdep="0"/>)", R"(hasdep="1"/>)"), "d");
  EXPECT_TRUE(HasError(r, 4, "<gpu id=0>/<tb id=0>/<step s=0>", "hasdep=1 but no step depends on it"));
}

TEST(IrLoader, RejectsMissingAttribute) {
  const std::string xml = fixture(kRing);
  LoadResult r = loadMscclIrString(replaceOnce(xml, R"( cnt="1")", ""), "missing");
  EXPECT_TRUE(HasError(r, 4, "<gpu id=0>/<tb id=0>/<step s=0>", "missing required attribute 'cnt'"));
  r = loadMscclIrString(replaceOnce(xml, R"( ngpus="4")", ""), "missing");
  EXPECT_TRUE(HasError(r, 1, "<algo>", "missing required attribute 'ngpus'"));
}

TEST(IrLoader, RejectsSharedConnectorAndDuplicatePeers) {
  const std::string xml = fixture(kAllToAll);
  // gpu 0's tb 0 (line 3) already sends to rank 1 on channel 0; tb 1 (line 8) sends to rank 2.
  LoadResult r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2")", R"(<tb id="1" send="1")"), "dup");
  EXPECT_TRUE(HasError(r, 8, "<gpu id=0>/<tb id=1>", "send peer 1 on channel 0 is already used by <gpu id=0>/<tb id=0> (line 3)"));
  r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2")", R"(<tb id="1" send="2" send="3")"), "two");
  EXPECT_TRUE(HasError(r, 8, "<gpu id=0>/<tb id=1>", "attribute 'send' appears more than once"));
  r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2")", R"(<tb id="1" send="0")"), "self");
  EXPECT_TRUE(HasError(r, 8, "<tb id=1>", "must not be the rank itself"));
  r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2")", R"(<tb id="1" send="4")"), "range");
  EXPECT_TRUE(HasError(r, 8, "<tb id=1>", "send peer must be -1 or in 0..3, got 4"));
  r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2" recv="2" chan="0">)", R"(<tb id="1" send="2" recv="2" chan="1">)"), "chan");
  EXPECT_TRUE(HasError(r, 8, "<tb id=1>", "chan must be in 0..0"));
}

TEST(IrLoader, RejectsSendWithoutPeer) {
  const std::string xml = fixture(kAllToAll);
  LoadResult r = loadMscclIrString(replaceOnce(xml, R"(<tb id="1" send="2")", R"(<tb id="1" send="-1")"), "nopeer");
  EXPECT_TRUE(HasError(r, 9, "<gpu id=0>/<tb id=1>/<step s=0>", "has no send peer"));
}

TEST(IrLoader, RejectsGarbageAndTruncation) {
  LoadResult r = loadMscclIrString(std::string_view("\x00\xff\x01<<garbage", 11), "garbage");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(HasError(r, 1, "<document>", ""));
  EXPECT_TRUE(HasError(loadMscclIrString("", "empty"), 1, "<document>", ""));
  EXPECT_TRUE(HasError(loadMscclIrString("<foo/>", "foo"), 1, "<document>", "unexpected element <foo>"));
  const std::string xml = fixture(kRing);
  r = loadMscclIrString(std::string_view(xml).substr(0, xml.size() / 2), "truncated");
  EXPECT_TRUE(HasError(r, 0, "<document>", "XML parse error"));
  EXPECT_GT(r.errors.front().line, 1);
  r = loadMscclIrString(replaceOnce(xml, "<tb id=\"0\" send=\"1\"", "<op step=\"0\"/><tb id=\"0\" send=\"1\""), "op");
  EXPECT_TRUE(HasError(r, 3, "<gpu id=0>", "unexpected element <op>, expected <tb>"));
}

TEST(IrLoader, RejectsBadNumbers) {
  const std::string xml = fixture(kRing);
  const std::string first = R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1")";
  auto withFirst = [&](std::string_view replacement) { return loadMscclIrString(replaceOnce(xml, first, replacement), "n"); };
  const char* step = "<gpu id=0>/<tb id=0>/<step s=0>";
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1x")"), 4, step,
                       "attribute 'cnt' must be an integer, got '1x'"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt=" 1")"), 4, step,
                       "must be an integer"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="-2")"), 4, step,
                       "attribute 'cnt' must be >= 0, got -2"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="99999999999999999999")"),
                       4, step, "attribute 'cnt' is out of range"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="4294967297")"),
                       4, step, "must be >= 0, got 4294967297"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="i" srcoff="3" dstbuf="i" dstoff="0" cnt="2")"), 4, step,
                       "srcoff=3 cnt=2 is outside buffer 'i' of 4 chunks"));
  // The ring has no scratch: reading it is out of bounds however small the range.
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="s" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1")"), 4, step,
                       "outside buffer 's' of 0 chunks"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="0" type="x" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1")"), 4, step,
                       "attribute 'type' must be one of nop, s, r"));
  EXPECT_TRUE(HasError(withFirst(R"(<step s="1" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1")"), 4,
                       "<step s=1>", "step s must be 0"));
}

TEST(IrLoader, RejectsBadAlgoAttributes) {
  const std::string xml = fixture(kRing);
  auto with = [&](std::string_view from, std::string_view to) { return loadMscclIrString(replaceOnce(xml, from, to), "a"); };
  EXPECT_TRUE(HasError(with(R"(ngpus="4")", R"(ngpus="0")"), 1, "<algo>", "'ngpus' must be in 1..1024, got 0"));
  EXPECT_TRUE(HasError(with(R"(ngpus="4")", R"(ngpus="5")"), 1, "<algo>", "no <gpu id=4>"));
  EXPECT_TRUE(HasError(with(R"(proto="Simple")", R"(proto="simple")"), 1, "<algo>", "'proto' must be one of Simple, LL, LL128"));
  EXPECT_TRUE(HasError(with(R"(inplace="1")", R"(inplace="2")"), 1, "<algo>", "'inplace' must be in 0..1"));
  EXPECT_TRUE(HasError(with(R"(outofplace="1")", R"(outofplace="2")"), 1, "<algo>", "'outofplace' must be in 0..1"));
  EXPECT_TRUE(HasError(with(R"(inplace="1" outofplace="1")", R"(inplace="0" outofplace="0")"), 1, "<algo>",
                       "inplace and outofplace are both 0: no call could run it"));
  EXPECT_TRUE(HasError(with(R"(inplace="1")", R"(inplace="1" minBytes="10" maxBytes="5")"), 1, "<algo>",
                       "minBytes (10) must not exceed maxBytes (5)"));
  EXPECT_TRUE(HasError(with(R"(nchunksperloop="4")", R"(nchunksperloop="2")"), 2, "<gpu id=0>", "i_chunks=4 is outside 0..2"));
  EXPECT_TRUE(HasError(with(R"(<gpu id="1")", R"(<gpu id="0")"), 13, "<gpu id=0>", "duplicate gpu id 0 (first at line 2)"));
  LoadResult r = with(R"(inplace="1")", R"(inplace="1" minBytes="1024" maxBytes="4096")");
  ASSERT_TRUE(r.ok()) << allErrors(r);
  EXPECT_EQ(r.program->minBytes, 1024u);
  EXPECT_EQ(r.program->maxBytes, 4096u);
}

TEST(IrLoader, CapsTheNumberOfErrors) {
  std::string xml = R"(<algo name="x" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="1" coll="allreduce" inplace="1">)";
  xml += "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"0\" s_chunks=\"0\">";
  for (int i = 0; i < 1000; ++i) xml += "<junk/>";
  xml += "</gpu></algo>";
  LoadResult r = loadMscclIrString(xml, "many");
  EXPECT_EQ(r.errors.size(), kMaxErrors + 1);
  EXPECT_NE(r.errors.back().message.find("too many errors"), std::string::npos);
}

Step makeStep(OpType op, int32_t chunk) {
  Step st;
  st.op = op;
  st.srcOff = st.dstOff = chunk;
  return st;
}

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
  p.ranks[2].blocks[0].steps[2].recvPeer = 2;
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=2>/<tb id=0>/<step s=2>", "step recv peer must not be the rank itself (2)"));
  p = direct;
  p.ranks[2].blocks[0].steps[1].sendPeer = 9;
  EXPECT_TRUE(HasError(validateProgram(p), 0, "<gpu id=2>/<tb id=0>/<step s=1>", "step send peer must be -1 or in 0..3, got 9"));
  p = direct;  // rank 3 never receives what rank 2 sends it
  auto& steps = p.ranks[3].blocks[0].steps;
  steps.erase(steps.begin() + 2);
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

// Where avg divides: the one step per chunk whose reduction completes the sum of all ranks.
std::vector<std::string> postOpSteps(const Program& p) {
  std::vector<std::string> out;
  for (size_t r = 0; r < p.ranks.size(); ++r)
    for (size_t b = 0; b < p.ranks[r].blocks.size(); ++b)
      for (size_t s = 0; s < p.ranks[r].blocks[b].steps.size(); ++s)
        if (p.ranks[r].blocks[b].steps[s].postOp)
          out.push_back(stepElement(static_cast<int32_t>(r), static_cast<int32_t>(b), static_cast<int32_t>(s)));
  return out;
}

// postOpSteps of a project fixture, as the loader marks them.
std::vector<std::string> loadedPostOps(const char* file) {
  const LoadResult r = loadMscclIrString(fixture(file), file);
  if (!r.ok()) {
    ADD_FAILURE() << file << ":\n" << allErrors(r);
    return {};
  }
  return postOpSteps(*r.program);
}

TEST(IrLoader, MarksPostOpsOfReductions) {
  // Rings: each rank's rrcs (step 3) completes the chunk it then sends around.
  EXPECT_EQ(loadedPostOps(kRing), (std::vector<std::string>{"<gpu id=0>/<tb id=0>/<step s=3>", "<gpu id=1>/<tb id=0>/<step s=3>",
                                                            "<gpu id=2>/<tb id=0>/<step s=3>", "<gpu id=3>/<tb id=0>/<step s=3>"}));
  EXPECT_EQ(loadedPostOps(kReduceScatter), (std::vector<std::string>{"<gpu id=0>/<tb id=0>/<step s=3>", "<gpu id=1>/<tb id=0>/<step s=3>",
                                                                     "<gpu id=2>/<tb id=0>/<step s=3>", "<gpu id=3>/<tb id=0>/<step s=3>"}));
  // The chain ends at the root (rank 1) with its rrc.
  EXPECT_EQ(loadedPostOps(kChainReduce), std::vector<std::string>{"<gpu id=1>/<tb id=0>/<step s=0>"});
  // Split blocks: each rank's receiving block completes its own chunk with rrc.
  EXPECT_EQ(loadedPostOps(kSplitBlocks), (std::vector<std::string>{"<gpu id=0>/<tb id=1>/<step s=0>", "<gpu id=1>/<tb id=1>/<step s=0>"}));
  // All-pairs: 16 chunks, each completed by the last of the three 're' that block adds into it
  // (step 5 of tb 0, which waits on nothing first; step 6 of the others, after their exchange).
  std::vector<std::string> lastReduces;
  for (int g = 0; g < 4; ++g)
    for (int b = 0; b < 4; ++b) lastReduces.push_back(stepElement(g, b, b == 0 ? 5 : 6));
  EXPECT_EQ(loadedPostOps(kAllPairs), lastReduces);
  EXPECT_TRUE(loadedPostOps(kAllGather).empty());
}

TEST(IrLoader, RandomByteFlipsNeverCrash) {
  const char* files[] = {kRing, kAllGather, kAllToAll, kAllPairs};
  std::mt19937 rng(12345);
  int rejected = 0;
  for (const char* f : files) {
    const std::string xml = fixture(f);
    ASSERT_FALSE(xml.empty()) << f;
    for (int iter = 0; iter < 100; ++iter) {
      std::string bad = xml;
      const int flips = 1 + static_cast<int>(rng() % 8);
      for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] = static_cast<char>(rng() % 256);
      LoadResult r = loadMscclIrString(bad, f);
      EXPECT_NE(r.ok(), !r.errors.empty());
      if (r.ok()) {
        EXPECT_TRUE(validateProgram(*r.program).empty());
      }
      for (const LoadError& e : r.errors) EXPECT_FALSE(e.message.empty());
      rejected += r.ok() ? 0 : 1;
    }
  }
  EXPECT_GT(rejected, 200);
}

TEST(IrLoader, LoadsFromFileAndReportsMissingFile) {
  EXPECT_TRUE(loadMscclIrFile(kDataDir + kRing).ok());
  EXPECT_TRUE(HasError(loadMscclIrFile(kDataDir + "no-such-file.xml"), 0, "<document>", "cannot open"));
}

// The occl-ir CLI the build puts next to this test (tools/ is a sibling of tests/). CI builds it
// before the tests run, so a missing binary fails the tests rather than skipping them.
const std::string kCli = std::string(OCCL_TEST_BINARY_DIR) + "/../../tools/occl-ir";

struct CliRun {
  int status = -1;  // the exit status; -1 when it did not exit
  std::string out;  // stdout and stderr
};

CliRun runCli(const std::string& args) {
  CliRun run;
  FILE* pipe = popen((kCli + " " + args + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen: " << kCli;
    return run;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) run.out.append(buf, n);
  const int status = pclose(pipe);
  if (WIFEXITED(status)) run.status = WEXITSTATUS(status);
  return run;
}

class OcclIrCli : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kCli)) << "occl-ir not built at " << kCli << ": build the occl-ir target first";
  }
};

TEST_F(OcclIrCli, ChecksFiles) {
  CliRun run = runCli("check " + kDataDir + kRing + " " + kDataDir + kAllToAll);
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find(kDataDir + kRing + ": ok\n"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("rank 0: 1 threadblocks, 7 steps"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  connectors need >= 2 slots (registration gives each max(config.connectorSlots, 2))\n"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  connectors need >= 1 slots (registration gives each max(config.connectorSlots, 1))\n"),
            std::string::npos)
      << run.out;
  // A program that needs more slots than the default configuration's 4 costs what it needs.
  run = runCli("check " + kDataDir + "allpairs_allreduce_8r.xml");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("  connector memory with the default configuration (4 slots of 128 KiB, one host): up to 14 "
                         "connector ends of 8 slots per rank, 14.0 MiB\n"),
            std::string::npos)
      << run.out;

  const std::string badPath = std::string(OCCL_TEST_BINARY_DIR) + "/ir_loader_test_bad.xml";
  std::ofstream(badPath) << replaceOnce(fixture(kRing), R"( cnt="1")", "");
  run = runCli("check " + badPath);
  std::filesystem::remove(badPath);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("line 4, <gpu id=0>/<tb id=0>/<step s=0>: missing required attribute 'cnt'"), std::string::npos)
      << run.out;
  run = runCli("--help");
  EXPECT_EQ(run.status, 0);
  EXPECT_NE(run.out.find("usage: occl-ir check FILE..."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("  --ranks N "), std::string::npos) << run.out;
  run = runCli("--version");
  EXPECT_EQ(run.status, 0);
  EXPECT_EQ(run.out, "occl-ir (occl) " + std::to_string(OCCL_MAJOR) + "." + std::to_string(OCCL_MINOR) + "." +
                         std::to_string(OCCL_PATCH) + "\n");
}

// "check -" reads standard input, named <stdin> in what it prints.
TEST_F(OcclIrCli, ChecksStandardInput) {
  CliRun run = runCli("check - < " + kDataDir + kRing);
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_TRUE(run.out.starts_with("<stdin>: ok\n")) << run.out;
  run = runCli("emit all_reduce --ranks 3 | " + kCli + " check -");
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find("3 ranks"), std::string::npos) << run.out;
  const std::string badPath = std::string(OCCL_TEST_BINARY_DIR) + "/ir_loader_test_stdin.xml";
  std::ofstream(badPath) << replaceOnce(fixture(kRing), R"( cnt="1")", "");
  run = runCli("check - < " + badPath);
  std::filesystem::remove(badPath);
  EXPECT_EQ(run.status, 1) << run.out;
  EXPECT_NE(run.out.find("<stdin>: line 4, <gpu id=0>/<tb id=0>/<step s=0>: missing required attribute 'cnt'"),
            std::string::npos)
      << run.out;
}

TEST_F(OcclIrCli, CheckWarnsAboutUnknownAttributesAndRejectsInvalidFixtures) {
  const std::string file = kDataDir + kUnknownAttributes;
  CliRun run = runCli("check " + file);
  EXPECT_EQ(run.status, 0) << run.out;
  EXPECT_NE(run.out.find(file + ": warning: line 3, <algo>: unknown attribute 'compiler' ignored, as MSCCL ignores it\n" +
                         file + ": warning: line 3, <algo>: unknown attribute 'version' ignored, as MSCCL ignores it\n" +
                         file + ": warning: line 11, <step>: unknown attribute 'prio' ignored, as MSCCL ignores it (on 2 "
                                "<step> elements)\n" +
                         file + ": ok\n"),
            std::string::npos)
      << run.out;
  for (const InvalidFixture& f : kInvalidFixtures) {
    const std::string path = kDataDir + "invalid/" + f.file;
    run = runCli("check " + path);
    EXPECT_EQ(run.status, 1) << run.out;
    // Each has one error: one line, naming the file as the command line did.
    EXPECT_EQ(run.out, path + ": 1 error(s)\n" + kDataDir + "invalid/" + f.errors);
  }
}

// occl-ir emit writes the emitted fixtures byte for byte (tests/data/msccl-ir/regenerate.sh).
TEST_F(OcclIrCli, EmitWritesTheProjectFixtures) {
  const std::pair<const char*, const char*> cases[] = {
      {"allreduce --ranks 4", kRing},
      {"allreduce --ranks 8 --algo allpairs", "allpairs_allreduce_8r.xml"},
      {"broadcast --ranks 4 --root 2", "chain_broadcast_4r_root2.xml"},
      {"alltoall --ranks 4", kAllToAll},
  };
  for (const auto& [args, file] : cases) {
    const CliRun run = runCli(std::string("emit ") + args);
    EXPECT_EQ(run.status, 0) << args << "\n" << run.out;
    EXPECT_EQ(run.out, fixture(file)) << "occl-ir emit " << args << " differs from " << file;
  }
}

// The collective names occl-bench, Python and MSCCL-IR use all work: case, '_' and '-' aside.
TEST_F(OcclIrCli, EmitTakesEveryToolsSpellingOfACollective) {
  for (const char* name : {"reducescatter", "reduce_scatter", "ReduceScatter", "reduce-scatter"}) {
    const CliRun run = runCli(std::string("emit ") + name + " --ranks 4");
    EXPECT_EQ(run.status, 0) << name << "\n" << run.out;
    EXPECT_NE(run.out.find(R"(name="ring_reduce_scatter")"), std::string::npos) << name << "\n" << run.out;
    EXPECT_NE(run.out.find(R"(coll="reduce_scatter")"), std::string::npos) << name << "\n" << run.out;
  }
  EXPECT_EQ(runCli("emit all_reduce --ranks 4").out, fixture(kRing));
}

// A bad argument exits 2 with one line naming it and the three-line synopsis; nothing is written.
TEST_F(OcclIrCli, RejectsBadArgumentsNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"emit allreduce --ranks 0", "--ranks 0: expected 1..1024"},
      {"emit allreduce --ranks four", "--ranks: invalid value \"four\"; expected an integer"},
      {"emit allreduce --ranks", "--ranks: missing value (N)"},
      {"emit allreduce", "emit needs --ranks N"},
      {"emit broadcast --ranks 4 --root 5", "--root 5: expected a rank in 0..3"},
      {"emit allreduce --ranks 4 --root 1", "--root: allreduce has no root"},
      {"emit allgather --ranks 4 --algo allpairs", "--algo allpairs: an allreduce algorithm, not allgather"},
      {"emit allreduce --ranks 4 --algo tree", "--algo tree: expected ring or, for allreduce, allpairs"},
      {"emit allsum --ranks 4", "emit allsum: expected one of allreduce, allgather, reducescatter, reduce, broadcast, alltoall"},
      {"emit send --ranks 4", "emit send: expected one of allreduce, allgather, reducescatter, reduce, broadcast, alltoall"},
      {"emit allreduce allgather --ranks 4", "emit takes one collective (got 2)"},
      {"emit allreduce --ranks 4 --bogus 1", "unknown flag \"--bogus\""},
      {"", "expected a command: check or emit"},
      {"check", "check needs at least one FILE ('-' for standard input)"},
      {"check --ranks 2 x.xml", "--ranks, --channels, --root, --algo and --name are emit's flags; check takes files only"},
      {"lint x.xml", "unknown command \"lint\": expected check or emit"},
  };
  for (const auto& [args, message] : cases) {
    const CliRun run = runCli(args);
    EXPECT_EQ(run.status, 2) << args;
    EXPECT_TRUE(run.out.starts_with(std::string("occl-ir: ") + message + "\nusage: occl-ir check FILE...")) << args << "\n"
                                                                                                       << run.out;
    EXPECT_EQ(std::count(run.out.begin(), run.out.end(), '\n'), 4) << args << ": one line and the synopsis\n" << run.out;
  }
}

}  // namespace
}  // namespace occl::ir
