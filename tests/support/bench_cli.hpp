// Test support for occl-bench's library (bench/): its argument parser and its main as the tests
// call them, and a temporary path per test process.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "bench.hpp"
#include "options.hpp"

namespace occl::bench::test {

inline ParsedArgs parse(std::vector<std::string> args) {
  args.insert(args.begin(), "occl-bench");
  return parseArgs(args);
}

struct CliRun {
  int exitCode;
  std::string out;
  std::string err;
};

inline CliRun runMain(std::vector<std::string> args) {
  args.insert(args.begin(), "occl-bench");
  std::ostringstream out, err;
  const int code = benchMain(args, out, err);
  return {code, out.str(), err.str()};
}

inline std::filesystem::path tempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("occl_bench_cli_test_" + std::to_string(::getpid()) + "_" + name);
}

}  // namespace occl::bench::test
