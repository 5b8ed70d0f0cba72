// How many parts a collective runs in (host/algorithms.hpp: partsFor) and how many blocks an auto
// daemon takes (backend/residency.hpp: autoDaemonBlocks): pure rules, pinned at their edges.
#include <gtest/gtest.h>

#include <cstdint>

#include "backend/residency.hpp"
#include "host/algorithms.hpp"

namespace occl::test {
namespace {

constexpr uint64_t kGpuSlot = 1 << 20;

occlCollDesc_t desc(int type, uint64_t count, int dtype = occlInt8) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = type;
  d.count = count;
  d.datatype = dtype;
  return d;
}

host::PartsRule kernel(int daemonBlocks) { return {daemonBlocks, /*bySize=*/true, kGpuSlot}; }

TEST(PartsFor, OnAKernelBackendThePartsFollowTheSize) {
  const host::PartsRule r = kernel(16);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 8), 4, r), 1);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, (256 << 10) - 1), 4, r), 1) << "below two eighths of a slot";
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 256 << 10), 4, r), 2);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 3 * (128 << 10)), 4, r), 2) << "rounded down to a power of two";
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 1 << 20), 4, r), 8);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 2 << 20), 4, r), 16);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 64 << 20), 4, r), host::kMaxPartsBySize);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 16 << 10, occlFloat64), 4, r), 1);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 32 << 10, occlFloat64), 4, r), 2) << "bytes, not elements";
}

TEST(PartsFor, TheLargestBufferCounts) {
  const host::PartsRule r = kernel(16);
  // AllGather's count is each rank's share: 4 ranks x 64 KiB fill a 256 KiB receive buffer.
  EXPECT_EQ(host::partsFor(desc(occlCollAllGather, 64 << 10), 4, r), 2);
  EXPECT_EQ(host::partsFor(desc(occlCollReduceScatter, 64 << 10), 4, r), 2);
  EXPECT_EQ(host::partsFor(desc(occlCollAllToAll, 64 << 10), 4, r), 2);
  EXPECT_EQ(host::partsFor(desc(occlCollBroadcast, 64 << 10), 4, r), 1);
}

TEST(PartsFor, AtMostOnePartPerDaemonBlock) {
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 64 << 20), 8, kernel(64)), host::kMaxPartsBySize);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 64 << 20), 8, kernel(3)), 3) << "the cap need not be a power of two";
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 64 << 20), 8, kernel(1)), 1);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 256 << 10), 8, kernel(3)), 2) << "the size's count where it is lower";
}

TEST(PartsFor, ANamedCountAPairAndTheHostBackendKeepTheirRules) {
  occlCollDesc_t named = desc(occlCollAllReduce, 8);
  named.nBlocks = 3;
  EXPECT_EQ(host::partsFor(named, 4, kernel(16)), 3);
  occlCollDesc_t send = desc(occlCollSend, 64 << 20);
  send.root = 1;
  EXPECT_EQ(host::partsFor(send, 2, kernel(16)), 1);
  const host::PartsRule hostThreads{3, /*bySize=*/false, 128 << 10};
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 8), 4, hostThreads), 3);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 64 << 20), 4, hostThreads), 3);
}

TEST(PartsFor, ASlotOfAFewBytesStillGivesWholeParts) {
  const host::PartsRule tiny{2, true, 64};
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 7), 2, tiny), 1);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 8), 2, tiny), 1);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 16), 2, tiny), 2);
  EXPECT_EQ(host::partsFor(desc(occlCollAllReduce, 0), 2, tiny), 1) << "an empty collective still has a part";
}

TEST(AutoDaemonBlocks, SixteenOrAnEighthOfTheDeviceOrWhatIsLeft) {
  EXPECT_EQ(backend::autoDaemonBlocks(132, 0), backend::kAutoDaemonBlocks);  // an H100/H200 at one block per SM
  EXPECT_EQ(backend::autoDaemonBlocks(132, 112), 16);
  EXPECT_EQ(backend::autoDaemonBlocks(132, 128), 4) << "what other ranks left";
  EXPECT_EQ(backend::autoDaemonBlocks(132, 132), 1) << "at least one: the reservation then names the numbers";
  EXPECT_EQ(backend::autoDaemonBlocks(64, 0), 8) << "an eighth of a smaller device";
  EXPECT_EQ(backend::autoDaemonBlocks(4, 0), 1);
  static_assert(backend::kAutoDaemonBlocks == host::kMaxPartsBySize,
                "an auto daemon has a block for each part of the largest collective");
}

}  // namespace
}  // namespace occl::test
