// Ring AllReduce on ranks as threads: bit-exact against a reference for 1..8 ranks, counts
// that leave chunks of unequal and zero length, in place and out of place.
#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

#include "support/ranks.hpp"

namespace occl::test {
namespace {

using Param = std::tuple<int, size_t, bool>;  // ranks, count, in place

class AllReduceTest : public ::testing::TestWithParam<Param> {};

TEST_P(AllReduceTest, MatchesReferenceBitExactly) {
  const auto [nRanks, count, inPlace] = GetParam();
  CommGroup comms(nRanks);
  constexpr uint64_t kId = 0xA11;
  std::vector<std::vector<float>> send(nRanks), recv(nRanks);
  runRanks(nRanks, [&](int r) {
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.type = occlCollAllReduce;
    d.count = count;
    d.datatype = occlFloat32;
    d.op = occlSum;
    expectOk(occlCollRegister(comms[r], kId, &d), comms[r], "register");
    send[r].resize(count);
    recv[r].assign(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[r][i] = inputValue(r, i);
    CallbackCounter done;
    float* out = inPlace ? send[r].data() : recv[r].data();
    expectOk(occlSubmit(comms[r], kId, send[r].data(), out, &CallbackCounter::callback, &done), comms[r], "submit");
    ASSERT_TRUE(done.waitFor(1)) << "rank " << r << " timed out";
    ASSERT_EQ(done.fired().size(), 1u);
    EXPECT_EQ(done.fired()[0].second, occlSuccess);
  });
  const float ranksSum = static_cast<float>(nRanks * (nRanks + 1) / 2);
  for (int r = 0; r < nRanks; ++r) {
    const std::vector<float>& out = inPlace ? send[r] : recv[r];
    for (size_t i = 0; i < count; ++i) {
      float expected = ranksSum * static_cast<float>(i % 7 + 1);
      ASSERT_EQ(std::memcmp(&out[i], &expected, sizeof(float)), 0)
          << "rank " << r << " element " << i << ": " << out[i] << " != " << expected;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RanksCountsPlaces, AllReduceTest,
                         ::testing::Combine(::testing::Range(1, 9),
                                            ::testing::Values(size_t{0}, size_t{1}, size_t{7}, size_t{1023},
                                                              (size_t{1} << 20) + 3),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           return "r" + std::to_string(std::get<0>(info.param)) + "_n" +
                                  std::to_string(std::get<1>(info.param)) +
                                  (std::get<2>(info.param) ? "_inplace" : "_outofplace");
                         });

}  // namespace
}  // namespace occl::test
