// occl-bench's command line (bench/options.hpp, bench/bench.hpp): argument parsing (suffixes,
// "all", bad values, nccl-tests' flags and what each means here), devices and placement, the
// NCCL comparison's refusals, and how ranks agree on a time.
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

TEST(BenchArgs, BytesAcceptNcclTestsSuffixes) {
  EXPECT_EQ(parseBytes("8"), 8u);
  EXPECT_EQ(parseBytes("0"), 0u);
  EXPECT_EQ(parseBytes("64K"), 64u << 10);
  EXPECT_EQ(parseBytes("64k"), 64u << 10);
  EXPECT_EQ(parseBytes("1M"), 1u << 20);
  EXPECT_EQ(parseBytes("2g"), uint64_t{2} << 30);
  for (const char* bad : {"", "K", "12X", "-1", "1.5K", "1KB", " 8", "99999999999999999999", "17179869184G"})
    EXPECT_FALSE(parseBytes(bad).has_value()) << bad;
}

TEST(BenchArgs, ParsesTheNcclTestsFlags) {
  const ParsedArgs p = parse({"-b", "8", "-e64K", "--stepfactor=4", "-n", "2", "--warmup_iters", "3", "-c", "0", "-d",
                              "half", "-o", "max", "-r", "1", "-g", "4", "--blocks", "2", "--json", "x.json"});
  ASSERT_TRUE(p.ok()) << p.error;
  const Options& o = p.options;
  EXPECT_EQ(o.coll, Coll::AllReduce);
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, 64u << 10);
  EXPECT_EQ(o.stepFactor, 4u);
  EXPECT_EQ(o.iters, 2);
  EXPECT_EQ(o.warmupIters, 3);
  EXPECT_FALSE(o.check);
  EXPECT_EQ(o.dtypes, std::vector<int>{occlFloat16});
  EXPECT_EQ(o.ops, std::vector<int>{occlMax});
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.localRanks, 4);
  EXPECT_EQ(o.blocks, 2);
  EXPECT_EQ(o.jsonPath, "x.json");
}

TEST(BenchArgs, AllExpandsToEveryTypeAndOperator) {
  const ParsedArgs p = parse({"-d", "all", "-o", "all"});
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.options.dtypes.size(), static_cast<size_t>(occlNumTypes));
  EXPECT_EQ(p.options.ops, (std::vector<int>{occlSum, occlProd, occlMax, occlMin, occlAvg}));
}

TEST(BenchArgs, CollectiveFromPositionalFlagOrProgramName) {
  EXPECT_EQ(parse({"reducescatter"}).options.coll, Coll::ReduceScatter);
  EXPECT_EQ(parse({"all_gather_perf"}).options.coll, Coll::AllGather);
  EXPECT_EQ(parse({"--coll", "sendrecv"}).options.coll, Coll::SendRecv);
  EXPECT_EQ(parseArgs({"/opt/nccl-tests/build/alltoall_perf", "-b", "8"}).options.coll, Coll::AllToAll);
  EXPECT_EQ(parseArgs({"./broadcast_perf_mpi"}).options.coll, Coll::Broadcast);
}

TEST(BenchArgs, LastOfStepFactorAndStepBytesWins) {
  EXPECT_EQ(parse({"-f", "2", "-i", "1K"}).options.stepFactor, 1u);
  EXPECT_EQ(parse({"-i", "1K", "-f", "2"}).options.stepFactor, 2u);
}

TEST(BenchArgs, BadValuesNameTheFlagAndTheExpectation) {
  struct Case {
    std::vector<std::string> args;
    std::string mentions;
  };
  const std::vector<Case> cases = {
      {{"-b", "12X"}, "-b/--minbytes"},   {{"-e"}, "-e/--maxbytes: missing value"},
      {{"-f", "1"}, "-f/--stepfactor"},   {{"-n", "0"}, "-n/--iters"},
      {{"-c", "-1"}, "-c/--check"},       {{"-d", "float8"}, "-d/--datatype"},
      {{"-o", "xor"}, "-o/--op"},         {{"-g", "0"}, "-g/--ngpus"},
      {{"--backend", "gpu"}, "--backend"}, {{"--compare", "mpi"}, "--compare"},
      {{"--blocks", "65"}, "--blocks"},   {{"--algo", "/nonexistent/x.xml"}, "--algo"},
      {{"--bogus"}, "unknown flag"},      {{"-b", "64K", "-e", "8"}, "must not exceed"},
      {{"allreduce", "allgather"}, "second collective"}, {{"--mpi=1"}, "takes no value"},
      {{"-b", "0", "-f", "2"}, "-b/--minbytes"}, {{"-b", "1", "-e", "1G", "-i", "1"}, "-i/--stepbytes"},
      {{"--submit", "later"}, "--submit: invalid value \"later\"; expected plain, gated or stream"},
      {{"-a", "4"}, "-a/--average: invalid value \"4\"; expected an integer in 0..3"},
      {{"-T", "0"}, "-T/--timeout"},      {{"-t", "0"}, "-t/--nthreads"},
      {{"-t", "16", "-g", "17"}, "-t/--nthreads 16 x -g/--ngpus 17: expected at most 256 ranks"},
      {{"-p", "2"}, "-p/--parallel_init"}, {{"-1"}, "unknown flag \"-1\""},
      {{"-b", "8", "-e", "64K", "--max-count", "32K"}, "--max-count (32768) must be at least -e/--maxbytes (65536)"},
      {{"--max-count", "64M", "--submit", "gated"}, "--max-count: a gated or stream submission has its registered count"},
  };
  for (const Case& c : cases) {
    const ParsedArgs p = parse(c.args);
    EXPECT_FALSE(p.ok()) << c.args[0];
    EXPECT_NE(p.error.find(c.mentions), std::string::npos) << p.error;
  }
}

// nccl-tests' flags: each with its meaning here, or only the value occl-bench has a meaning for,
// any other refused naming why.
TEST(BenchArgs, TakesNcclTestsFlagsWithTheirMeanings) {
  const Options defaults = parse({}).options;
  EXPECT_EQ(defaults.warmupIters, 5);  // nccl-tests' -w default
  EXPECT_EQ(defaults.check, 1);
  EXPECT_EQ(defaults.average, 3);
  EXPECT_EQ(defaults.localRanks, 1);
  const ParsedArgs p = parse({"-t", "2", "-g", "3", "-c", "4", "-a", "1", "-T", "30", "-p", "1", "-z", "1", "-C", "1",
                              "-m", "1", "-N", "1", "-G", "0", "-y", "0", "-R", "0", "-S", "0", "-M", "0", "-J", "o.json"});
  ASSERT_TRUE(p.ok()) << p.error;
  const Options& o = p.options;
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.gpus, 3);
  EXPECT_EQ(o.localRanks, 6);  // -t x -g ranks in this process
  EXPECT_EQ(o.check, 4);
  EXPECT_EQ(o.average, 1);
  EXPECT_EQ(o.timeoutS, 30);
  EXPECT_EQ(o.jsonPath, "o.json");
  const std::pair<std::vector<std::string>, std::string> refused[] = {
      {{"-z", "0"}, "-z/--blocking: invalid value \"0\"; expected 1: occl-bench waits for each iteration"},
      {{"-G", "10"}, "-G/--cudagraph: invalid value \"10\"; expected 0: occl's collectives are not captured"},
      {{"-m", "4"}, "-m/--agg_iters: invalid value \"4\"; expected 1: occl has no grouped submission yet"},
      {{"-C", "0"}, "-C/--report_cputime: invalid value \"0\"; expected 1"},
  };
  for (const auto& [args, message] : refused) {
    const ParsedArgs bad = parse(args);
    EXPECT_NE(bad.error.find(message), std::string::npos) << bad.error;
  }
  const CliRun version = runMain({"--version"});
  EXPECT_EQ(version.exitCode, kExitOk);
  EXPECT_EQ(version.out, "occl-bench (occl) " + std::to_string(OCCL_MAJOR) + "." + std::to_string(OCCL_MINOR) + "." +
                             std::to_string(OCCL_PATCH) + "\n");
  // The help lists every flag nccl-tests' scripts pass.
  const CliRun help = runMain({"--help"});
  for (const char* flag : {"-t,--nthreads", "-g,--ngpus", "-b,--minbytes", "-e,--maxbytes", "-i,--stepbytes",
                           "-f,--stepfactor", "-n,--iters", "-m,--agg_iters", "-w,--warmup_iters", "-N,--run_cycles",
                           "-p,--parallel_init", "-c,--check", "-o,--op", "-d,--datatype", "-r,--root", "-z,--blocking",
                           "-y,--stream_null", "-T,--timeout", "-G,--cudagraph", "-C,--report_cputime",
                           "-S,--report_timestamps", "-J,--output_file", "-a,--average", "-R,--local_register",
                           "-M,--memory_report", "--version"})
    EXPECT_NE(help.out.find(std::string("  ") + flag + " "), std::string::npos) << flag;
}

// agreedTime on ranks whose times are `times`: each rank's contribution is collected first, then
// every rank is answered with the max or the sum of them, as the side channel or a baseline's
// library would.
std::vector<double> agreed(int average, const std::vector<double>& times) {
  const int n = static_cast<int>(times.size());
  std::vector<double> given(times.size());
  bool summed = false;
  for (int r = 0; r < n; ++r)
    agreedTime(
        average, times[static_cast<size_t>(r)], r, n,
        [&](double v) { return given[static_cast<size_t>(r)] = v; },
        [&](double v) {
          summed = true;
          return given[static_cast<size_t>(r)] = v;
        });
  double total = 0, most = given[0];
  for (double g : given) total += g, most = std::max(most, g);
  std::vector<double> answers;
  for (int r = 0; r < n; ++r)
    answers.push_back(agreedTime(
        average, times[static_cast<size_t>(r)], r, n, [&](double) { return most; }, [&](double) { return total; }));
  EXPECT_EQ(summed, average <= 1);
  return answers;
}

TEST(BenchArgs, AverageTakesRankZerosTheMeanTheLeastOrTheMost) {
  const std::vector<double> times = {3.0, 1.0, 8.0};
  EXPECT_EQ(agreed(0, times), std::vector<double>(3, 3.0));
  EXPECT_EQ(agreed(1, times), std::vector<double>(3, 4.0));
  EXPECT_EQ(agreed(2, times), std::vector<double>(3, 1.0));
  EXPECT_EQ(agreed(3, times), std::vector<double>(3, 8.0));
}

TEST(BenchArgs, BadArgumentsExitWithCodeTwo) {
  const CliRun r = runMain({"-d", "float8"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_NE(r.err.find("-d/--datatype: invalid value \"float8\"; expected"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(runMain({"reduce", "-r", "2", "-g", "2", "-b", "8", "-e", "8"}).exitCode, kExitUsage);
  EXPECT_EQ(runMain({"--devlist", "0,1", "-b", "8", "-e", "8"}).exitCode, kExitUsage);
  EXPECT_EQ(runMain({"--help"}).exitCode, kExitOk);
}

TEST(BenchArgs, DevlistGivesOneDevicePerRank) {
  const ParsedArgs p = parse({"--devlist", "0,0,1", "-g", "3"});  // -g may come after --devlist
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(p.options.devlist, (std::vector<int>{0, 0, 1}));
  EXPECT_EQ(parse({"--devlist=2"}).options.devlist, std::vector<int>{2});
  EXPECT_TRUE(parse({}).options.devlist.empty());
}

TEST(BenchArgs, BadDevlistNamesTheFlagAndTheExpectation) {
  const std::string list = "expected a comma-separated list of CUDA device numbers (integers >= 0)";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--devlist", "0,1", "-g", "3"}, "--devlist: 2 device(s) given; expected 3, one per rank of -g/--ngpus 3"},
      {{"--devlist", "0,0,0,0"}, "--devlist: 4 device(s) given; expected 1"},
      {{"--devlist", "0,a", "-g", "2"}, "--devlist: invalid value \"0,a\"; " + list},
      {{"--devlist", "1.5"}, "--devlist: invalid value \"1.5\"; " + list},
      {{"--devlist", "0,,1", "-g", "3"}, "--devlist: invalid value \"0,,1\"; " + list},
      {{"--devlist", ""}, "--devlist: invalid value \"\"; " + list},
      {{"--devlist", "-1"}, "--devlist: invalid value \"-1\"; " + list},
      {{"--devlist", "0,-2", "-g", "2"}, "--devlist: invalid value \"0,-2\"; " + list},
      {{"--devlist", "99999999999", "-g", "1"}, "--devlist: invalid value \"99999999999\"; " + list},
      {{"--devlist"}, "--devlist: missing value"},
      {{"--devlist", "0", "--backend", "host"}, "--devlist names CUDA devices, but --backend host"},
  };
  for (const auto& [args, mentions] : cases) {
    const CliRun r = runMain(args);
    EXPECT_EQ(r.exitCode, kExitUsage) << args[1];
    EXPECT_NE(r.err.find(mentions), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// Rank r on device r % count unless --devlist places it; host ranks have no device.
TEST(BenchPlacement, DevicesFollowTheDevlistOrRankModuloCount) {
  Placement p;
  EXPECT_EQ(p.devices(2), (std::vector<int>{-1, -1}));
  p.backend = occlBackendCuda;
  p.deviceCount = 2;
  EXPECT_EQ(p.devices(5), (std::vector<int>{0, 1, 0, 1, 0}));
  p.devlist = {1, 1, 0};
  EXPECT_EQ(p.devices(3), (std::vector<int>{1, 1, 0}));
  EXPECT_EQ(ncclDeviceClash({0, 1, 2}, 4), "");
  EXPECT_EQ(ncclDeviceClash({0, 1, 1}, 2),
            "--compare nccl: NCCL runs one rank per GPU, but ranks 1 and 2 both run on CUDA device 1; expected "
            "-g/--ngpus at most 2 or a --devlist without repeats");
}

// Without a GPU, asking for one fails at once with the reason and exit code 1: no table, no
// crash. Where a GPU is present these runs would measure it, so the test does not apply there.
TEST(BenchCuda, GpuRunsWithoutAGpuFailClearly) {
  const DeviceCount devices = cudaDevices();
  if (devices.count > 0) GTEST_SKIP() << devices.count << " CUDA device(s) present: --backend cuda runs";
  const std::string why = buildHasCuda() ? "no CUDA device: cudaGetDeviceCount" : "this build has no CUDA backend";
  for (const auto& [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--backend", "cuda", "-b", "8", "-e", "8"}, "--backend cuda"},
           {{"--backend", "cuda", "-g", "2", "--devlist", "0,0", "-b", "8", "-e", "8"}, "--backend cuda"},
           {{"--devlist", "0", "-b", "8", "-e", "8"}, "--devlist"}}) {
    const CliRun r = runMain(args);
    EXPECT_EQ(r.exitCode, kExitFailed) << r.err;
    EXPECT_NE(r.err.find("occl-bench: " + option + ": " + devices.error), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(why), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

TEST(BenchCompare, NcclWithHostRanksOrSendRecvIsABadArgument) {
  CliRun r = runMain({"--compare", "nccl", "--backend", "host", "-b", "8", "-e", "8"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_NE(r.err.find("--compare nccl: NCCL runs on GPUs, but --backend host runs occl on host threads; expected "
                       "--backend cuda"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  r = runMain({"sendrecv", "--compare", "nccl", "-g", "2"});
  EXPECT_EQ(r.exitCode, kExitUsage);
  EXPECT_NE(r.err.find("--compare nccl: sendrecv has no NCCL comparison"), std::string::npos) << r.err;
}

// A build without NCCL says so whatever the machine; one with NCCL needs a GPU first.
TEST(BenchCompare, NcclWithoutNcclOrGpuFailsClearly) {
  const std::string missing = ncclMissingFromBuild();
  const DeviceCount devices = cudaDevices();
  if (missing.empty() && devices.count > 0) GTEST_SKIP() << "NCCL and a GPU are present: --compare nccl runs";
  const CliRun r = runMain({"--compare", "nccl", "-b", "8", "-e", "8"});
  EXPECT_TRUE(r.out.empty()) << r.out;
  if (!missing.empty()) {
    EXPECT_EQ(r.exitCode, kExitUsage);
    EXPECT_NE(r.err.find("--compare nccl: this build has no NCCL"), std::string::npos) << r.err;
  } else {
    EXPECT_EQ(r.exitCode, kExitFailed);
    EXPECT_NE(r.err.find("--compare nccl: no CUDA device"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace occl::bench
