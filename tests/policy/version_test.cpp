// The version is written once (include/occl/occl.h): the library reports it, CMake's project
// took it (OCCL_PROJECT_VERSION), and CHANGELOG.md's newest entry names it.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "occl/occl.h"

namespace {

std::string dotted(int code) {
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

TEST(Version, TheLibraryCMakeAndTheChangelogAgree) {
  int version = -1;
  ASSERT_EQ(occlGetVersion(&version), occlSuccess);
  EXPECT_EQ(version, OCCL_VERSION_CODE) << "the library and the header it was built with differ";
  EXPECT_EQ(dotted(version), OCCL_PROJECT_VERSION) << "CMakeLists.txt's project version";
  std::ifstream changelog(std::string(OCCL_SOURCE_DIR) + "/CHANGELOG.md");
  ASSERT_TRUE(changelog) << "CHANGELOG.md is missing";
  std::string line;
  while (std::getline(changelog, line) && line.rfind("## ", 0) != 0) {
  }
  EXPECT_EQ(line.rfind("## " + dotted(version) + " ", 0), 0u)
      << "CHANGELOG.md's newest entry is '" << line << "', not version " << dotted(version);
}

}  // namespace
