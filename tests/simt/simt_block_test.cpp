// The emulated CUDA block itself (device/simt_block.hpp): every lane runs the body with its own
// lane id, blockSync() is a real barrier, broadcastFromLeader() hands the leader's answer to every
// lane, and lanes that wait at different barriers — which a GPU would pair up silently — abort the
// process naming both call sites. The lane count comes from OCCL_SIMT_LANES (ctest sets it).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "device/simt_block.hpp"
#include "device/simt_memory.hpp"
#include "occl/occl.h"

namespace occl::exec::simt {
namespace {

int lanesFromEnvironment() {
  occlConfig_t c;
  if (occlConfigInit(&c) != occlSuccess) return 4;
  return c.simtLanes;
}

const int kLanes = lanesFromEnvironment();
// Divergence needs two lanes: the death tests run at least two whatever the lane count.
const int kDivergingLanes = kLanes < 2 ? 2 : kLanes;

TEST(SimtBlock, EveryLaneRunsWithItsOwnId) {
  Block block(kLanes, /*jitterSeed=*/0);
  std::mutex mu;
  std::multiset<int> seen;
  std::atomic<int> counts{0};
  block.run([&] {
    std::lock_guard<std::mutex> lock(mu);
    seen.insert(lane());
    if (laneCount() == kLanes) counts += 1;
  });
  ASSERT_EQ(seen.size(), static_cast<size_t>(kLanes));
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(seen.count(l), 1u) << "lane " << l;
  EXPECT_EQ(counts.load(), kLanes);
  EXPECT_EQ(lane(), 0) << "the calling thread is lane 0 of a block of one again afterwards";
  EXPECT_EQ(laneCount(), 1);
}

// Each lane writes its own word, the barrier orders the writes before every lane's reads: the
// sum seen by every lane after the barrier is complete (and TSan sees no race).
TEST(SimtBlock, BarrierOrdersWritesBeforeReads) {
  Block block(kLanes, /*jitterSeed=*/7);
  std::vector<int> words(static_cast<size_t>(kLanes), 0);
  std::vector<int> sums(static_cast<size_t>(kLanes), 0);
  block.run([&] {
    for (int round = 1; round <= 50; ++round) {
      words[static_cast<size_t>(lane())] = round * (lane() + 1);
      blockSync();
      int sum = 0;
      for (int w : words) sum += w;
      sums[static_cast<size_t>(lane())] = sum;
      blockSync();  // nobody writes the next round before everybody has read this one
    }
  });
  const int expected = 50 * kLanes * (kLanes + 1) / 2;
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(sums[static_cast<size_t>(l)], expected) << "lane " << l;
}

TEST(SimtBlock, BroadcastGivesEveryLaneTheLeadersAnswer) {
  Block block(kLanes, /*jitterSeed=*/11);
  std::vector<int> answers(static_cast<size_t>(kLanes), -1);
  block.run([&] {
    int agreed = 0;
    for (int round = 0; round < 40; ++round) {
      // Only the leader's evaluation counts: other lanes would answer differently.
      if (broadcastFromLeader([&] { return lane() == 0 && round % 3 == 0; })) agreed += 1;
    }
    answers[static_cast<size_t>(lane())] = agreed;
  });
  for (int l = 0; l < kLanes; ++l) EXPECT_EQ(answers[static_cast<size_t>(l)], 14) << "lane " << l;
}

// Lanes that reach a barrier on different lines. Not inside EXPECT_DEATH: a macro's arguments
// all sit on the line it is invoked at, so their barriers would look like one.
void divergentBarriers() {
  Block block(kDivergingLanes, 0);
  block.run([] {
    if (lane() == 0) {
      blockSync();  // the leader's barrier
    } else {
      blockSync();  // every other lane's
    }
  });
}

void laneReturnsEarly() {
  Block block(kDivergingLanes, 0);
  block.run([] {
    if (lane() != 0) blockSync();
  });
}

TEST(SimtBlockDeathTest, LanesAtDifferentBarriersAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(divergentBarriers(),
               "divergent barrier: lane [0-9]+ waits at a barrier .*simt_block_test.cpp:[0-9]+ while lane [0-9]+ "
               "waits at .*simt_block_test.cpp:[0-9]+");
}

TEST(SimtBlockDeathTest, LaneThatReturnsWhileOthersWaitAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(laneReturnsEarly(), "divergent barrier: lane [0-9]+ (returned|waits at a barrier)");
}

// A decision every lane makes from state the leader updates, the pattern of defect D1: with
// jitter, a late lane reads the value after the leader's update and branches differently. The
// emulation turns that into an abort (or a TSan report) instead of a silent GPU desync; the
// broadcast form of the same loop runs clean.
TEST(SimtBlockDeathTest, LanesDecidingOnTheLeadersStateThemselvesAreCaught) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto loop = [](bool broadcast) {
    Block block(kDivergingLanes, /*jitterSeed=*/99);
    uint32_t counter = 0;  // block state: the leader alone writes it
    block.run([&] {
      for (int pass = 0; pass < 8000; ++pass) {
        auto due = [&] { return atomics::loadRelaxed(&counter) % 64 == 63; };
        const bool poll = broadcast ? broadcastFromLeader(due) : due();
        if (poll) blockSync();  // a barrier only the polling lanes reach
        if (isLeader()) atomics::storeRelaxed(&counter, counter + 1);
        blockSync();
      }
    });
  };
  loop(/*broadcast=*/true);
  EXPECT_DEATH(loop(/*broadcast=*/false), "divergent barrier");
}

// Defect D5: the SQ's per-entry reader count and the CQ's CAS were device read-modify-writes on
// pinned host memory. A lane may do an RMW on emulated device memory only; the same RMW on other
// memory (what would be host-mapped or peer memory on a GPU) aborts naming it, while loads and
// stores there are fine. Host threads outside any block are never checked.
TEST(SimtBlockDeathTest, LaneAtomicsOutsideDeviceMemoryAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* device = static_cast<uint64_t*>(allocDeviceMemory(8 * sizeof(uint64_t)));
  ASSERT_NE(device, nullptr);
  alignas(64) static uint64_t hostMapped[8];
  EXPECT_TRUE(isDeviceMemory(&device[7]));
  EXPECT_FALSE(isDeviceMemory(hostMapped));

  Block block(kLanes, /*jitterSeed=*/0);
  block.run([&] {
    atomics::fetchAdd(&device[0], uint64_t{1});
    uint64_t expected = 0;
    atomics::compareExchange(&device[1], expected, uint64_t{5});
    if (isLeader()) atomics::storeRelease(&hostMapped[0], atomics::loadAcquire(&hostMapped[1]) + 1);
  });
  uint64_t got[2] = {};
  {
    DeviceAccess copyEngine;
    got[0] = device[0];
    got[1] = device[1];
  }
  EXPECT_EQ(got[0], static_cast<uint64_t>(kLanes));
  EXPECT_EQ(got[1], 5u);
  atomics::fetchAdd(&hostMapped[2], uint64_t{1});  // the host's own RMW on its memory is fine
  EXPECT_DEATH(Block(kLanes, 0).run([&] { atomics::fetchAdd(&hostMapped[3], uint64_t{1}); }),
               "atomic read-modify-write at 0x[0-9a-f]+, which is not device memory");
  EXPECT_DEATH(Block(kLanes, 0).run([&] {
                 uint32_t* word = reinterpret_cast<uint32_t*>(&hostMapped[4]);
                 uint32_t expected = 0;
                 atomics::compareExchange(word, expected, 1u);
               }),
               "defect D5");
  // Device scope is for daemon memory only: host-mapped memory would not be ordered with the host.
  Block(kLanes, 0).run([&] { atomics::loadAcquire<atomics::Scope::Device>(&device[2]); });
  EXPECT_DEATH(Block(kLanes, 0).run([&] { atomics::loadAcquire<atomics::Scope::Device>(&hostMapped[5]); }),
               "device-scoped access at 0x[0-9a-f]+, which is not device memory");
  EXPECT_DEATH(Block(kLanes, 0).run([&] { atomics::storeRelaxed<atomics::Scope::Device>(&hostMapped[6], uint64_t{1}); }),
               "give it system scope");
  freeDeviceMemory(device);
  EXPECT_FALSE(isDeviceMemory(device));
}

// Defect D2: Comm::abort CASed a device connector's header from the host, a segfault on a GPU.
// Emulated device memory is as unreachable from a host thread (with PKU): only lanes and the
// copy engine's scope may touch it, and a host dereference faults.
uint64_t hostReads(const uint64_t* p) { return atomics::loadAcquire(const_cast<uint64_t*>(p)); }

// Whether the kernel enables protection keys on this CPU ("ospke" among /proc/cpuinfo's flags).
bool cpuHasProtectionKeys() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);)
    if (line.rfind("flags", 0) == 0) return line.find(" ospke") != std::string::npos;
  return false;
}

// Where the CPU has protection keys, a host dereference faults and the copy engine's scope reads.
// Where it has none the memory is plain, as simt_memory.hpp documents: the test then checks that
// the missing keys are the reason, and that the copy engine and the lanes still see one memory.
TEST(SimtBlockDeathTest, HostDereferenceOfDeviceMemoryFaultsWhereTheCpuHasProtectionKeys) {
  ASSERT_EQ(deviceMemoryProtected(), cpuHasProtectionKeys())
      << "device memory protection does not match the CPU's ospke flag";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* device = static_cast<uint64_t*>(allocDeviceMemory(sizeof(uint64_t)));
  ASSERT_NE(device, nullptr);
  EXPECT_TRUE(isDeviceMemory(device));
  Block(kLanes, 0).run([&] {
    if (isLeader()) atomics::storeRelease(device, uint64_t{42});
  });
  uint64_t copied = 0;
  {
    DeviceAccess copyEngine;
    copied = *device;
  }
  EXPECT_EQ(copied, 42u);
  if (deviceMemoryProtected()) {
    EXPECT_DEATH(hostReads(device), "");
  } else {
    std::printf("no protection keys on this CPU: device memory is plain, a host read succeeds\n");
    EXPECT_EQ(hostReads(device), 42u);
  }
  freeDeviceMemory(device);
}

}  // namespace
}  // namespace occl::exec::simt
