// util/cache_size.hpp: the last-level cache read from a sysfs-like tree this test writes (the
// highest level that holds data, instruction caches and unparsable sizes skipped), and the size
// suffixes Linux uses.
#include "util/cache_size.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/process_job.hpp"

namespace occl {
namespace {

void writeIndex(const std::string& root, int index, int level, const std::string& type, const std::string& size) {
  const std::string dir = root + "/index" + std::to_string(index);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/level") << level << "\n";
  std::ofstream(dir + "/type") << type << "\n";
  std::ofstream(dir + "/size") << size << "\n";
}

TEST(CacheSize, ParsesTheSuffixesSysfsWrites) {
  EXPECT_EQ(parseCacheSize("32768K"), uint64_t{32} << 20);
  EXPECT_EQ(parseCacheSize("2M\n"), uint64_t{2} << 20);
  EXPECT_EQ(parseCacheSize("1G"), uint64_t{1} << 30);
  EXPECT_EQ(parseCacheSize("512"), 512u);
  EXPECT_EQ(parseCacheSize(""), 0u);
  EXPECT_EQ(parseCacheSize("K"), 0u);
  EXPECT_EQ(parseCacheSize("12X"), 0u);
}

TEST(CacheSize, TakesTheHighestLevelThatHoldsData) {
  test::proc::TempDir dir;
  writeIndex(dir.path(), 0, 1, "Data", "32K");
  writeIndex(dir.path(), 1, 1, "Instruction", "32K");
  writeIndex(dir.path(), 2, 2, "Unified", "1024K");
  writeIndex(dir.path(), 3, 3, "Unified", "32768K");
  EXPECT_EQ(lastLevelCacheBytes(dir.path()), uint64_t{32} << 20);
}

TEST(CacheSize, SkipsInstructionCachesAndUnreadableSizes) {
  test::proc::TempDir dir;
  writeIndex(dir.path(), 0, 1, "Data", "48K");
  writeIndex(dir.path(), 1, 2, "Unified", "2M");
  writeIndex(dir.path(), 2, 3, "Instruction", "64M");
  writeIndex(dir.path(), 3, 4, "Unified", "lots");
  EXPECT_EQ(lastLevelCacheBytes(dir.path()), uint64_t{2} << 20);
}

TEST(CacheSize, NothingDescribedIsZero) {
  test::proc::TempDir dir;
  EXPECT_EQ(lastLevelCacheBytes(dir.path()), 0u);
  EXPECT_EQ(lastLevelCacheBytes(dir.path() + "/absent"), 0u);
}

}  // namespace
}  // namespace occl
