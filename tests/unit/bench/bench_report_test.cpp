// occl-bench's sweep without a communicator: nccl-tests' size sequence and iteration counts, the
// bus-bandwidth factors, the table's rows and footer, the checker against a host simulation, and
// the runner staging every buffer through the host view as for a GPU rank.
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
