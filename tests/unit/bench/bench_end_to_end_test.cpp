// occl-bench end to end, ranks as threads, every element verified: host and simt ranks, gated
// submission, MSCCL-IR programs (and their connector slots), failed registrations per size, the
// header's settings and the JSON.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench.hpp"
#include "check.hpp"
#include "compare_nccl.hpp"
#include "devices.hpp"
#include "options.hpp"
#include "placement.hpp"
#include "plan.hpp"
#include "report.hpp"
#include "runner.hpp"
#include "support/bench_cli.hpp"

namespace occl::bench {
namespace {

using namespace test;

// The brief's end-to-end run: 4 ranks as threads, 8 B .. 64 KiB by 4, everything verified.
TEST(BenchEndToEnd, AllReduceFourRanksVerifiesEveryElement) {
  const std::vector<std::string> args = {"occl-bench", "allreduce", "-b", "8", "-e", "64K", "-f", "4",
                                         "-g",         "4",         "-n", "2", "-w", "1"};
  const ParsedArgs p = parseArgs(args);
  ASSERT_TRUE(p.ok()) << p.error;
  std::ostringstream out, err;
  const BenchOutcome o = runBench(p.options, out, err);
  EXPECT_EQ(o.exitCode, kExitOk) << out.str() << err.str();
  ASSERT_EQ(o.rows.size(), 7u) << out.str();
  for (const RowResult& row : o.rows) {
    EXPECT_TRUE(row.error.empty()) << row.error;
    EXPECT_TRUE(row.outOfPlace.ran && row.inPlace.ran);
    EXPECT_EQ(row.outOfPlace.wrong, 0) << row.bytes;
    EXPECT_EQ(row.inPlace.wrong, 0) << row.bytes;
    EXPECT_GT(row.outOfPlace.timeUs, 0.0);
  }
  EXPECT_EQ(o.wrongTotal, 0);
  EXPECT_NE(out.str().find("#  Rank  3 Group  0 Pid"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("# Out of bounds values : 0 OK"), std::string::npos) << out.str();
  EXPECT_EQ(runMain({"allreduce", "-b", "8", "-e", "8", "-g", "2", "-n", "1"}).exitCode, kExitOk);
}

// -t threads of -g ranks, -c checked runs and every -a run end to end and say so in the header.
TEST(BenchEndToEnd, ThreadsChecksAndAveragesAsNcclTestsMeanThem) {
  for (const char* average : {"0", "1", "2", "3"}) {
    const CliRun r = runMain({"allreduce", "-t", "3", "-b", "8", "-e", "1K", "-f", "8", "-n", "2", "-w", "1", "-c", "3",
                              "-a", average});
    EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
    EXPECT_NE(r.out.find("# nThread 3 nGpus 1 minBytes 8 maxBytes 1024"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("validation: 3 "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("#  Rank  2 Group  0 Pid"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  }
}

// Every type and operator: the host's expected values must match the daemon's bit for bit.
TEST(BenchEndToEnd, EveryTypeAndOperatorIsExact) {
  const CliRun r = runMain({"-d", "all", "-o", "all", "-b", "96", "-e", "96", "-g", "3", "-n", "1", "-w", "0"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("bfloat16     avg"), std::string::npos) << r.out;
}

TEST(BenchEndToEnd, UncheckedRunsPrintNA) {
  const CliRun r = runMain({"-b", "64", "-e", "64", "-g", "2", "-n", "1", "-c", "0"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("    N/A\n"), std::string::npos) << r.out;
}

TEST(BenchEndToEnd, SettleIterationsAreInTheHeader) {
  const CliRun r = runMain({"-b", "64", "-e", "64", "-g", "2", "-n", "1", "--settle-iters", "50"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
  EXPECT_NE(r.out.find("# settle iters: 50 (before the first row)\n"), std::string::npos) << r.out;
}

TEST(BenchEndToEnd, SmallSizeIterationsAreInTheHeader) {
  const CliRun r = runMain({"-b", "64", "-e", "128", "-f", "2", "-g", "2", "-n", "1", "-w", "2", "--small-iters", "30",
                            "--small-max", "64"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
  EXPECT_NE(r.out.find("# sizes up to 64 B: warmup iters: 3 iters: 30\n"), std::string::npos) << r.out;
}

// --backend simt runs the CUDA daemon's code on emulated blocks and prints its bus crossings:
// per collective at the smallest size, per MiB at the largest from 1 MiB (simt_crossings_test pins
// the numbers; this checks the lines).
TEST(BenchEndToEnd, SimtPrintsTheHostCrossings) {
  const CliRun r = runMain({"allreduce", "-b", "8", "-e", "1M", "-f", "131072", "-g", "2", "-n", "3", "-w", "1",
                            "--backend", "simt"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
  EXPECT_NE(r.out.find(", backend simt\n"), std::string::npos) << r.out;
  const size_t perCollective = r.out.find("# host crossings per collective: ");
  ASSERT_NE(perCollective, std::string::npos) << r.out;
  double reads = 0, writes = 0;
  ASSERT_EQ(std::sscanf(r.out.c_str() + perCollective, "# host crossings per collective: %lf reads, %lf writes (8 B", &reads,
                        &writes),
            2)
      << r.out;
  EXPECT_GT(reads, 0);
  EXPECT_GT(writes, 0);
  EXPECT_NE(r.out.find("# host crossings per MiB: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("writes (1048576 B out of place)\n"), std::string::npos) << r.out;
}

// --submit gated: every timed run goes through occlSubmitGated and occlGateOpen, results checked
// on host and simt ranks. (What the gate costs in bus crossings is pinned by simt_crossings_test,
// whose daemon does not quit between collectives; a short bench run's daemon may, and each quit
// writes its reports.)
TEST(BenchEndToEnd, GatedSubmissionRunsCheckedOnHostAndSimt) {
  const CliRun host = runMain({"allreduce", "-b", "8", "-e", "64K", "-f", "64", "-g", "3", "-n", "3", "-w", "1",
                               "--submit", "gated"});
  EXPECT_EQ(host.exitCode, kExitOk) << host.out << host.err;
  EXPECT_NE(host.out.find("# Out of bounds values : 0 OK"), std::string::npos) << host.out;
  const CliRun simt = runMain({"allreduce", "-b", "8", "-e", "8", "-g", "2", "-n", "3", "-w", "1", "--backend", "simt",
                               "--submit", "gated"});
  EXPECT_EQ(simt.exitCode, kExitOk) << simt.out << simt.err;
  EXPECT_NE(simt.out.find("# Out of bounds values : 0 OK"), std::string::npos) << simt.out;
  const CliRun stream = runMain({"allreduce", "-b", "8", "-e", "8", "--submit", "stream"});
  EXPECT_EQ(stream.exitCode, kExitUsage);
  EXPECT_NE(stream.err.find("--submit stream: a CUDA stream orders the submission; expected --backend cuda"),
            std::string::npos)
      << stream.err;
}

// --max-count: every size under one maximum registration, submitted with its own count, checked
// element by element (sizes off the chunk grid too: 3 x 7 floats on 3 ranks).
TEST(BenchEndToEnd, MaxCountRunsEverySizeUnderOneMaximum) {
  for (const char* coll : {"allreduce", "allgather", "alltoall"}) {
    const CliRun r = runMain({coll, "-b", "12", "-e", "64K", "-f", "7", "-g", "3", "-n", "3", "-w", "1", "--max-count",
                              "1M"});
    EXPECT_EQ(r.exitCode, kExitOk) << coll << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << coll << "\n" << r.out;
  }
}

TEST(BenchEndToEnd, HostRunsPrintNoCrossings) {
  const CliRun r = runMain({"-b", "8", "-e", "8", "-g", "2", "-n", "1"});
  EXPECT_EQ(r.exitCode, kExitOk) << r.out << r.err;
  EXPECT_EQ(r.out.find("host crossings"), std::string::npos) << r.out;
}

// The MSCCL-IR programs the tests below run: the project's (tests/data/msccl-ir) always, the
// MSCCLang compiler's (../shared/msccl-ir) as extra cases where it is checked out.
const std::string kDataIr = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";
const std::string kSharedIr = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";

struct ProgramRun {
  std::string file;
  std::string ranks;  // -g
  std::string tally;  // the "# algorithm:" line
};

// --algo FILE: the collective comes from the file, every element is checked, and the tally says
// which sizes and placements ran the program: a program written for both placements runs both, one
// written out of place only leaves the in-place calls to the built-in ring. A file that cannot run
// is refused before any size.
TEST(BenchEndToEnd, MscclIrProgramRunsAndIsReported) {
  std::vector<ProgramRun> runs = {
      {kDataIr + "ring_allgather_4r.xml", "4", "# algorithm: ring_allgather out-of-place 3, ring_allgather in-place 3\n"},
      {kDataIr + "edge_allgather_2r_scratch.xml", "2",
       "# algorithm: edge_allgather_scratch out-of-place 3, ring in-place 3\n"},
  };
  if (std::filesystem::exists(kSharedIr + "allgather_ring_oop_4r_auto.xml"))
    runs.push_back({kSharedIr + "allgather_ring_oop_4r_auto.xml", "4",
                    "# algorithm: allgather_ring out-of-place 3, ring in-place 3\n"});
  for (const ProgramRun& run : runs) {
    const CliRun r = runMain({"--algo", run.file, "-g", run.ranks, "-b", "64", "-e", "16K", "-f", "16", "-n", "2", "-w", "1"});
    EXPECT_EQ(r.exitCode, kExitOk) << run.file << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("# occl-bench allgather"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(run.tally), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
  }

  const std::string file = kDataIr + "ring_allgather_4r.xml";
  CliRun bad = runMain({"allreduce", "--algo", file, "-g", "4"});
  EXPECT_EQ(bad.exitCode, kExitUsage);
  EXPECT_NE(bad.err.find("is a program for allgather; the collective asked for is allreduce"), std::string::npos) << bad.err;
  bad = runMain({"--algo", file, "-g", "2"});
  EXPECT_EQ(bad.exitCode, kExitUsage);
  EXPECT_NE(bad.err.find("is written for 4 ranks: run it with -g 4 (got -g 2)"), std::string::npos) << bad.err;
  const std::filesystem::path bogus = tempPath("bogus.xml");
  std::ofstream(bogus) << "this is not MSCCL-IR\n";
  bad = runMain({"-g", "2", "--algo", bogus.string()});
  std::filesystem::remove(bogus);
  EXPECT_EQ(bad.exitCode, kExitUsage);
  EXPECT_NE(bad.err.find("bogus.xml: line 2, <document>: XML parse error"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out.find("FAILED"), std::string::npos) << "nothing ran: " << bad.out;
}

// Sets an environment variable for a scope, restoring what was there.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (saved_) setenv(name_, saved_->c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// A program that needs more connector slots than config.connectorSlots runs: registration gives
// its connectors max(config.connectorSlots, what it needs). All-pairs sends 4 chunks on a
// connection before its peer receives one, so with OCCL_CONN_SLOTS=2 its connectors get 4. It is
// written in place only: the out-of-place calls run the built-in ring, and so does 32 B in place
// (8 floats, not whole chunks of its 16).
TEST(BenchEndToEnd, ProgramNeedingMoreSlotsThanConfiguredRuns) {
  std::vector<std::pair<std::string, std::string>> programs = {{kDataIr + "allpairs_allreduce_4r.xml", "allpairs_allreduce"}};
  if (std::filesystem::exists(kSharedIr + "allreduce_allpairs_4r_1i_ll.xml"))
    programs.emplace_back(kSharedIr + "allreduce_allpairs_4r_1i_ll.xml", "allreduce_pairs");
  const ScopedEnv slots("OCCL_CONN_SLOTS", "2");
  for (const auto& [file, name] : programs) {
    const ParsedArgs p = parse({"--algo", file, "-g", "4", "-b", "32", "-e", "256", "-f", "2", "-n", "1", "-w", "0"});
    ASSERT_TRUE(p.ok()) << p.error;
    std::ostringstream out, err;
    const BenchOutcome o = runBench(p.options, out, err);
    EXPECT_EQ(o.exitCode, kExitOk) << out.str() << err.str();
    ASSERT_EQ(o.rows.size(), 4u) << out.str();  // 32, 64, 128, 256
    for (const RowResult& row : o.rows) {
      EXPECT_TRUE(row.error.empty()) << row.bytes << ": " << row.error;
      EXPECT_TRUE(row.outOfPlace.ran && row.inPlace.ran) << row.bytes;
      EXPECT_EQ(row.outOfPlace.wrong, 0) << row.bytes;
      EXPECT_EQ(row.inPlace.wrong, 0) << row.bytes;
      EXPECT_EQ(row.outOfPlace.algorithm, "ring") << row.bytes;
      EXPECT_EQ(row.inPlace.algorithm, row.bytes == 32 ? "ring" : name) << row.bytes;
    }
    EXPECT_EQ(o.wrongTotal, 0);
    EXPECT_NE(out.str().find("# algorithm: ring out-of-place 4, ring in-place 1, " + name + " in-place 3\n"),
              std::string::npos)
        << out.str();
  }
}

// A 2-rank in-place AllReduce in which each rank sends all its `chunks` chunks to the peer's
// scratch before it receives any, then adds the peer's into its own: it needs `chunks` slots.
std::string sendAllFirstAllReduce(int chunks) {
  const std::string n = std::to_string(chunks);
  auto step = [&](int s, const char* type, const char* src, const char* dst) {
    return "      <step s=\"" + std::to_string(s) + "\" type=\"" + type + "\" srcbuf=\"" + src + "\" srcoff=\"0\" dstbuf=\"" +
           dst + "\" dstoff=\"0\" cnt=\"" + n + "\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n";
  };
  std::string xml = "<algo name=\"send_all_first\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"" + n +
                    "\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\">\n";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string peer = std::to_string(1 - rank);
    xml += "  <gpu id=\"" + std::to_string(rank) + "\" i_chunks=\"" + n + "\" o_chunks=\"0\" s_chunks=\"" + n + "\">\n";
    xml += "    <tb id=\"0\" send=\"" + peer + "\" recv=\"" + peer + "\" chan=\"0\">\n";
    xml += step(0, "s", "i", "s") + step(1, "r", "i", "s") + step(2, "re", "s", "i") + "    </tb>\n  </gpu>\n";
  }
  return xml + "</algo>\n";
}

// A registration that fails on every rank is reported per size, the sweep goes on, and the exit
// code says so: a program that needs more slots than a connector may have (1025, past 1024) fails
// at the sizes it takes, 4100 and 8200 B, while 2048 B (512 floats, not whole chunks of its 1025)
// runs the built-in algorithm (the direct AllReduce, at that size).
// With -w 1 the warm-up before the sweep (at the largest size, which fails here) meets the
// refusal first: it leaves it to the row, which reports it.
TEST(BenchEndToEnd, FailedRegistrationIsReportedPerSizeAndTheRunContinues) {
  const std::filesystem::path file = tempPath("send_all_first.xml");
  std::ofstream(file) << sendAllFirstAllReduce(1025);
  const CliRun r = runMain({"--algo", file.string(), "-g", "2", "-b", "2050", "-e", "8200", "-f", "2", "-n", "1", "-w", "1"});
  std::filesystem::remove(file);
  EXPECT_EQ(r.exitCode, kExitFailed) << r.out << r.err;
  size_t failed = 0;
  for (size_t at = r.out.find(": FAILED: "); at != std::string::npos; at = r.out.find(": FAILED: ", at + 1)) ++failed;
  EXPECT_EQ(failed, 2u) << r.out;
  EXPECT_NE(r.out.find("algorithm send_all_first needs connectors of 1025 slots (it sends that many chunks on a "
                       "connection before they are received); at most 1024 (on 2 ranks)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("# algorithm: direct out-of-place 1, direct in-place 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

TEST(BenchEndToEnd, JsonNamesTheBackend) {
  const std::filesystem::path json = tempPath("out.json");
  const CliRun r = runMain({"-b", "16", "-e", "32", "-f", "2", "-g", "2", "-n", "1", "--json", json.string()});
  EXPECT_EQ(r.exitCode, kExitOk) << r.err;
  EXPECT_NE(r.out.find("2 rank(s), backend host"), std::string::npos) << r.out;
  std::ifstream in(json);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(json);
  EXPECT_NE(text.find("\"collective\": \"allreduce\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"backend\": \"host\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"size\": 32"), std::string::npos) << text;
  EXPECT_NE(text.find("\"out_of_bounds\": 0"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"nccl\""), std::string::npos) << text;  // only with --compare nccl
}

}  // namespace
}  // namespace occl::bench
