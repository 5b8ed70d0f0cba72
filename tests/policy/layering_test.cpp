// The layers of src/: README.md's Layout table says which folders each folder of src/ may include;
// this test reads that table and checks every quoted #include of every file under src/ against it,
// and that every folder of src/ has a row (a new folder must say where it sits). The rows of
// python/, bench/ and tools/ say which folders of src/ they may reach into; their other includes
// (their own headers, the test and benchmark libraries) are theirs. Within a folder, no files
// include each other in a circle: a file and its header count as one (validate.cpp with
// validate.hpp), so that two .cpp files that need each other's headers show up too.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const fs::path kSource = OCCL_SOURCE_DIR;

// The Layout table's rows that `row` matches (group 1 the folder, group 2 the last cell), in
// order, each with the folder names quoted in its last cell.
std::vector<std::pair<std::string, std::set<std::string>>> readmeRows(const std::regex& row) {
  std::ifstream readme(kSource / "README.md");
  EXPECT_TRUE(readme.is_open()) << "README.md not found under " << kSource;
  const std::regex name("`([a-z_]+)`");
  std::vector<std::pair<std::string, std::set<std::string>>> rows;
  for (std::string line; std::getline(readme, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    const std::string cell = m[2];
    std::set<std::string> names;
    for (auto it = std::sregex_iterator(cell.begin(), cell.end(), name); it != std::sregex_iterator(); ++it)
      names.insert((*it)[1]);
    if (names.empty() && cell.find("every folder above") != std::string::npos) {
      for (const auto& earlier : rows) names.insert(earlier.first);
    }
    rows.emplace_back(m[1], names);
  }
  return rows;
}

// Folder of src/ -> the folders it may include, from the rows "| `src/<folder>/` | ... | `a`, `b` |";
// a last cell that does not name folders ("every folder above") allows every folder of earlier rows.
std::map<std::string, std::set<std::string>> layersFromReadme(std::vector<std::string>* order) {
  std::map<std::string, std::set<std::string>> allowed;
  for (auto& [folder, names] : readmeRows(std::regex(R"(^\| `src/([a-z_]+)/` \|.*\|([^|]*)\|\s*$)"))) {
    allowed[folder] = names;
    order->push_back(folder);
  }
  return allowed;
}

// The rows "| `python/` | ... | `a`, `b` |" of the folders beside src/ that reach into it.
std::map<std::string, std::set<std::string>> reachFromReadme() {
  std::map<std::string, std::set<std::string>> allowed;
  for (auto& [folder, names] : readmeRows(std::regex(R"(^\| `(python|bench|tools)/` \|.*\|([^|]*)\|\s*$)")))
    allowed[folder] = names;
  return allowed;
}

// The first path component of each quoted include of `file` ("queues" for "queues/fifo.hpp").
std::vector<std::pair<int, std::string>> includedFolders(const fs::path& file) {
  std::ifstream in(file);
  const std::regex include(R"(^\s*#\s*include\s+"([^"/]+)/)");
  std::vector<std::pair<int, std::string>> out;
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    std::smatch m;
    if (std::regex_search(line, m, include)) out.emplace_back(lineNo, m[1]);
  }
  return out;
}

// Beside the table: the folder itself, the public header and the external libraries.
bool alwaysAllowed(const std::string& from, const std::string& to) {
  return to == from || to == "occl" || to == "absl" || to == "ucp" || to == "ucs" || to == "cuda" || to == "nccl";
}

TEST(LayeringTest, EveryFolderOfSrcHasARowInTheReadme) {
  std::vector<std::string> order;
  const auto allowed = layersFromReadme(&order);
  ASSERT_FALSE(allowed.empty()) << "no src/ rows in README.md's Layout table";
  for (const auto& entry : fs::directory_iterator(kSource / "src")) {
    if (!entry.is_directory()) continue;
    EXPECT_TRUE(allowed.count(entry.path().filename().string()))
        << "src/" << entry.path().filename().string() << "/ has no row in README.md's Layout table";
  }
}

TEST(LayeringTest, NoFolderIncludesOneAboveIt) {
  std::vector<std::string> order;
  const auto allowed = layersFromReadme(&order);
  ASSERT_FALSE(allowed.empty());
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "src")) {
    if (!entry.is_regular_file()) continue;
    const fs::path rel = fs::relative(entry.path(), kSource / "src");
    const std::string folder = rel.begin()->string();
    if (rel.begin() == rel.end() || std::next(rel.begin()) == rel.end()) continue;  // src/CMakeLists.txt
    const auto row = allowed.find(folder);
    if (row == allowed.end()) continue;  // reported by the test above
    ++files;
    for (const auto& [line, to] : includedFolders(entry.path())) {
      EXPECT_TRUE(alwaysAllowed(folder, to) || row->second.count(to))
          << "src/" << rel.string() << ":" << line << " includes \"" << to << "/...\", which README.md's Layout "
          << "table does not let src/" << folder << "/ include";
    }
  }
  EXPECT_GT(files, 50) << "found too few files under " << kSource / "src";
}

TEST(LayeringTest, PythonBenchAndToolsReachOnlyTheFoldersOfSrcTheirRowsName) {
  std::vector<std::string> order;
  const auto layers = layersFromReadme(&order);
  const std::set<std::string> srcFolders(order.begin(), order.end());
  const auto reach = reachFromReadme();
  ASSERT_EQ(reach.size(), 3u) << "README.md's Layout table needs rows for `python/`, `bench/` and `tools/`";
  int files = 0;
  for (const auto& [top, allowed] : reach) {
    for (const auto& entry : fs::recursive_directory_iterator(kSource / top)) {
      const std::string ext = entry.path().extension().string();
      if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu")) continue;
      ++files;
      for (const auto& [line, to] : includedFolders(entry.path())) {
        EXPECT_TRUE(!srcFolders.count(to) || allowed.count(to))
            << fs::relative(entry.path(), kSource).string() << ":" << line << " includes \"" << to
            << "/...\" of src/, which README.md's Layout table does not let " << top << "/ reach";
      }
    }
  }
  EXPECT_GT(files, 30) << "found too few files under python/, bench/ and tools/";
}

// The table is a strict order: a folder includes only folders of earlier rows, so there is no cycle.
TEST(LayeringTest, TheTableIsOrderedBottomUp) {
  std::vector<std::string> order;
  const auto allowed = layersFromReadme(&order);
  for (size_t i = 0; i < order.size(); ++i) {
    const std::set<std::string> earlier(order.begin(), order.begin() + static_cast<long>(i));
    for (const std::string& to : allowed.at(order[i]))
      EXPECT_TRUE(earlier.count(to)) << "src/" << order[i] << "/ may include " << to
                                     << ", which is not on an earlier row of the table";
  }
}

// src/<file> without its extension: "ir_loader/validate" for validate.hpp, validate.cpp and
// validate.cu alike.
std::string unitOf(const fs::path& rel) { return (rel.parent_path() / rel.stem()).string(); }

// Each unit of src/ -> the units its files include (quoted includes that name a file of src/).
std::map<std::string, std::set<std::string>> unitIncludes() {
  std::map<std::string, std::set<std::string>> edges;
  const std::regex include(R"re(^\s*#\s*include\s+"([^"]+)")re");
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "src")) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h" && ext != ".cu")) continue;
    const std::string from = unitOf(fs::relative(entry.path(), kSource / "src"));
    edges[from];
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) {
      std::smatch m;
      if (!std::regex_search(line, m, include) || !fs::exists(kSource / "src" / std::string(m[1]))) continue;
      const std::string to = unitOf(fs::path(std::string(m[1])));
      if (to != from) edges[from].insert(to);
    }
  }
  return edges;
}

// A circle of units through `at` (depth-first; `state`: 1 on the path, 2 done), or empty.
std::vector<std::string> circleFrom(const std::string& at, const std::map<std::string, std::set<std::string>>& edges,
                                    std::map<std::string, int>& state, std::vector<std::string>& path) {
  state[at] = 1;
  path.push_back(at);
  for (const std::string& to : edges.at(at)) {
    if (!edges.count(to)) continue;
    if (state[to] == 1) {
      std::vector<std::string> circle(std::find(path.begin(), path.end(), to), path.end());
      circle.push_back(to);
      return circle;
    }
    if (state[to] == 0) {
      std::vector<std::string> circle = circleFrom(to, edges, state, path);
      if (!circle.empty()) return circle;
    }
  }
  path.pop_back();
  state[at] = 2;
  return {};
}

TEST(LayeringTest, NoFilesIncludeEachOtherInACircle) {
  const auto edges = unitIncludes();
  ASSERT_GT(edges.size(), 50u);
  std::map<std::string, int> state;
  for (const auto& [unit, _] : edges) {
    if (state[unit] != 0) continue;
    std::vector<std::string> path;
    const std::vector<std::string> circle = circleFrom(unit, edges, state, path);
    // A circle leaves its path marked as on it: done now, so later starts report only new ones.
    for (auto& [_, s] : state) s = s == 1 ? 2 : s;
    std::string text;
    for (const std::string& u : circle) text += (text.empty() ? "" : " -> ") + u;
    EXPECT_TRUE(circle.empty()) << "src/ files (a unit is x.hpp with x.cpp) include each other in a circle: " << text;
  }
}

}  // namespace
