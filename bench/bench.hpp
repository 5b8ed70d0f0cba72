// occl-bench's library entry points: the CLI (main.cpp) and bench_cli_test call these, so the
// test runs exactly what the binary runs, in process.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"

namespace occl::bench {

// Exit codes: 0 all rows ran and verified; 1 a row failed, a value was wrong, or occl failed;
// 2 bad arguments (nothing ran).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;

struct BenchOutcome {
  int exitCode = kExitOk;
  std::vector<RowResult> rows;  // as agreed by all ranks (rank 0's report)
  int64_t wrongTotal = 0;
  int failedRows = 0;
  double avgBusBw = 0;
};

// Runs parsed options: ranks as threads (-g), or one rank of a launcher's job.
BenchOutcome runBench(const Options& options, std::ostream& out, std::ostream& err);

// The whole program: args[0] is the program path. Returns the process exit code.
int benchMain(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace occl::bench
