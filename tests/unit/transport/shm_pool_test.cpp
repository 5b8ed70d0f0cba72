// The pool of a job's shm connectors (transport/shm/pool.hpp): two ShmPool objects of one nonce
// stand for two processes (each maps the pool and the arenas itself). The second end of a key
// finds the first end's range; a range both ends released serves the next connector of its size,
// zeroed; small connectors share pages, which go back once none of them is in use; and 40,000
// connectors fit one arena. (connectors_test checks the mappings a factory makes.)
#include "transport/shm/pool.hpp"
#include "transport/shm/pool_access.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "support/dev_shm.hpp"

namespace occl::test {
namespace {

using transport::ConnectorKey;
using transport::PoolKey;
using transport::ShmPool;

class ShmPoolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm on this machine";
    nonce_ = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
    a_ = open();
    b_ = open();
  }
  // What JobSegments does at the end of a communicator: the names go, the mappings stay.
  void TearDown() override {
    for (const std::string& name : jobShmNames(nonce_)) shm_unlink(("/" + name).c_str());
  }
  std::shared_ptr<ShmPool> open() {
    auto pool = ShmPool::open(nonce_, 5000);
    if (!pool.ok()) throw std::runtime_error(pool.status().message);
    return pool.value();
  }
  // The /dev/shm bytes the job's names hold.
  uint64_t devShmBytes() const {
    uint64_t bytes = 0;
    for (const std::string& name : jobShmNames(nonce_)) {
      struct stat st {};
      if (stat(("/dev/shm/" + name).c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_blocks) * 512;
    }
    return bytes;
  }
  static ShmPool::Range attach(ShmPool& pool, const PoolKey& key, size_t bytes, bool packed = false) {
    auto range = pool.attach(key, bytes, packed);
    if (!range.ok()) throw std::runtime_error(range.status().message);
    return range.value();
  }

  uint64_t nonce_ = 0;
  std::shared_ptr<ShmPool> a_, b_;
};

const size_t kPageBytes = transport::pageBytes();
const size_t kBytes = 3 * kPageBytes + 100;  // rounded up to whole pages

PoolKey keyOf(uint64_t collId, uint64_t generation = 0) { return PoolKey{ConnectorKey{collId, 0, 1, 0}, generation}; }

TEST_F(ShmPoolTest, TheSecondEndFindsTheFirstEndsRange) {
  const ShmPool::Range first = attach(*a_, keyOf(7), kBytes);
  EXPECT_TRUE(first.created);
  std::memset(first.base, 0x5A, kBytes);
  const ShmPool::Range second = attach(*b_, keyOf(7), kBytes);
  EXPECT_FALSE(second.created);
  EXPECT_NE(first.base, second.base) << "each process maps the arena itself";
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(second.base[i], 0x5A) << i;
  // Another generation of the key is another connector.
  EXPECT_TRUE(attach(*b_, keyOf(7, 1), kBytes).created);
  EXPECT_EQ(a_->usage().connectors, 2u);
}

TEST_F(ShmPoolTest, OneEndsReleaseKeepsTheRangeForItsPeer) {
  const ShmPool::Range sent = attach(*a_, keyOf(8), kBytes);
  std::memset(sent.base + kPageBytes, 0x21, 64);
  a_->release(keyOf(8));
  EXPECT_EQ(b_->usage().connectors, 1u);
  const ShmPool::Range received = attach(*b_, keyOf(8), kBytes);
  EXPECT_FALSE(received.created);
  EXPECT_EQ(received.base[kPageBytes + 63], 0x21);
  b_->release(keyOf(8));
  EXPECT_EQ(a_->usage().connectors, 0u);
}

TEST_F(ShmPoolTest, AReleasedRangeServesTheNextConnectorOfItsSizeZeroed) {
  const ShmPool::Range used = attach(*a_, keyOf(9), kBytes);
  (void)attach(*b_, keyOf(9), kBytes);
  std::memset(used.base, 0x77, kBytes);
  const uint64_t handedOut = a_->usage().arenaBytes;
  a_->release(keyOf(9));
  b_->release(keyOf(9));
  const ShmPool::Range again = attach(*b_, keyOf(10), kBytes);
  EXPECT_TRUE(again.created);
  EXPECT_EQ(a_->usage().arenaBytes, handedOut) << "the released range was not used again";
  for (size_t i = 0; i < kBytes; ++i) ASSERT_EQ(again.base[i], 0) << i;
  // Another size takes new bytes.
  (void)attach(*a_, keyOf(11), 2 * kBytes);
  EXPECT_GT(a_->usage().arenaBytes, handedOut);
}

// Ends that disagree on the size: the second gets the first's range, whose header it poisons
// (transport/shm/connectors.cpp), and both release it once.
TEST_F(ShmPoolTest, AnotherSizeForTheSameKeyGetsTheFirstEndsRange) {
  const ShmPool::Range first = attach(*a_, keyOf(12), kBytes);
  const ShmPool::Range other = attach(*b_, keyOf(12), 2 * kBytes);
  EXPECT_FALSE(other.created);
  EXPECT_EQ(other.bytes, first.bytes);
  EXPECT_EQ(first.bytes, 4 * kPageBytes);
  a_->release(keyOf(12));
  b_->release(keyOf(12));
  EXPECT_EQ(a_->usage().connectors, 0u);
}

// The pool lists released ranges of 32 sizes at a time. Of 40 sizes used twice over, the second
// round takes new bytes only for the 8 sizes whose ranges found no list.
TEST_F(ShmPoolTest, ReleasedRangesOfMoreSizesThanListsAreStillUsedAgain) {
  constexpr uint64_t kSizes = 40, kLists = 32;
  const uint64_t kPage = kPageBytes;
  auto roundOf = [&](uint64_t generation) {
    for (uint64_t pages = 1; pages <= kSizes; ++pages) {
      (void)attach(*a_, keyOf(pages, generation), pages * kPage);
      (void)attach(*b_, keyOf(pages, generation), pages * kPage);
      a_->release(keyOf(pages, generation));
      b_->release(keyOf(pages, generation));
    }
  };
  roundOf(0);
  const uint64_t first = a_->usage().arenaBytes;
  EXPECT_EQ(first, kSizes * (kSizes + 1) / 2 * kPage);
  roundOf(1);
  uint64_t unlisted = 0;
  for (uint64_t pages = kLists + 1; pages <= kSizes; ++pages) unlisted += pages * kPage;
  EXPECT_EQ(a_->usage().arenaBytes - first, unlisted);
}

// 40,000 connectors, both ends in this process: one arena holds them (each pool object maps it
// once), and the table grows to hold them. Released, they give their pages back.
TEST_F(ShmPoolTest, ManyConnectorsTakeAFewMappingsAndGiveTheirPagesBack) {
  constexpr uint64_t kConnectors = 40000;
  const size_t kSmall = kPageBytes;
  for (uint64_t id = 0; id < kConnectors; ++id) {
    const ShmPool::Range sent = attach(*a_, keyOf(id), kSmall);
    sent.base[0] = static_cast<char>(id);
    ASSERT_EQ(attach(*b_, keyOf(id), kSmall).base[0], static_cast<char>(id)) << id;
  }
  const ShmPool::Usage full = a_->usage();
  EXPECT_EQ(full.connectors, kConnectors);
  EXPECT_GE(full.tableCapacity, 2 * kConnectors);
  EXPECT_EQ(full.arenas, 1u);
  const uint64_t fullBytes = devShmBytes();
  EXPECT_GE(fullBytes, kConnectors * kSmall) << "each connector's page is memory";
  for (uint64_t id = 0; id < kConnectors; ++id) {
    a_->release(keyOf(id));
    b_->release(keyOf(id));
  }
  EXPECT_EQ(b_->usage().connectors, 0u);
  // Left: the table (64 bytes a slot) and the lists' nodes (16 bytes a range).
  EXPECT_LE(devShmBytes(), full.tableCapacity * 64 + kConnectors * 16 + 64 * kPageBytes)
      << "released connectors kept their pages";
  // The next 40,000 reuse the ranges.
  for (uint64_t id = 0; id < kConnectors; ++id) (void)attach(*b_, keyOf(id, 1), kSmall);
  EXPECT_EQ(a_->usage().arenaBytes, full.arenaBytes);
}

// A one-element AllReduce's connector (fifoBytes(4, 64) = 832 bytes) takes a quarter of a page,
// packed: four connectors fill one page, each in its own 1 KiB, and either end sees the other's
// bytes. Not packed (a CUDA rank), each takes a page.
TEST_F(ShmPoolTest, SmallConnectorsShareAPageEachInItsOwnRange) {
  constexpr size_t kConnector = 832;
  const size_t kPage = transport::pageBytes(), perPage = kPage / 1024;
  EXPECT_EQ(transport::rangeBytes(kConnector, true), 1024u);
  EXPECT_EQ(transport::rangeBytes(kConnector, false), kPage);
  EXPECT_EQ(transport::rangeBytes(100, true), 256u);
  EXPECT_EQ(transport::rangeBytes(kPage / 2 + 1, true), kPage);
  std::vector<char*> bases;
  for (uint64_t id = 0; id < perPage; ++id) {
    const ShmPool::Range sent = attach(*a_, keyOf(20 + id), kConnector, true);
    EXPECT_EQ(sent.bytes, 1024u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(sent.base) % 1024, 0u);
    std::memset(sent.base, static_cast<int>(id + 1), sent.bytes);
    bases.push_back(sent.base);
  }
  EXPECT_EQ(a_->usage().arenaBytes, kPage) << "a page's worth of 1 KiB connectors took more than a page";
  std::sort(bases.begin(), bases.end());
  for (size_t i = 1; i < bases.size(); ++i) EXPECT_EQ(bases[i] - bases[i - 1], 1024);
  for (uint64_t id = 0; id < perPage; ++id) {
    const ShmPool::Range received = attach(*b_, keyOf(20 + id), kConnector, true);
    EXPECT_FALSE(received.created);
    for (size_t i = 0; i < received.bytes; ++i) ASSERT_EQ(received.base[i], static_cast<char>(id + 1)) << id << " " << i;
  }
  // One more takes the next page; a connector that may not share takes a page of its own.
  (void)attach(*a_, keyOf(20 + perPage), kConnector, true);
  EXPECT_EQ(a_->usage().arenaBytes, 2 * kPage);
  EXPECT_EQ(attach(*a_, keyOf(21 + perPage), kConnector, false).bytes, kPage);
  EXPECT_EQ(a_->usage().arenaBytes, 3 * kPage);
}

// A packed range both ends released is cleared and serves the next connector of its size; the
// page goes back to /dev/shm when the last of its ranges is released, and its ranges still serve.
TEST_F(ShmPoolTest, PackedRangesAreClearedForReuseAndTheirPageGoesBackWithTheLast) {
  const size_t kPage = transport::pageBytes(), kConnector = kPage / 2 - 48;  // two a page
  const ShmPool::Range one = attach(*a_, keyOf(30), kConnector, true);
  const ShmPool::Range two = attach(*a_, keyOf(31), kConnector, true);
  (void)attach(*b_, keyOf(30), kConnector, true);
  (void)attach(*b_, keyOf(31), kConnector, true);
  std::memset(one.base, 0x11, one.bytes);
  std::memset(two.base, 0x22, two.bytes);
  const uint64_t withPage = devShmBytes();
  a_->release(keyOf(30));
  b_->release(keyOf(30));
  EXPECT_EQ(devShmBytes(), withPage) << "the page went back while a range of it was in use";
  for (size_t i = 0; i < two.bytes; ++i) ASSERT_EQ(two.base[i], 0x22) << i;
  const ShmPool::Range again = attach(*b_, keyOf(32), kConnector, true);
  EXPECT_TRUE(again.created);
  EXPECT_EQ(a_->usage().arenaBytes, kPage) << "the released range was not used again";
  for (size_t i = 0; i < again.bytes; ++i) ASSERT_EQ(again.base[i], 0) << i;
  for (uint64_t id : {31, 32}) {
    a_->release(keyOf(id));
    b_->release(keyOf(id));
  }
  EXPECT_EQ(a_->usage().connectors, 0u);
  EXPECT_EQ(devShmBytes(), withPage - kPage) << "the page of released ranges was kept";
  // Both ranges of the given-back page serve again, zeroed.
  for (uint64_t id : {33, 34}) {
    const ShmPool::Range reused = attach(*a_, keyOf(id), kConnector, true);
    for (size_t i = 0; i < reused.bytes; ++i) ASSERT_EQ(reused.base[i], 0) << id << " " << i;
  }
  EXPECT_EQ(a_->usage().arenaBytes, kPage);
}

// 40,000 one-element AllReduce connectors, packed: a quarter of the pages of whole-page ones (with
// 4 KiB pages), and all of them back once released.
TEST_F(ShmPoolTest, ManySmallConnectorsTakeAQuarterOfThePages) {
  constexpr uint64_t kConnectors = 40000;
  constexpr size_t kConnector = 832;
  const size_t kPage = transport::pageBytes(), perPage = kPage / 1024;
  const uint64_t empty = devShmBytes();
  for (uint64_t id = 0; id < kConnectors; ++id) {
    const ShmPool::Range sent = attach(*a_, keyOf(id), kConnector, true);
    std::memset(sent.base, static_cast<int>(id), kConnector);
    ASSERT_EQ(attach(*b_, keyOf(id), kConnector, true).base[kConnector - 1], static_cast<char>(id)) << id;
  }
  EXPECT_EQ(a_->usage().arenaBytes, (kConnectors + perPage - 1) / perPage * kPage);
  const ShmPool::Usage full = a_->usage();
  // The arena's pages, and the pool's: the table (64 bytes a slot), lists and page counts.
  EXPECT_LE(devShmBytes() - empty, full.arenaBytes + full.tableCapacity * 64 + 64 * kPage);
  for (uint64_t id = 0; id < kConnectors; ++id) {
    a_->release(keyOf(id));
    b_->release(keyOf(id));
  }
  EXPECT_LE(devShmBytes(), full.tableCapacity * 64 + kConnectors * 16 + 64 * kPage)
      << "released connectors kept their pages";
}

}  // namespace
}  // namespace occl::test
