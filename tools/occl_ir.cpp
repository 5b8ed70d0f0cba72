// occl-ir: checks MSCCL-IR files the way occl would load them, before a job finds out at
// registration time.
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/validate.hpp"

namespace {

constexpr const char* kUsage =
    "usage: occl-ir check FILE...\n"
    "       occl-ir --help\n"
    "\n"
    "check   parse and validate each MSCCL-IR XML file (the MSCCLang compiler's output): attributes,\n"
    "        limits, buffer bounds, peers, send/receive matching across ranks, dependencies and\n"
    "        deadlock freedom. Prints a summary of each valid file (ranks, threadblocks, steps, the\n"
    "        connectorSlots it needs, connections) on stdout and each problem, as\n"
    "        FILE: line N, <element>: message, on stderr. Attributes occl does not know are ignored,\n"
    "        as MSCCL ignores them, with a warning (FILE: warning: ...) on stderr.\n"
    "\n"
    "exit status: 0 every file is valid, 1 some file is not, 2 usage error\n";

int check(const std::vector<std::string>& files) {
  int status = 0;
  for (const std::string& file : files) {
    occl::ir::LoadResult r = occl::ir::loadMscclIrFile(file);
    if (r.ok()) {
      std::fputs(occl::ir::formatWarnings(r.warnings, file).c_str(), stderr);
      std::printf("%s: ok\n%s", file.c_str(), occl::ir::summarize(*r.program).c_str());
    } else {
      std::fprintf(stderr, "%s: %zu error(s)\n%s", file.c_str(), r.errors.size(),
                   occl::ir::formatErrors(r.errors, file).c_str());
      status = 1;
    }
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (args.size() < 2 || args[0] != "check") {
    std::fputs(kUsage, stderr);
    return 2;
  }
  return check(std::vector<std::string>(args.begin() + 1, args.end()));
}
