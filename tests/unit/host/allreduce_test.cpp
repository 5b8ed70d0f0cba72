// The built-in AllReduce on ranks as threads (direct for small counts, above them the peer
// program, which reads the other ranks' buffers where they are, and the ring where the
// registration names it): bit-exact against a reference for 1..8 and 12 ranks, counts that leave
// chunks of unequal and zero length, in place and out of place; and the same bits on every rank
// when the inputs round differently in every order.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "primitives/peer_read.hpp"
#include "support/collective_cases.hpp"
#include "support/ranks.hpp"
#include "util/cache_size.hpp"

namespace occl::test {
namespace {

using Param = std::tuple<int, size_t, bool, bool>;  // ranks, count, in place, ring named

// A float sum AllReduce of `count`, on the ring if `ringNamed`, else the built-in choice.
void registerFloatSum(occlComm_t comm, uint64_t id, size_t count, bool ringNamed) {
  Spec s;  // an AllReduce of floats, summed
  s.count = count;
  s.algorithm = ringNamed ? "ring" : nullptr;
  const occlCollDesc_t d = descFor(s, /*rank=*/0);  // the rank matters to Send/Recv only
  expectOk(occlCollRegister(comm, id, &d), comm, "register");
}

// Runs one float sum AllReduce of `count` on `nRanks` thread-ranks and checks every output bit
// for bit; returns the algorithm it ran.
std::string runFloatSum(int nRanks, size_t count, bool inPlace, bool ringNamed, const occlConfig_t& config = testConfig()) {
  CommGroup comms(nRanks, config);
  constexpr uint64_t kId = 0xA11;
  std::vector<std::vector<float>> send(nRanks), recv(nRanks);
  std::string algorithm;
  runRanks(nRanks, [&](int r) {
    registerFloatSum(comms[r], kId, count, ringNamed);
    const char* name = nullptr;
    expectOk(occlCollGetAlgorithm(comms[r], kId, inPlace ? 1 : 0, &name), comms[r], "occlCollGetAlgorithm");
    if (r == 0) algorithm = name;
    send[r].resize(count);
    recv[r].assign(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[r][i] = inputValue(r, i);
    CallbackCounter done;
    float* out = inPlace ? send[r].data() : recv[r].data();
    expectOk(occlSubmit(comms[r], kId, send[r].data(), out, &CallbackCounter::callback, done.arg()), comms[r], "submit");
    ASSERT_TRUE(done.waitFor(1)) << "rank " << r << " timed out";
    ASSERT_EQ(done.fired().size(), 1u);
    EXPECT_EQ(done.fired()[0].second, occlSuccess);
  });
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (int r = 0; r < nRanks; ++r) {
    const std::vector<float>& out = inPlace ? send[r] : recv[r];
    for (size_t i = 0; i < count; ++i) {
      float expected = ranksSum * static_cast<float>(i % 7 + 1);
      EXPECT_EQ(std::memcmp(&out[i], &expected, sizeof(float)), 0)
          << "rank " << r << " element " << i << ": " << out[i] << " != " << expected;
      if (std::memcmp(&out[i], &expected, sizeof(float)) != 0) return algorithm;
    }
  }
  return algorithm;
}

class AllReduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllReduceTest, MatchesReferenceBitExactly) {
  const auto [nRanks, count, inPlace, ringNamed] = GetParam();
  runFloatSum(nRanks, count, inPlace, ringNamed);
}

// The peer program with many submissions of one collective in flight: each rank submits 8 runs
// back to back on buffers of their own, so a rank posts a run's notices while its peers still hold
// the previous run's, through the fewest slots the program takes (2) and the default (4), out of
// place and in place. Run k on rank r holds (r + 1) * (k + 1): every output must be 10 * (k + 1).
TEST(AllReducePeer, BackToBackSubmissionsOfOneCollectiveKeepTheirNoticesApart) {
  constexpr int kRanks = 4, kRuns = 8;
  constexpr size_t kCount = 65536;
  constexpr uint64_t kId = 0xBB;
  for (int slots : {2, 4}) {
    for (bool inPlace : {false, true}) {
      occlConfig_t config = testConfig();
      config.connectorSlots = slots;
      CommGroup comms(kRanks, config);
      std::vector<std::vector<std::vector<float>>> send(kRanks), recv(kRanks);
      runRanks(kRanks, [&](int r) {
        registerFloatSum(comms[r], kId, kCount, false);
        const char* name = nullptr;
        expectOk(occlCollGetAlgorithm(comms[r], kId, inPlace ? 1 : 0, &name), comms[r], "occlCollGetAlgorithm");
        ASSERT_STREQ(name, "peer");
        CallbackCounter done;
        for (int k = 0; k < kRuns; ++k) {
          send[r].emplace_back(kCount, static_cast<float>((r + 1) * (k + 1)));
          recv[r].emplace_back(kCount, -1.0f);
        }
        for (int k = 0; k < kRuns; ++k) {
          float* out = inPlace ? send[r][k].data() : recv[r][k].data();
          expectOk(occlSubmit(comms[r], kId, send[r][k].data(), out, &CallbackCounter::callback, done.arg()), comms[r],
                   "submit");
        }
        ASSERT_TRUE(done.waitFor(kRuns)) << "rank " << r;
        for (const auto& fired : done.fired()) EXPECT_EQ(fired.second, occlSuccess) << "rank " << r;
      });
      for (int r = 0; r < kRanks; ++r) {
        for (int k = 0; k < kRuns; ++k) {
          const std::vector<float>& out = inPlace ? send[r][k] : recv[r][k];
          for (size_t i = 0; i < kCount; ++i)
            ASSERT_EQ(out[i], 10.0f * static_cast<float>(k + 1))
                << "slots " << slots << (inPlace ? ", in place" : ", out of place") << ", rank " << r << ", run " << k
                << ", element " << i;
        }
      }
    }
  }
}

// The rule that decides whether a peer fold's copies stream (peerCopiesStream): where every
// rank's input and output together fill the last-level cache; the outputs alone reaching 64 MiB
// where the cache is unknown.
TEST(AllReducePeer, CopiesStreamWhereInputsAndOutputsFillTheLastLevelCache) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  EXPECT_TRUE(peerCopiesStream(4, 4 * kMiB, 32 * kMiB));       // 2 x 4 x 4 MiB = 32 MiB
  EXPECT_FALSE(peerCopiesStream(4, 4 * kMiB - 1, 32 * kMiB));  // one byte short
  EXPECT_FALSE(peerCopiesStream(4, 2 * kMiB, 32 * kMiB));
  EXPECT_TRUE(peerCopiesStream(3, 11, 65));                    // 66 >= 65
  EXPECT_FALSE(peerCopiesStream(3, 10, 65));                   // 60 < 65
  EXPECT_TRUE(peerCopiesStream(4, 16 * kMiB, 0));              // outputs 64 MiB, cache unknown
  EXPECT_FALSE(peerCopiesStream(4, 16 * kMiB - 1, 0));
  EXPECT_FALSE(peerCopiesStream(0, 64 * kMiB, 32 * kMiB));
  // No product that overflows: these would wrap around to a small number.
  EXPECT_TRUE(peerCopiesStream(0xFFFFFFFFu, uint64_t{1} << 40, uint64_t{1} << 40));
  EXPECT_TRUE(peerCopiesStream(2, ~uint64_t{0} / 2 + 1, ~uint64_t{0}));
}

// The smallest float count whose AllReduce streams on `nRanks` ranks of this machine.
size_t smallestStreamingCount(uint32_t nRanks) {
  const uint64_t cache = lastLevelCacheBytes();
  uint64_t bytes = cache == 0 ? kPeerStreamFallbackOutputBytes / nRanks : cache / 2 / nRanks;
  while (!peerCopiesStream(nRanks, bytes, cache)) ++bytes;
  return static_cast<size_t>((bytes + sizeof(float) - 1) / sizeof(float));
}

// Buffers just large enough that the fold writes its tiles into the peers' outputs with streaming
// stores out of place (memcpy in place), on this machine. The count's remainder puts the starts of
// slices 2 and 3, and so their streamed tiles' destinations, off the 16-byte boundary, and leaves
// a tail shorter than a line.
TEST(AllReducePeer, OutputsLargeEnoughToStreamComeOutBitExact) {
  constexpr int kRanks = 4;
  const size_t count = smallestStreamingCount(kRanks) + 3;
  if (count * sizeof(float) > (size_t{256} << 20))
    GTEST_SKIP() << "this machine's last-level cache (" << lastLevelCacheBytes()
                 << " bytes) would take buffers over 256 MiB";
  ASSERT_TRUE(peerCopiesStream(kRanks, count * sizeof(float), lastLevelCacheBytes()));
  for (bool inPlace : {false, true}) EXPECT_EQ(runFloatSum(kRanks, count, inPlace, false), "peer");
}

// Direct over several tiles: 2000 floats in 4 KiB slots, on 2 ranks (where peer reads would take
// a larger count).
TEST(AllReduceDirect, SeveralTilesPerChunk) {
  occlConfig_t config = testConfig();
  config.connectorSlotBytes = 4096;
  for (bool inPlace : {false, true}) EXPECT_EQ(runFloatSum(2, 2000, inPlace, false, config), "direct");
}

// FIFOs whose slot count is not a power of two find their slots by division, the others by a mask
// (FifoHandle::slotIndex): the ring over many 4 KiB tiles (each connector wraps round its slots
// many times) and direct over several, with 3, 5 and 4 slots, bit-exact.
TEST(AllReduceSlots, SlotCountsThatAreNotAPowerOfTwoWrapAroundBitExactly) {
  for (int slots : {3, 5, 4}) {
    occlConfig_t config = testConfig();
    config.connectorSlots = slots;
    config.connectorSlotBytes = 4096;
    SCOPED_TRACE("connectorSlots " + std::to_string(slots));
    EXPECT_EQ(runFloatSum(4, 20000, false, true, config), "ring");
    EXPECT_EQ(runFloatSum(2, 2000, true, false, config), "direct");
  }
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return "r" + std::to_string(std::get<0>(info.param)) + "_n" + std::to_string(std::get<1>(info.param)) +
         (std::get<2>(info.param) ? "_inplace" : "_outofplace") + (std::get<3>(info.param) ? "_ring" : "");
}

INSTANTIATE_TEST_SUITE_P(RanksCountsPlaces, AllReduceTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{1023},
                                                              size_t{40000}, (size_t{1} << 20) + 3),
                                            ::testing::Bool(), ::testing::Values(false)),
                         paramName);
// Direct by default: 1023 floats on up to 8 ranks; the peer program above (40000 floats on 2
// ranks and up). Twelve ranks are past direct's rank bound: every count goes peer, and the counts
// below 12 leave some ranks an empty slice.
INSTANTIATE_TEST_SUITE_P(PeerTwelveRanks, AllReduceTest,
                         ::testing::Combine(::testing::Values(12),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{1023},
                                                              (size_t{1} << 20) + 3),
                                            ::testing::Bool(), ::testing::Values(false)),
                         paramName);
// Here the counts direct and peer take, on the named ring.
INSTANTIATE_TEST_SUITE_P(RingNamed, AllReduceTest,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(size_t{1}, size_t{1023}, size_t{100000}),
                                            ::testing::Bool(), ::testing::Values(true)),
                         paramName);

// Floats whose sum rounds differently in every order: whichever algorithm runs, every rank must
// end with the same bits (a data-parallel job's replicas must not drift apart). The direct
// AllReduce's are those of the fold in rank order, ((x0 + x1) + x2) + ...; the peer program's
// those of the fold that starts at the slice's owner, ((xq + x0) + x1) + ... for slice q.
enum class Algo { Direct, Peer, Ring };
class AllReduceSameBits : public ::testing::TestWithParam<std::tuple<int, Algo>> {};

const char* algoName(Algo a) { return a == Algo::Direct ? "direct" : a == Algo::Peer ? "peer" : "ring"; }

TEST_P(AllReduceSameBits, EveryRankGetsTheSameBits) {
  const auto [nRanks, algo] = GetParam();
  const bool ringNamed = algo == Algo::Ring;
  // 1 KiB goes direct up to 8 ranks, unless the ring is named; 256 KiB goes peer.
  const size_t kCount = algo == Algo::Peer ? 65536 : 256;
  constexpr uint64_t kId = 0xB175;
  CommGroup comms(nRanks);
  std::vector<std::vector<float>> send(nRanks), recv(nRanks, std::vector<float>(kCount));
  for (int r = 0; r < nRanks; ++r) {
    std::mt19937 rng(static_cast<unsigned>(1234 + r));
    std::uniform_real_distribution<float> value(-1e4f, 1e4f);
    for (size_t i = 0; i < kCount; ++i) send[r].push_back(value(rng) * (i % 3 == 0 ? 1e-6f : 1.0f));
  }
  std::vector<std::string> algorithms(nRanks);
  runRanks(nRanks, [&](int r) {
    registerFloatSum(comms[r], kId, kCount, ringNamed);
    const char* name = nullptr;
    expectOk(occlCollGetAlgorithm(comms[r], kId, 0, &name), comms[r], "occlCollGetAlgorithm");
    algorithms[r] = name;
    CallbackCounter done;
    expectOk(occlSubmit(comms[r], kId, send[r].data(), recv[r].data(), &CallbackCounter::callback, done.arg()), comms[r],
             "submit");
    ASSERT_TRUE(done.waitFor(1)) << "rank " << r << " timed out";
    EXPECT_EQ(done.fired()[0].second, occlSuccess);
  });
  for (int r = 0; r < nRanks; ++r) EXPECT_EQ(algorithms[r], algoName(algo)) << "rank " << r;
  bool orderMatters = false;
  for (size_t i = 0; i < kCount; ++i) {
    // The peer program's slice q (the ragged split: [q * count / n, (q + 1) * count / n)) starts at q.
    int first = 0;
    while (algo == Algo::Peer && static_cast<size_t>(first + 1) * kCount / static_cast<size_t>(nRanks) <= i) ++first;
    const auto source = [&](int k) { return k == 0 ? first : k <= first ? k - 1 : k; };
    float fold = send[static_cast<size_t>(source(0))][i], reverse = send[nRanks - 1][i];
    for (int k = 1; k < nRanks; ++k) fold += send[static_cast<size_t>(source(k))][i];
    for (int q = nRanks - 2; q >= 0; --q) reverse += send[q][i];
    orderMatters = orderMatters || std::memcmp(&fold, &reverse, sizeof(float)) != 0;
    for (int r = 0; r < nRanks; ++r) {
      ASSERT_EQ(std::memcmp(&recv[r][i], &recv[0][i], sizeof(float)), 0)
          << "element " << i << ": rank " << r << " has " << recv[r][i] << ", rank 0 " << recv[0][i];
      if (!ringNamed) {
        ASSERT_EQ(std::memcmp(&recv[r][i], &fold, sizeof(float)), 0)
            << "element " << i << ": rank " << r << " has " << recv[r][i] << ", the fold " << fold;
      }
    }
  }
  if (nRanks > 2) {
    EXPECT_TRUE(orderMatters) << "the inputs round alike in every order: the test shows nothing";
  }
}

INSTANTIATE_TEST_SUITE_P(RanksAlgorithms, AllReduceSameBits,
                         ::testing::Combine(::testing::Values(2, 3, 4, 8),
                                            ::testing::Values(Algo::Direct, Algo::Peer, Algo::Ring)),
                         [](const ::testing::TestParamInfo<std::tuple<int, Algo>>& info) {
                           return "r" + std::to_string(std::get<0>(info.param)) + "_" +
                                  algoName(std::get<1>(info.param));
                         });

}  // namespace
}  // namespace occl::test
