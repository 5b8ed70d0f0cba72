// The MSCCL-IR loader: the project's fixtures (tests/data/msccl-ir: programs occl-ir emit writes
// from occl's generators, and hand-written edge cases) load and validate, mutated copies of them
// are rejected with an error naming the element and line at fault, and so are the invalid
// fixtures. Where ../shared/msccl-ir (the MSCCLang compiler's output) is checked out next to the
// repository, its files are extra cases; without it nothing is skipped. (validate_test checks
// the validator on built programs, tools/occl_ir_cli_test the occl-ir tool.)
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

#include "absl/strings/str_cat.h"
#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "occl/occl.h"
#include "support/msccl_ir_files.hpp"

namespace occl::ir {
namespace {

using namespace test;

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
  EXPECT_NE(summary.find(absl::StrCat(", ", f.ranks, " ranks, ")), std::string::npos) << summary;
  EXPECT_NE(summary.find(absl::StrCat(" ", f.totalSteps, " steps\n")), std::string::npos) << summary;
  EXPECT_NE(summary.find(absl::StrCat("rank ", f.ranks - 1, ": ", f.blocksPerRank, " threadblocks")), std::string::npos)
      << summary;
  EXPECT_NE(summary.find(absl::StrCat("\n  connectors need >= ", slots,
                                      " slots (registration gives each max(config.connectorSlots, ", slots, "))\n")),
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

}  // namespace
}  // namespace occl::ir
