// transport/host_allocator.hpp: the anonymous-memory allocator, and the recycling one that the
// CUDA ranks' NET FIFOs use (its underlying release must wait until nobody holds the allocator).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "transport/host_allocator.hpp"

namespace occl::transport {
namespace {

// malloc/free that count what reached them.
struct Counting {
  std::mutex mu;
  int allocations = 0;
  std::map<void*, size_t> live;      // allocated and not yet released
  std::vector<size_t> releasedSizes;  // in release order

  HostAllocator allocator() {
    return HostAllocator{
        [this](size_t bytes) {
          void* p = std::malloc(bytes);
          std::lock_guard<std::mutex> lock(mu);
          ++allocations;
          live[p] = bytes;
          return p;
        },
        [this](void* p, size_t bytes) {
          std::lock_guard<std::mutex> lock(mu);
          EXPECT_EQ(live.at(p), bytes) << "released with another size than it was allocated with";
          live.erase(p);
          releasedSizes.push_back(bytes);
          std::free(p);
        },
    };
  }
};

TEST(HostAllocatorTest, DefaultAllocatorGivesWritablePageAlignedMemory) {
  HostAllocator a = defaultHostAllocator();
  void* p = a.allocate(3 * 4096 + 5);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u);
  std::memset(p, 0xA5, 3 * 4096 + 5);
  a.release(p, 3 * 4096 + 5);
}

TEST(HostAllocatorTest, RecyclingReusesBlocksOfTheSameSizeAndReleasesOnlyAtTheEnd) {
  Counting under;
  {
    HostAllocator r = recyclingAllocator(under.allocator());
    void* a = r.allocate(1000);
    void* b = r.allocate(1000);
    void* c = r.allocate(64);
    ASSERT_TRUE(a && b && c);
    EXPECT_EQ(under.allocations, 3);
    r.release(a, 1000);
    EXPECT_TRUE(under.releasedSizes.empty()) << "a release reached the underlying allocator while in use";
    EXPECT_EQ(r.allocate(1000), a) << "the released block of that size is reused";
    EXPECT_EQ(under.allocations, 3);
    void* d = r.allocate(64);  // none of that size is free: a new one
    EXPECT_NE(d, c);
    EXPECT_EQ(under.allocations, 4);
    HostAllocator copy = r;  // the NET proxy and every Conn hold copies
    for (auto [p, n] : std::vector<std::pair<void*, size_t>>{{a, 1000}, {b, 1000}, {c, 64}, {d, 64}}) copy.release(p, n);
    r = HostAllocator{};
    EXPECT_TRUE(under.releasedSizes.empty()) << "released while a copy of the allocator lives";
  }
  // Every copy is gone: each block went back exactly once, with its size.
  EXPECT_EQ(under.releasedSizes.size(), 4u);
  EXPECT_TRUE(under.live.empty());
}

TEST(HostAllocatorTest, RecyclingHandsNoBlockToTwoUsersAtOnce) {
  Counting under;
  {
    HostAllocator r = recyclingAllocator(under.allocator());
    std::mutex mu;
    std::set<void*> inUse;
    std::atomic<bool> clash{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 2000; ++i) {
          const size_t bytes = 256 * static_cast<size_t>(1 + (i + t) % 3);
          void* p = r.allocate(bytes);
          {
            std::lock_guard<std::mutex> lock(mu);
            if (!inUse.insert(p).second) clash = true;
          }
          std::memset(p, t, bytes);
          {
            std::lock_guard<std::mutex> lock(mu);
            inUse.erase(p);
          }
          r.release(p, bytes);
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_FALSE(clash.load());
    EXPECT_LE(under.allocations, 12) << "4 threads need at most one block of each of 3 sizes each";
  }
  EXPECT_TRUE(under.live.empty());
}

}  // namespace
}  // namespace occl::transport
