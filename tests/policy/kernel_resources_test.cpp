// The CUDA daemon kernel's resources per architecture, as ptxas reported them when this build
// compiled it (--resource-usage, kept by tools/gpu/record_kernel_resources.sh): registers, stack
// frame and spill bytes of the kernel and of every device function it did not inline. The kernel
// sits at its register cap (128 at 512 threads), where a change to the data path moves values to
// the stack: each spill is a local-memory round trip in the copy loop. This fails when any of them
// grows past tools/gpu/daemon_kernel_resources.txt; after a change that lowers them, or that must
// raise them, write the file again with the command the failure prints.
#include <cxxabi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <tuple>

namespace {

struct Resources {
  int registers = -1;  // -1: ptxas gives none (a device function that is not an entry)
  int stack = 0;
  int spillStores = 0;
  int spillLoads = 0;
};
using Key = std::pair<std::string, std::string>;  // (architecture, function)

// A readable name: demangled, without the hash of the kernel's anonymous namespace, which changes
// with the file's path.
std::string readable(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  std::string s = status == 0 && name ? name.get() : mangled;
  s = std::regex_replace(s, std::regex(R"(\(anonymous namespace\)::)"), "");
  // Not every parameter list: the function's name alone is what a reader looks for.
  const size_t paren = s.find('(');
  return paren == std::string::npos ? s : s.substr(0, paren);
}

std::map<Key, Resources> parseLog(std::istream& in) {
  const std::regex entry(R"(Compiling entry function '([^']+)' for '(sm_[0-9a-z]+)')");
  const std::regex props(R"(Function properties for (\S+))");
  const std::regex frame(R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  const std::regex regs(R"(Used (\d+) registers)");
  std::map<Key, Resources> out;
  std::string arch, function;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, entry)) {
      arch = m[2];
      function = readable(m[1]);
    } else if (std::regex_search(line, m, props)) {
      function = readable(m[1]);
    } else if (std::regex_search(line, m, frame) && !arch.empty()) {
      Resources& r = out[{arch, function}];
      r.stack = std::stoi(m[1]);
      r.spillStores = std::stoi(m[2]);
      r.spillLoads = std::stoi(m[3]);
    } else if (std::regex_search(line, m, regs) && !arch.empty()) {
      out[{arch, function}].registers = std::stoi(m[1]);
    }
  }
  return out;
}

// Lines "arch registers stack spillStores spillLoads function", '#' comments.
std::map<Key, Resources> parseCommitted(std::istream& in) {
  std::map<Key, Resources> out;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string arch, function;
    Resources r;
    fields >> arch >> r.registers >> r.stack >> r.spillStores >> r.spillLoads;
    std::getline(fields >> std::ws, function);
    EXPECT_FALSE(fields.fail() && function.empty()) << "unreadable line: " << line;
    out[{arch, function}] = r;
  }
  return out;
}

std::string format(const std::map<Key, Resources>& all) {
  std::string s =
      "# The CUDA daemon kernel's resources per architecture, from ptxas --resource-usage\n"
      "# (tests/policy/kernel_resources_test.cpp fails when a build's grow past these).\n"
      "# arch registers(-1: not an entry) stack-frame spill-stores spill-loads function\n";
  for (const auto& [key, r] : all)
    s += key.first + " " + std::to_string(r.registers) + " " + std::to_string(r.stack) + " " +
         std::to_string(r.spillStores) + " " + std::to_string(r.spillLoads) + " " + key.second + "\n";
  return s;
}

// This build's resources, from the log the CUDA build keeps (src/CMakeLists.txt).
std::map<Key, Resources> builtResources() {
  const std::string logPath = OCCL_KERNEL_RESOURCES_LOG;
  std::ifstream logFile(logPath);
  EXPECT_TRUE(logFile.is_open()) << logPath << ": not written; the CUDA build records it as it compiles "
                                 << "src/daemon/daemon_kernel.cu (src/CMakeLists.txt)";
  return parseLog(logFile);
}

const char* const kArchitectures[] = {"sm_80", "sm_90", "sm_100"};

// The tile loop (primitives.hpp: applyStep, never inlined, and the (type, op) dispatch it calls,
// which the compiler may split off further) keeps every value in registers: a spill there is a
// local-memory round trip per pack moved, so it is pinned at zero, not merely at the committed
// count. The kernel's own spills are its control path, live around the call.
TEST(KernelResources, TheTileLoopNeverSpills) {
  const std::map<Key, Resources> built = builtResources();
  ASSERT_FALSE(built.empty()) << OCCL_KERNEL_RESOURCES_LOG << " holds no resource lines";
  for (const char* arch : kArchitectures) {
    bool found = false;
    for (const auto& [key, r] : built) {
      if (key.first != arch) continue;
      const bool isApplyStep = key.second.rfind("occl::applyStep", 0) == 0;
      if (!isApplyStep && key.second.find("ReduceCopyCall") == std::string::npos) continue;
      found = found || isApplyStep;
      EXPECT_EQ(r.spillStores + r.spillLoads, 0)
          << arch << " " << key.second << " spills " << r.spillStores << "/" << r.spillLoads
          << " bytes in the tile loop: fewer packs in flight (primitives/reduce_copy.hpp) or less live across it";
    }
    EXPECT_TRUE(found) << arch << ": occl::applyStep is not a function of its own (OCCL_NOINLINE)";
  }
}

// ptxas may give the kernel fewer registers than its launch bound allows, and on this kernel it
// has: a change to the loop's shape once made it take 64 registers with a 14-31 KB stack (and 12
// minutes to compile). Fewer registers with no spills is fine; spills with registers left over are
// that collapse, which the growth check alone would miss when the committed file holds it.
TEST(KernelResources, TheKernelSpillsOnlyAtItsRegisterCap) {
  constexpr int kRegisterCap = 128;  // 65536 registers per SM / 512 threads (daemon_kernel.cu)
  const std::map<Key, Resources> built = builtResources();
  ASSERT_FALSE(built.empty()) << OCCL_KERNEL_RESOURCES_LOG << " holds no resource lines";
  for (const auto& [key, r] : built) {
    if (r.registers < 0 || r.spillStores + r.spillLoads == 0) continue;
    EXPECT_EQ(r.registers, kRegisterCap) << key.first << " " << key.second << " spills " << r.spillStores << "/"
                                         << r.spillLoads << " bytes while using " << r.registers << " registers";
  }
}

TEST(KernelResources, NoneGrewPastTheCommittedFile) {
  const std::string committedPath = std::string(OCCL_SOURCE_DIR) + "/tools/gpu/daemon_kernel_resources.txt";
  const std::map<Key, Resources> built = builtResources();
  ASSERT_FALSE(built.empty()) << OCCL_KERNEL_RESOURCES_LOG << " holds no resource lines";
  // The command that writes the committed file from this build's log.
  if (const char* write = std::getenv("OCCL_WRITE_KERNEL_RESOURCES"); write != nullptr && std::string(write) == "1") {
    std::ofstream(committedPath) << format(built);
    GTEST_SKIP() << "wrote " << committedPath;
  }
  std::ifstream committedFile(committedPath);
  ASSERT_TRUE(committedFile.is_open()) << committedPath;
  const std::map<Key, Resources> committed = parseCommitted(committedFile);
  const std::string again = "; if that is intended, write the file again: OCCL_WRITE_KERNEL_RESOURCES=1 " +
                            std::string("ctest --test-dir <build> -R KernelResources");
  for (const auto& [key, r] : built) {
    const std::string where = key.first + " " + key.second;
    auto it = committed.find(key);
    if (it == committed.end()) {
      EXPECT_TRUE(r.stack == 0 && r.spillStores == 0 && r.spillLoads == 0)
          << where << " is new and uses " << r.stack << " bytes of stack, spills " << r.spillStores << "/"
          << r.spillLoads << " bytes" << again;
      continue;
    }
    const Resources& c = it->second;
    EXPECT_LE(r.registers, c.registers) << where << ": registers" << again;
    EXPECT_LE(r.stack, c.stack) << where << ": stack frame bytes" << again;
    EXPECT_LE(r.spillStores, c.spillStores) << where << ": spill store bytes" << again;
    EXPECT_LE(r.spillLoads, c.spillLoads) << where << ": spill load bytes" << again;
  }
  for (const char* arch : kArchitectures) {
    bool any = false;
    for (const auto& entry : built) any = any || entry.first.first == arch;
    EXPECT_TRUE(any) << "the build compiled no " << arch << " code (CMAKE_CUDA_ARCHITECTURES)";
  }
}

}  // namespace
