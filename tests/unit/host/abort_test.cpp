// occlCommAbort and teardown: a submission that can never complete fails promptly with
// occlAborted, the peer's matching collective fails with occlRemoteError through the poisoned
// connector instead of hanging, finalize with nothing pending is quick, and destroying a
// communicator with pending work neither hangs nor loses the callback; ranks reading each other's
// buffers stop before a failed rank's buffers are freed.
#include <gtest/gtest.h>

#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <string>
#include <vector>

#include "support/ranks.hpp"

namespace occl::test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kPrompt = std::chrono::seconds(5);

// The parameter forces preemption at every wait, where a waiter gives up before its periodic
// failure check would run: an abort must still reach it.
occlConfig_t abortConfig(bool forcePreempt) {
  occlConfig_t cfg = testConfig();
  cfg.collTimeoutMs = 30000;  // far above kPrompt: a pass proves the abort, not the timeout, ended it
  cfg.forcePreempt = forcePreempt ? 1 : 0;
  return cfg;
}

// Two ranks as threads with a registered AllReduce; releases what the test left behind.
class AbortTest : public ::testing::TestWithParam<bool> {
 protected:
  static constexpr uint64_t kId = 0xAB;
  static constexpr size_t kCount = 4096;

  void SetUp() override {
    occlConfig_t cfg = abortConfig(GetParam());
    ASSERT_EQ(occlCommInitAll(comms_, 2, nullptr, &cfg), occlSuccess) << occlGetLastError(nullptr);
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kCount;
    // The ring, where a peer still waits for the aborted rank after the abort, whatever the count.
    // The direct AllReduce (small counts) sends everything first, so rank 1 finds all it needs and
    // fails only through its look at the connectors after its last step (failure_agreement_test).
    d.algorithm = "ring";
    for (occlComm_t c : comms_) ASSERT_EQ(occlCollRegister(c, kId, &d), occlSuccess) << occlGetLastError(c);
    for (auto& b : bufs_) b.assign(kCount, 1.0f);
  }
  void TearDown() override {
    for (occlComm_t c : comms_)
      if (c != nullptr) occlCommDestroy(c);
  }
  void submit(int rank, CallbackCounter& done) {
    ASSERT_EQ(occlSubmit(comms_[rank], kId, bufs_[rank].data(), bufs_[rank].data(), &CallbackCounter::callback, done.arg()),
              occlSuccess)
        << occlGetLastError(comms_[rank]);
  }
  // Aborting frees the communicator: forget it so TearDown does not touch it again.
  void abortRank(int rank) {
    ASSERT_EQ(occlCommAbort(comms_[rank]), occlSuccess);
    comms_[rank] = nullptr;
  }

  occlComm_t comms_[2] = {nullptr, nullptr};
  std::vector<float> bufs_[2];
};

TEST_P(AbortTest, PendingSubmissionFailsWithAbortedPromptly) {
  CallbackCounter done;
  submit(0, done);  // rank 1 never submits: this can never complete
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // let the daemon start and get stuck
  EXPECT_TRUE(done.fired().empty());
  const auto start = Clock::now();
  abortRank(0);
  ASSERT_TRUE(done.waitFor(1, kPrompt)) << "the callback did not fire after occlCommAbort";
  EXPECT_LT(Clock::now() - start, kPrompt);
  ASSERT_EQ(done.fired().size(), 1u);
  EXPECT_EQ(done.fired()[0].second, occlAborted);
}

TEST_P(AbortTest, PeerCollectiveFailsWithRemoteError) {
  CallbackCounter aborted, peer;
  submit(0, aborted);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  abortRank(0);
  ASSERT_TRUE(aborted.waitFor(1, kPrompt));
  const auto start = Clock::now();
  submit(1, peer);  // its partner is gone: the poisoned connectors say so
  ASSERT_TRUE(peer.waitFor(1, kPrompt)) << "the peer's collective hung instead of failing";
  EXPECT_EQ(peer.fired()[0].second, occlRemoteError);
  EXPECT_LT(Clock::now() - start, kPrompt);
}

TEST_P(AbortTest, PeerAlreadyWaitingFailsWithRemoteError) {
  occlConfig_t cfg = abortConfig(GetParam());
  occlComm_t trio[3];
  ASSERT_EQ(occlCommInitAll(trio, 3, nullptr, &cfg), occlSuccess);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = kCount;
  for (occlComm_t c : trio) ASSERT_EQ(occlCollRegister(c, 0x3, &d), occlSuccess);
  std::vector<float> b[3];
  CallbackCounter done[3];
  for (int r = 0; r < 2; ++r) {  // rank 2 never submits
    b[r].assign(kCount, 1.0f);
    ASSERT_EQ(occlSubmit(trio[r], 0x3, b[r].data(), b[r].data(), &CallbackCounter::callback, done[r].arg()), occlSuccess);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  ASSERT_EQ(occlCommAbort(trio[0]), occlSuccess);
  ASSERT_TRUE(done[0].waitFor(1, kPrompt));
  EXPECT_EQ(done[0].fired()[0].second, occlAborted);
  ASSERT_TRUE(done[1].waitFor(1, kPrompt)) << "rank 1 kept waiting on the aborted rank";
  EXPECT_EQ(done[1].fired()[0].second, occlRemoteError);
  EXPECT_LT(Clock::now() - start, kPrompt);
  for (int r = 1; r < 3; ++r) EXPECT_EQ(occlCommDestroy(trio[r]), occlSuccess);
}

TEST_P(AbortTest, FinalizeWithNothingPendingIsQuick) {
  CallbackCounter done[2];
  for (int r = 0; r < 2; ++r) submit(r, done[r]);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(done[r].waitFor(1, std::chrono::seconds(30)));
  const auto start = Clock::now();
  for (occlComm_t c : comms_) EXPECT_EQ(occlCommFinalize(c), occlSuccess) << occlGetLastError(c);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(1));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(done[r].fired()[0].second, occlSuccess);
}

TEST_P(AbortTest, DestroyWithPendingWorkDoesNotHang) {
  CallbackCounter done;
  submit(0, done);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  EXPECT_EQ(occlCommDestroy(comms_[0]), occlSuccess);
  comms_[0] = nullptr;
  EXPECT_LT(Clock::now() - start, kPrompt);
  // The callback still fires exactly once (with an error), before destroy returns.
  ASSERT_EQ(done.fired().size(), 1u);
  EXPECT_NE(done.fired()[0].second, occlSuccess);
}

// Nothing of rank 1 was pending, yet its abort poisons every connector of its registrations:
// rank 0's later submission fails at once instead of waiting for its timeout.
TEST_P(AbortTest, AbortWithNothingPendingStillFailsLaterPeerSubmissions) {
  const auto start = Clock::now();
  abortRank(1);
  EXPECT_LT(Clock::now() - start, kPrompt);
  occlResult_t async = occlSuccess;
  ASSERT_EQ(occlCommGetAsyncError(comms_[0], &async), occlSuccess);
  EXPECT_EQ(async, occlSuccess) << "an in-process peer's abort is not rank 0's own error";
  CallbackCounter done;
  submit(0, done);
  ASSERT_TRUE(done.waitFor(1, kPrompt)) << "rank 0 waited for an aborted peer";
  EXPECT_EQ(done.fired()[0].second, occlRemoteError);
  EXPECT_EQ(occlCommFinalize(comms_[0]), occlSuccess) << occlGetLastError(comms_[0]);
}

// Peer reads (primitives/peer_read.hpp): ranks read each other's buffers, so a rank that aborts
// while its peers read must not hand its buffers back before they stop, and a survivor that fails
// must not either. Every rank runs a 1 MiB AllReduce (the peer program) again and again; rank 3
// aborts with a run in flight, after a delay that differs per round. Each buffer is its own
// mapping, unmapped the moment its owner's collective has failed (or its abort returned): a read
// past that point faults. Successful runs are checked, and nothing may hang.
class MappedFloats {
 public:
  explicit MappedFloats(size_t n, float value) : bytes_(n * sizeof(float)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = static_cast<float*>(p);
    std::fill(data_, data_ + n, value);
  }
  ~MappedFloats() { munmap(data_, bytes_); }
  MappedFloats(const MappedFloats&) = delete;
  MappedFloats& operator=(const MappedFloats&) = delete;
  float* data() const { return data_; }

 private:
  size_t bytes_;
  float* data_;
};

TEST_P(AbortTest, PeerReadsEndBeforeAFailedRanksBuffersAreFreed) {
  constexpr int kRanks = 4;
  constexpr size_t kBig = size_t{1} << 18;
  constexpr uint64_t kPeerId = 0x9EE2;
  for (int round = 0; round < 8; ++round) {
    occlConfig_t cfg = abortConfig(GetParam());
    occlComm_t comms[kRanks];
    ASSERT_EQ(occlCommInitAll(comms, kRanks, nullptr, &cfg), occlSuccess) << occlGetLastError(nullptr);
    occlCollDesc_t d;
    occlCollDescInit(&d);
    d.count = kBig;
    for (occlComm_t c : comms) ASSERT_EQ(occlCollRegister(c, kPeerId, &d), occlSuccess) << occlGetLastError(c);
    const char* algorithm = nullptr;
    ASSERT_EQ(occlCollGetAlgorithm(comms[0], kPeerId, 1, &algorithm), occlSuccess);
    if (std::string(algorithm) != "peer") {  // the simt backend (OCCL_BACKEND=simt) runs the ring
      for (occlComm_t c : comms) EXPECT_EQ(occlCommDestroy(c), occlSuccess);
      GTEST_SKIP() << "peer reads run on the host backend only; this one runs " << algorithm;
    }
    const auto abortAfter = std::chrono::microseconds(60 * round);
    std::vector<int> runs(kRanks, 0);
    std::vector<occlResult_t> last(kRanks, occlSuccess);
    runRanks(kRanks, [&](int r) {
      for (;;) {
        MappedFloats buf(kBig, static_cast<float>(r + 1));
        CallbackCounter done;
        ASSERT_EQ(occlSubmit(comms[r], kPeerId, buf.data(), buf.data(), &CallbackCounter::callback, done.arg()), occlSuccess);
        if (r == kRanks - 1 && runs[r] == 2) {  // abort with this run in flight, whatever the peers are doing
          std::this_thread::sleep_for(abortAfter);
          ASSERT_EQ(occlCommAbort(comms[r]), occlSuccess);
          comms[r] = nullptr;
          ASSERT_TRUE(done.waitFor(1, kPrompt));
          last[r] = done.fired()[0].second;
          return;  // unmapped here: no peer may read it any more
        }
        ASSERT_TRUE(done.waitFor(1, std::chrono::seconds(30))) << "rank " << r << " hung in run " << runs[r];
        last[r] = done.fired()[0].second;
        if (last[r] != occlSuccess) return;  // unmapped here
        for (size_t i = 0; i < kBig; ++i) ASSERT_EQ(buf.data()[i], 10.0f) << "rank " << r << ", run " << runs[r];
        ++runs[r];
      }
    });
    // The aborted run may have completed before the abort; the survivors' next run cannot.
    EXPECT_TRUE(last[kRanks - 1] == occlAborted || last[kRanks - 1] == occlSuccess) << last[kRanks - 1];
    for (int r = 0; r < kRanks - 1; ++r) {
      EXPECT_EQ(last[r], occlRemoteError) << "round " << round << ", rank " << r;
      EXPECT_GE(runs[r], 2) << "round " << round << ", rank " << r;
      EXPECT_EQ(occlCommDestroy(comms[r]), occlSuccess);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Preemption, AbortTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "forcePreempt" : "stickiness"; });

}  // namespace
}  // namespace occl::test
