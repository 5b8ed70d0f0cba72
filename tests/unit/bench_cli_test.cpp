// occl-bench through its library entry points: argument parsing (suffixes, "all", bad values),
// nccl-tests' size and bandwidth conventions, the table format, and end-to-end runs with ranks
// as threads that must verify every element.
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

namespace occl::bench {
namespace {

ParsedArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "occl-bench");
  return parseArgs(args);
}

struct CliRun {
  int exitCode;
  std::string out;
  std::string err;
};

CliRun runMain(std::vector<std::string> args) {
  args.insert(args.begin(), "occl-bench");
  std::ostringstream out, err;
  const int code = benchMain(args, out, err);
  return {code, out.str(), err.str()};
}

std::filesystem::path tempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("occl_bench_cli_test_" + std::to_string(::getpid()) + "_" + name);
}

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

TEST(BenchSizes, FollowNcclTestsSequence) {
  Options o;
  o.minBytes = 8;
  o.maxBytes = 64 << 10;
  o.stepFactor = 4;
  EXPECT_EQ(sizeSequence(o), (std::vector<uint64_t>{8, 32, 128, 512, 2048, 8192, 32768}));
  o.minBytes = 0;
  o.maxBytes = 10;
  o.stepFactor = 1;
  o.stepBytes = 5;
  EXPECT_EQ(sizeSequence(o), (std::vector<uint64_t>{0, 5, 10}));
}

TEST(BenchSizes, SmallSizesRunTheirOwnIterationCount) {
  const ParsedArgs p = parse({"-n", "20", "-w", "3", "--small-iters", "2000", "--small-max", "4K"});
  ASSERT_TRUE(p.ok()) << p.error;
  const Options& o = p.options;
  EXPECT_EQ(itersFor(o, 8).timed, 2000);
  EXPECT_EQ(itersFor(o, 8).warmup, 200);
  EXPECT_EQ(itersFor(o, 4096).timed, 2000);
  EXPECT_EQ(itersFor(o, 4097).timed, 20);
  EXPECT_EQ(itersFor(o, 4097).warmup, 3);
  Options few = o;
  few.smallIters = 10;  // a tenth is 1: the -w floor holds
  EXPECT_EQ(itersFor(few, 8).warmup, 3);
  EXPECT_EQ(itersFor(parse({"-n", "7"}).options, 8).timed, 7);  // off by default
  for (const auto& bad : {std::vector<std::string>{"--small-iters", "-1"}, {"--small-max", "8X"}}) {
    const ParsedArgs q = parse(bad);
    EXPECT_FALSE(q.ok());
    EXPECT_NE(q.error.find(bad[0]), std::string::npos) << q.error;
  }
}

TEST(BenchSizes, PerRankCollectivesRoundToWholeShares) {
  const SizePlan ag = planFor(Coll::AllGather, 100, occlFloat32, 3);  // 25 floats -> 8 per rank
  EXPECT_EQ(ag.count, 8u);
  EXPECT_EQ(ag.sendElems, 8u);
  EXPECT_EQ(ag.recvElems, 24u);
  EXPECT_EQ(ag.bytes, 96u);
  const SizePlan rs = planFor(Coll::ReduceScatter, 100, occlFloat32, 3);
  EXPECT_EQ(rs.count, 8u);
  EXPECT_EQ(rs.sendElems, 24u);
  EXPECT_EQ(rs.bytes, 96u);
  const SizePlan a2a = planFor(Coll::AllToAll, 64, occlInt64, 4);
  EXPECT_EQ(a2a.count, 2u);
  EXPECT_EQ(a2a.bytes, 64u);
  const SizePlan ar = planFor(Coll::AllReduce, 10, occlFloat32, 4);  // whole elements only
  EXPECT_EQ(ar.count, 2u);
  EXPECT_EQ(ar.bytes, 8u);
}

TEST(BenchBandwidth, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::ReduceScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::AllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Reduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(Coll::SendRecv, 8), 1.0);
  PlaceResult p;
  p.timeUs = 100.0;
  setBandwidth(p, 1000000, 1.5);  // 1 MB in 100 us = 10 GB/s
  EXPECT_DOUBLE_EQ(p.algBw, 10.0);
  EXPECT_DOUBLE_EQ(p.busBw, 15.0);
}

// A 1 MiB float sum AllReduce row, its times left to the test.
RowResult floatSumRow() {
  RowResult row;
  row.bytes = 1048576;
  row.count = 262144;
  row.dtype = occlFloat32;
  row.op = occlSum;
  row.root = -1;
  return row;
}

TEST(BenchReport, RowMatchesNcclTestsColumns) {
  RowResult row = floatSumRow();
  row.outOfPlace = {true, 123.456, 8.49, 12.74, 0, "", std::nullopt, std::nullopt};
  row.inPlace = {true, 12345.6, 0.08, 0.13, -1, "", std::nullopt, std::nullopt};
  EXPECT_EQ(formatRow(row),
            "     1048576        262144     float     sum      -1    123.5    8.49   12.74      0"
            "    12346    0.08    0.13    N/A\n");
  row.op = -1;
  row.inPlace = PlaceResult{};
  row.outOfPlace.timeUs = 7.0;
  EXPECT_EQ(formatRow(row),
            "     1048576        262144     float    none      -1     7.00    8.49   12.74      0"
            "      N/A     N/A     N/A    N/A\n");
  // Every header line and every row is as wide as nccl-tests' table.
  std::istringstream header(tableHeader());
  for (std::string line; std::getline(header, line);) EXPECT_EQ(line.size(), formatRow(row).size() - 1) << line;
}

TEST(BenchReport, FooterAndFailedRow) {
  EXPECT_EQ(formatFooter(0, 1.5), "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 1.5 \n#\n");
  EXPECT_NE(formatFooter(3, 0).find(": 3 FAILED"), std::string::npos);
  RowResult row;
  row.bytes = 8;
  row.count = 2;
  row.error = "occlCollRegister: invalid argument: not implemented yet";
  EXPECT_EQ(formatFailedRow(row), "#  size 8 count 2 type int8 redop none root -1: FAILED: " + row.error + "\n");
}

// The checker on its own, against a host simulation of the data movement: it must accept a
// correct result and count every element of one that was never written.
std::vector<std::vector<float>> inputsOf(const SizePlan& plan, int nRanks) {
  std::vector<std::vector<float>> in(static_cast<size_t>(nRanks), std::vector<float>(plan.sendElems));
  for (int r = 0; r < nRanks; ++r) writeInput(CheckSpec{plan, occlSum, 0, r, nRanks}, in[static_cast<size_t>(r)].data());
  return in;
}

TEST(BenchCheck, AcceptsSimulatedAllGatherAndAllToAll) {
  constexpr int n = 3;
  const SizePlan ag = planFor(Coll::AllGather, 3 * 5 * sizeof(float), occlFloat32, n);
  const auto agIn = inputsOf(ag, n);
  std::vector<float> gathered;
  for (const auto& v : agIn) gathered.insert(gathered.end(), v.begin(), v.end());
  for (int r = 0; r < n; ++r) EXPECT_EQ(countWrong(CheckSpec{ag, occlSum, 0, r, n}, gathered.data()), 0) << r;

  const SizePlan a2a = planFor(Coll::AllToAll, 3 * 4 * sizeof(float), occlFloat32, n);
  const auto a2aIn = inputsOf(a2a, n);
  for (int r = 0; r < n; ++r) {
    std::vector<float> out(a2a.recvElems);
    for (int src = 0; src < n; ++src)
      for (uint64_t i = 0; i < a2a.count; ++i)
        out[src * a2a.count + i] = a2aIn[static_cast<size_t>(src)][r * a2a.count + i];
    EXPECT_EQ(countWrong(CheckSpec{a2a, occlSum, 0, r, n}, out.data()), 0) << r;
  }
}

TEST(BenchCheck, CountsEveryUnwrittenElement) {
  for (Coll coll : {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Reduce, Coll::Broadcast,
                    Coll::AllToAll, Coll::SendRecv}) {
    for (int dtype : {occlInt8, occlFloat16, occlBfloat16, occlFloat64}) {
      const SizePlan plan = planFor(coll, 96, dtype, 4);
      const CheckSpec spec{plan, occlProd, 1, 1, 4};
      std::vector<std::byte> send(plan.sendElems * plan.elemSize), recv(plan.recvElems * plan.elemSize);
      prepareRun(spec, RunBuffers{send.data(), recv.data()});
      EXPECT_EQ(countWrong(spec, recv.data()), static_cast<int64_t>(plan.recvElems)) << collName(coll);
      if (coll == Coll::Reduce) {  // rank 1 is not the root here: it has no result to check
        EXPECT_EQ(countWrong(CheckSpec{plan, occlProd, 0, 1, 4}, recv.data()), 0);
      }
    }
  }
}

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

TEST(BenchSizes, TheSettleWarmUpRunsAtLeastSettleItersAndNeverLessThanTheRowsWarmUp) {
  const ParsedArgs p = parse({"-w", "3", "--small-iters", "2000", "--small-max", "4K", "--settle-iters", "500"});
  ASSERT_TRUE(p.ok()) << p.error;
  EXPECT_EQ(settleWarmUpIters(p.options, 8), 500);
  EXPECT_EQ(settleWarmUpIters(p.options, 8192), 500) << "above --small-max: -w 3, raised to 500";
  Options more = p.options;
  more.settleIters = 100;  // below the small rows' 200: those stay
  EXPECT_EQ(settleWarmUpIters(more, 8), 200);
  EXPECT_EQ(settleWarmUpIters(parse({"-w", "3"}).options, 8), 3) << "off by default";
  const ParsedArgs bad = parse({"--settle-iters", "-5"});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.error.find("--settle-iters"), std::string::npos) << bad.error;
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

TEST(BenchReport, NcclRowIsACommentWithOcclOverNcclTime) {
  RowResult row = floatSumRow();
  row.outOfPlace = {true, 100.0, 10.49, 15.73, 0, "", std::nullopt, std::nullopt};
  row.nccl = {true, 50.0, 20.97, 31.46, -1, "", std::nullopt, std::nullopt};
  EXPECT_EQ(formatNcclRow(row),
            "# nccl      1048576        262144     float     sum      -1    50.00   20.97   31.46       2.00\n");
  row.error = "occlCollRegister: not implemented";  // occl has no time to compare
  EXPECT_EQ(formatNcclRow(row).substr(formatNcclRow(row).size() - 10), "      N/A\n");
}

// Device memory's contract, on the host: data() (what occl reads and writes) is other memory than
// host(), and only upload() and download() move bytes between them. The runner and its side
// channel must stage every input, result and agreed number through them, as for a GPU rank.
std::atomic<int64_t> stagedUploads{0}, stagedDownloads{0};

class StagedBuffer final : public RunBuffer {
 public:
  void reserve(size_t bytes) override {
    far_.reserve(bytes);
    near_.reserve(bytes);
  }
  std::byte* data() override { return far_.data(); }
  std::byte* host() override { return near_.data(); }
  void upload(size_t offset, size_t bytes) override {
    std::memcpy(far_.data() + offset, near_.data() + offset, bytes);
    ++stagedUploads;
  }
  void download(size_t offset, size_t bytes) override {
    std::memcpy(near_.data() + offset, far_.data() + offset, bytes);
    ++stagedDownloads;
  }

 private:
  HostBuffer far_, near_;
};

std::unique_ptr<RunBuffer> makeStaged(int) { return std::make_unique<StagedBuffer>(); }

// Rank 0's rows of a run with staged buffers on `n` host ranks; `table` gets what rank 0 printed.
std::vector<RowResult> runStaged(const Options& o, int n, std::string& table) {
  occlConfig_t config;
  EXPECT_EQ(occlConfigInit(&config), occlSuccess);
  config.backend = occlBackendHost;
  std::vector<occlComm_t> comms(static_cast<size_t>(n), nullptr);
  EXPECT_EQ(occlCommInitAll(comms.data(), n, nullptr, &config), occlSuccess) << occlGetLastError(nullptr);
  std::ostringstream out, err;
  ErrorSink errors{err, {}};
  std::vector<std::unique_ptr<Report>> reports;
  for (int r = 0; r < n; ++r) reports.push_back(std::make_unique<Report>(r == 0 ? &out : nullptr, o, n));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r)
      threads.emplace_back([&, r] {
        const size_t i = static_cast<size_t>(r);
        RankRunner runner(o, comms[i], r, n, -1, *reports[i], errors, std::chrono::seconds(120), makeStaged);
        if (const std::string fatal = runner.run(); !fatal.empty()) {
          ADD_FAILURE() << "rank " << r << ": " << fatal;
          runner.abortComm();
          comms[i] = nullptr;
        }
      });
  }
  for (occlComm_t c : comms) {
    if (c == nullptr) continue;
    occlCommFinalize(c);
    occlCommDestroy(c);
  }
  EXPECT_TRUE(err.str().empty()) << err.str();
  table = out.str();
  return reports[0]->rows();
}

TEST(BenchRunner, StagesEveryInputAndResultThroughTheHostView) {
  for (const char* coll : {"allreduce", "allgather", "reducescatter", "broadcast"}) {
    const ParsedArgs p = parse({coll, "-b", "8", "-e", "8K", "-f", "32", "-g", "3", "-n", "2", "-w", "1", "-r", "2"});
    ASSERT_TRUE(p.ok()) << p.error;
    const int64_t uploads = stagedUploads, downloads = stagedDownloads;
    std::string table;
    const std::vector<RowResult> rows = runStaged(p.options, 3, table);
    ASSERT_EQ(rows.size(), 3u) << coll;
    // Every rank's pid reached rank 0 through the side channel's all-gather.
    for (int r = 0; r < 3; ++r) {
      char line[64];
      std::snprintf(line, sizeof line, "#  Rank %2d Group  0 Pid %6d on", r, static_cast<int>(::getpid()));
      EXPECT_NE(table.find(line), std::string::npos) << line << "\n" << table;
    }
    for (const RowResult& row : rows) {
      EXPECT_TRUE(row.error.empty()) << coll << " " << row.bytes << ": " << row.error;
      for (const PlaceResult* place : {&row.outOfPlace, &row.inPlace}) {
        EXPECT_TRUE(place->ran) << coll << " " << row.bytes;
        EXPECT_EQ(place->wrong, 0) << coll << " " << row.bytes;
        EXPECT_GT(place->timeUs, 0.0) << coll << " " << row.bytes;  // the agreed max came back
      }
    }
    EXPECT_GT(stagedUploads - uploads, 0) << coll;
    EXPECT_GT(stagedDownloads - downloads, 0) << coll;
  }
}

}  // namespace
}  // namespace occl::bench
