// A failure is one outcome on every rank: a submission that fails on one rank (its timeout, an
// abort, a peer's failure reaching it) fails on every peer, whatever the algorithm and however
// much of the failed rank's data was already in flight. Four ranks as threads run one in-place
// AllReduce under each algorithm (direct, ring, peer, an MSCCL-IR program); ranks 0-2 submit
// and fail (timeout or abort of rank 0), and only then does rank 3 submit. Before the fix, rank 3
// completed with occlSuccess wherever the failed ranks had sent all it needed (the direct
// AllReduce sends everything first; the Python case was 1 + 10 = 11 on the late rank).
// The late rank must fail with the cause its peers report, its buffer untouched.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPrompt = std::chrono::seconds(10);
constexpr int kRanks = 4;
constexpr int kLate = kRanks - 1;

enum class Cause { Timeout, Abort };

struct AlgorithmCase {
  const char* name;      // the case's name
  const char* desc;      // desc.algorithm (nullptr: built-in choice)
  size_t count;          // float32 elements
  const char* reported;  // what occlCollGetAlgorithm must report
};

// The direct AllReduce (a few KiB per peer, one hop: every rank sends all of its data first), the
// ring with far more data than its connectors hold (each failed rank has filled its FIFOs), the
// peer fold (host backend only: ranks read each other's buffers) and an all-pairs MSCCL-IR
// program of the project's fixtures.
const AlgorithmCase kAlgorithms[] = {
    {"direct", nullptr, 64, "direct"},
    {"ring", "ring", 1 << 16, "ring"},
    {"peer", nullptr, 1 << 18, "peer"},
    {"program", "program", 16 * 256, "allpairs_allreduce"},
};

using Param = std::tuple<int, Cause>;  // index into kAlgorithms, cause

class FailureAgreement : public ::testing::TestWithParam<Param> {
 protected:
  void TearDown() override {
    for (occlComm_t& c : comms_)
      if (c != nullptr) occlCommDestroy(c);
  }
  occlComm_t comms_[kRanks] = {};
};

TEST_P(FailureAgreement, ALateRankFailsWhatItsPeersFailed) {
  const AlgorithmCase& alg = kAlgorithms[std::get<0>(GetParam())];
  const Cause cause = std::get<1>(GetParam());
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = cause == Cause::Timeout ? 300 : 60000;
  ASSERT_EQ(occlCommInitAll(comms_, kRanks, nullptr, &cfg), occlSuccess) << occlGetLastError(nullptr);
  constexpr uint64_t kId = 0xFA11;
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = alg.count;
  d.algorithm = alg.desc;
  const std::string program = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/allpairs_allreduce_4r.xml";
  for (occlComm_t c : comms_) {
    if (std::string(alg.name) == "program") {
      ASSERT_EQ(occlAlgorithmLoad(c, "program", program.c_str()), occlSuccess) << occlGetLastError(c);
    }
    ASSERT_EQ(occlCollRegister(c, kId, &d), occlSuccess) << occlGetLastError(c);
  }
  const char* chosen = nullptr;
  ASSERT_EQ(occlCollGetAlgorithm(comms_[0], kId, 1, &chosen), occlSuccess);
  ASSERT_EQ(std::string(chosen), alg.reported) << "the case does not run the algorithm it is named after";

  std::vector<std::vector<float>> bufs(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    bufs[r].resize(alg.count);
    for (size_t i = 0; i < alg.count; ++i) bufs[r][i] = inputValue(r, i);
  }
  CallbackCounter done[kRanks];
  for (int r = 0; r < kLate; ++r)
    ASSERT_EQ(occlSubmit(comms_[r], kId, bufs[r].data(), bufs[r].data(), &CallbackCounter::callback, done[r].arg()),
              occlSuccess)
        << occlGetLastError(comms_[r]);

  occlResult_t expectedLate = occlTimeout;
  if (cause == Cause::Abort) {
    // Long enough for every early rank to have sent what it could before it got stuck on rank 3.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ASSERT_EQ(occlCommAbort(comms_[0]), occlSuccess);
    comms_[0] = nullptr;
    expectedLate = occlRemoteError;
  }
  bool someoneNamedTheLateRank = false;
  for (int r = 0; r < kLate; ++r) {
    ASSERT_TRUE(done[r].waitFor(1, kPrompt)) << "rank " << r << " never failed";
    const occlResult_t expected = cause == Cause::Timeout ? occlTimeout : r == 0 ? occlAborted : occlRemoteError;
    EXPECT_EQ(done[r].fired()[0].second, expected) << "rank " << r << ": " << occlGetErrorString(done[r].fired()[0].second);
    if (comms_[r] != nullptr)
      someoneNamedTheLateRank = someoneNamedTheLateRank ||
                                std::string(occlGetLastError(comms_[r])).find("waiting for data from rank 3") != std::string::npos;
  }
  // The direct AllReduce waits on rank 3 itself: the first rank whose deadline passes says so
  // (the others may learn of the failure from it first, and name it instead).
  if (cause == Cause::Timeout && std::string(alg.name) == "direct") {
    EXPECT_TRUE(someoneNamedTheLateRank) << "no timed-out rank named rank 3: " << occlGetLastError(comms_[0]);
  }

  // Every early rank has failed (and poisoned its connectors) before rank 3 submits.
  const std::vector<float> before = bufs[kLate];
  const auto start = Clock::now();
  ASSERT_EQ(occlSubmit(comms_[kLate], kId, bufs[kLate].data(), bufs[kLate].data(), &CallbackCounter::callback,
                       done[kLate].arg()),
            occlSuccess)
      << occlGetLastError(comms_[kLate]);
  ASSERT_TRUE(done[kLate].waitFor(1, kPrompt)) << "the late rank hung";
  EXPECT_LT(Clock::now() - start, kPrompt);
  const occlResult_t late = done[kLate].fired()[0].second;
  EXPECT_EQ(late, expectedLate) << "the late rank reported " << occlGetErrorString(late)
                                << " where its peers failed the same submission";
  EXPECT_EQ(bufs[kLate], before) << "the late rank's buffer changed although the submission failed";
  // Its message names a peer that had failed the submission.
  EXPECT_NE(std::string(occlGetLastError(comms_[kLate])).find(" failed it (it poisoned its connector"), std::string::npos)
      << occlGetLastError(comms_[kLate]);
}

std::string paramName(const ::testing::TestParamInfo<Param>& info) {
  return absl::StrFormat("%s_%s", kAlgorithms[std::get<0>(info.param)].name,
                         std::get<1>(info.param) == Cause::Timeout ? "timeout" : "abort");
}

INSTANTIATE_TEST_SUITE_P(Algorithms, FailureAgreement,
                         ::testing::Combine(::testing::Range(0, static_cast<int>(std::size(kAlgorithms))),
                                            ::testing::Values(Cause::Timeout, Cause::Abort)),
                         paramName);

}  // namespace
}  // namespace occl::test
