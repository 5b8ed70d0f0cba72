// The table of collective facts (device/coll_types.hpp) against NCCL's and nccl-tests' own
// definitions, and the rows' consistency with one another.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "device/coll_types.hpp"

namespace occl {
namespace {

TEST(CollTypes, BufferElementsAreNcclsOnFourRanks) {
  struct Expected {
    int type;
    uint64_t rootSend, rootRecv, otherSend, otherRecv;
  };
  // count = 10, n = 4: nccl-tests' buffer sizes (sendcount, recvcount) of each collective.
  const Expected kNccl[] = {
      {occlCollAllReduce, 10, 10, 10, 10},     {occlCollAllGather, 10, 40, 10, 40},
      {occlCollReduceScatter, 40, 10, 40, 10}, {occlCollReduce, 10, 10, 10, 0},
      {occlCollBroadcast, 10, 10, 0, 10},      {occlCollAllToAll, 40, 40, 40, 40},
      {occlCollSend, 10, 0, 10, 0},            {occlCollRecv, 0, 10, 0, 10},
      {occlCollGather, 10, 40, 10, 0},         {occlCollScatter, 40, 10, 0, 10},
  };
  for (const Expected& e : kNccl) {
    SCOPED_TRACE(collTypeName(e.type));
    EXPECT_EQ(userElems(e.type, 10, 4, true), std::make_pair(e.rootSend, e.rootRecv));
    EXPECT_EQ(userElems(e.type, 10, 4, false), std::make_pair(e.otherSend, e.otherRecv));
    // nccl-tests' size is the largest buffer's: the count comes back from it.
    EXPECT_EQ(countForElems(e.type, std::max(e.rootSend, e.rootRecv), 4), 10u);
  }
}

TEST(CollTypes, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollAllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollAllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollAllToAll, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollReduce, 4), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollBroadcast, 4), 1.0);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(busBwFactor(occlCollAllReduce, 1), 0.0);  // one rank moves nothing over a bus
}

TEST(CollTypes, InPlaceOffsetsAreNcclsRule) {
  EXPECT_EQ(inPlaceOffsets(occlCollAllGather, 3, 10), std::make_pair(uint64_t{30}, uint64_t{0}));
  EXPECT_EQ(inPlaceOffsets(occlCollReduceScatter, 3, 10), std::make_pair(uint64_t{0}, uint64_t{30}));
  EXPECT_EQ(inPlaceOffsets(occlCollAllReduce, 3, 10), std::make_pair(uint64_t{0}, uint64_t{0}));
  // Gather and Scatter: the root's own share, as AllGather's and ReduceScatter's.
  EXPECT_EQ(inPlaceOffsets(occlCollGather, 3, 10), std::make_pair(uint64_t{30}, uint64_t{0}));
  EXPECT_EQ(inPlaceOffsets(occlCollScatter, 3, 10), std::make_pair(uint64_t{0}, uint64_t{30}));
  EXPECT_EQ(collInfo(occlCollAllToAll).inPlace, InPlaceRule::None);
  EXPECT_EQ(std::string(inPlaceRuleText(occlCollAllGather)), "sendbuf == recvbuf + rank*count");
}

// What the rows must agree on among their own columns.
TEST(CollTypes, RowsAreConsistent) {
  for (const CollTypeInfo& c : kCollTypes) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(collTypeFromName(c.name), c.type);
    if (c.irName != nullptr) {
      EXPECT_EQ(collTypeFromName(c.irName), c.type);
    }
    // The chunks divide count * n exactly where a buffer holds count * n elements.
    const auto byRanks = [](Extent e) { return e == Extent::CountByRanks || e == Extent::RootOnlyByRanks; };
    EXPECT_EQ(c.chunksByRanks, byRanks(c.send) || byRanks(c.recv));
    // A root is the only rank with one of the buffers; point-to-point uses one buffer a side.
    EXPECT_EQ(c.rooted, rootOnly(c.send) || rootOnly(c.recv));
    if (c.pointToPoint) {
      EXPECT_EQ(c.irName, nullptr) << "MSCCL-IR describes collectives only";
      EXPECT_TRUE(c.send == Extent::None || c.recv == Extent::None);
      EXPECT_EQ(c.inPlace, InPlaceRule::None);
    }
    EXPECT_EQ(chunkMultiplier(c.type, 4), c.chunksByRanks ? 4u : 1u);
  }
  EXPECT_EQ(collTypeFromName("allsum"), occlNumCollTypes);
  EXPECT_STREQ(collTypeName(occlNumCollTypes), "unknown");
}

}  // namespace
}  // namespace occl
