// occl-ir, the MSCCL-IR tool (tools/occl_ir.cpp), run as a user runs it: check (files and standard
// input, warnings, the invalid fixtures), emit (the project's fixtures byte for byte, every
// tool's spelling of a collective), and bad arguments named with the synopsis.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/msccl_ir_files.hpp"

namespace occl::ir {
namespace {

using namespace test;

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
