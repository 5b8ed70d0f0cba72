// The daemon's lazy save, driven by hand on the host: a rank's daemon without a communicator,
// whose connectors the test fills itself (playing the peer), so the outcome of every try is fixed
// and nothing runs concurrently. Shows that "dirty" (the try moved the context, so it is saved)
// and "progressed" (a primitive moved data, so the block is not idle) are separate flags: a
// first try that only starts the submission, and a try that only passes a dependency and a nop,
// save without progressing; a try that gives up at the wait it was loaded at does neither.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <ostream>
#include <thread>
#include <vector>

#include "daemon/daemon.hpp"
#include "daemon/daemon_main.hpp"

namespace occl {
namespace {

constexpr uint32_t kChunkElems = 16;  // float32: one chunk fills one 64-byte slot
constexpr uint64_t kSlotBytes = kChunkElems * sizeof(float);
constexpr uint32_t kSlots = 2;
constexpr uint32_t kChunks = 3;

// Connector memory as the transports lay it out (header, then slots from kFifoDataOffset, then
// the slots' length words, then their lines from the next 64-byte boundary).
struct alignas(64) ConnectorMemory {
  FifoHeader header;
  char pad[kFifoDataOffset - sizeof(FifoHeader)];
  char slots[kSlots * kSlotBytes];
  uint64_t lengths[kSlots];
  alignas(64) FifoLine lines[kSlots];
};
static_assert(sizeof(ConnectorMemory) >= fifoBytes(kSlots, kSlotBytes), "room for what FifoHandle touches");

// A connector whose receiving end belongs to the daemon; the test is the sender.
class Connector {
 public:
  FifoHandle handle() const { return FifoHandle{&memory_->header, memory_->slots, kSlots, 0, kSlotBytes}; }
  // The peer failed the collective (its timeout) after sending what it sent, from its submission
  // `fromSeq` on.
  void poison(uint32_t status, uint64_t fromSeq = 0) const { handle().poisonWith(status, fromSeq); }
  void sendChunkOf(float value) const {
    FifoHandle h = handle();
    ASSERT_TRUE(h.canSend());
    auto* slot = reinterpret_cast<float*>(h.sendSlot());
    std::fill(slot, slot + kChunkElems, value);
    h.commitSend(kSlotBytes);
  }

 private:
  std::unique_ptr<ConnectorMemory> memory_ = std::make_unique<ConnectorMemory>();
};

struct Counters {
  uint64_t preemptions, contextLoads, contextSaves;
  bool operator==(const Counters&) const = default;
};
std::ostream& operator<<(std::ostream& out, const Counters& c) {
  return out << "{preemptions " << c.preemptions << ", loads " << c.contextLoads << ", saves " << c.contextSaves
             << "}";
}

// One registered collective of two daemon blocks, built as src/host/collective.cpp would:
//   block 0: step 0  nop, after block 1 has done its step 0;  step 1  receive chunks 0 and 1 from `a`
//   block 1: step 0  receive chunk 2 from `b` (block 0 depends on it)
// Thresholds are counted in rounds only (no time bound), so a wait on an empty connector gives up
// after exactly kThreshold rounds.
// The rig's output once the peers' chunks of 1, 2 and 3 (connector a: chunks 0 and 1; b: chunk 2)
// are received.
std::vector<float> outputOfChunks123() {
  std::vector<float> expected(kChunks * kChunkElems);
  std::fill_n(expected.begin(), kChunkElems, 1.0f);
  std::fill_n(expected.begin() + kChunkElems, kChunkElems, 2.0f);
  std::fill_n(expected.begin() + 2 * kChunkElems, kChunkElems, 3.0f);
  return expected;
}

class DaemonRig {
 public:
  static constexpr uint32_t kThreshold = 8;
  Connector a, b;
  std::vector<float> output = std::vector<float>(kChunks * kChunkElems, -1.0f);

  // `smallForm`: the collective has a small form (CollDesc::smallCount), so its submissions may
  // carry kSqeBarrier, and two may be in flight.
  explicit DaemonRig(bool smallForm = false) : smallForm_(smallForm) {
    steps0_[0] = DeviceStep{StepOp::Nop, BufKind::Input, BufKind::Output, 0, 0, 0, 1, 1, 0, kNoConnector, kNoConnector};
    steps0_[1] = DeviceStep{StepOp::Recv, BufKind::Input, BufKind::Output, 0, 0, 0, 2, -1, 0, kNoConnector, 0};
    steps1_[0] = DeviceStep{StepOp::Recv, BufKind::Input, BufKind::Output, kStepHasDep, 0, 2, 1, -1, 0, kNoConnector, 0};
    recvs_[0] = a.handle();
    recvs_[1] = b.handle();
    plans_[0] = BlockPlan{steps0_, nullptr, &recvs_[0], 2, 0, 1};
    plans_[1] = BlockPlan{steps1_, nullptr, &recvs_[1], 1, 0, 1};
    pages_[0] = page_.data();
    page_[0] = describeCollective();
    for (int blk = 0; blk < 2; ++blk) {
      blocks_[blk].tasks = tasks_[blk];
      blocks_[blk].report = &reports_[blk];
      blocks_[blk].capacity = 4;
    }
    env_.sq = SubmissionQueue{sqSlots_, reports_, &sqPublished_, 4, 2};
    env_.cq = CompletionQueue{cqSlots_, cqHeads_, reports_, 4, 2};
    env_.colls = CollTable{pages_.data()};
    env_.blocks = blocks_;
    env_.nBlocks = 2;
    env_.policy = SchedPolicy{occlOrderFifo, occlSpinPolicyStickiness, kThreshold, 1, 1, 4, 4, 0, 0, 0, 0, 0, 1, 0};
    env_.abortFlag = &abortFlag_;
    env_.hostAbortFlag = &abortFlag_;
  }

  // Publishes submission `seq` (at SQ ticket `seq`, with `flags`) and lets both blocks take it, so
  // that each later pass of a block is exactly one try of each task it holds (the pass that takes
  // an SQE counts the arrival as progress).
  void submitAndTake(uint64_t seq = 0, uint16_t flags = kSqeSubmit) {
    uint64_t limit = 0;
    ASSERT_TRUE(env_.sq.tryPush(seq, SqeView{flags, 2, 0, seq, 0, reinterpret_cast<uint64_t>(output.data()), 0}, limit));
    for (int blk = 0; blk < 2; ++blk) {
      PassClock clock;
      ASSERT_TRUE(pollSubmissions(env_, blocks_[blk], blk, clock));
      ASSERT_EQ(blocks_[blk].nTasks, seq + 1);
    }
  }
  void publishExit(uint64_t ticket) {
    uint64_t limit = 0;
    ASSERT_TRUE(env_.sq.tryPush(ticket, SqeView{kSqeExit, 0, 0, 0, 0, 0, 0}, limit));
  }
  PassResult pass(int block) { return daemonPass(env_, block); }
  // Runs block `block`'s whole part of launch `epoch` on this thread.
  void launchBlock(uint32_t epoch, int block, QuitLimits limits = {1'000'000'000, 1'000'000'000}) {
    daemonBlockMain(env_, DaemonLaunch{&quitWord_, &endedEpoch_, epoch, 0, limits}, block);
  }
  uint32_t endedEpoch() const { return endedEpoch_; }
  // As reported, which a block does as it leaves a launch.
  uint64_t sqNext(int block) const { return reports_[block].sqNext; }
  Counters counters(int block) const {
    const BlockStats& s = stats_[block];
    return {s.preemptions, s.contextLoads, s.contextSaves};
  }
  uint64_t completions(int block) const { return stats_[block].completions; }
  uint64_t cqesPublished() const { return blocks_[0].cqTail + blocks_[1].cqTail; }
  uint64_t cqe() const { return cqSlots_[0]; }

 private:
  CollDesc describeCollective() {
    CollDesc d{};
    d.collId = 0x77;
    d.dtype = occlFloat32;
    d.redOp = occlSum;
    d.nBlocks = 2;
    d.nRanks = 2;
    d.totalElems = kChunks * kChunkElems;
    d.tileElems = kChunkElems;
    d.elemBytes = sizeof(float);
    ProgramForm& form = d.forms[kFormOutOfPlace];
    form.blocks = plans_;
    form.chunkElems = kChunkElems;
    form.nChunks = kChunks;
    form.nTiles = 1;
    form.nParts = 2;
    d.forms[kFormInPlace] = form;
    d.shared = &shared_;
    d.contexts = contexts_;
    d.stats = stats_;
    d.inflightWindow = smallForm_ ? 2 : 1;
    d.smallCount = smallForm_ ? 1 : 0;  // its small form itself is not needed here
    return d;
  }

  bool smallForm_;
  DeviceStep steps0_[2]{};
  DeviceStep steps1_[1]{};
  FifoHandle recvs_[2]{};
  BlockPlan plans_[2]{};
  CollShared shared_{};
  BlockContext contexts_[2]{};
  BlockStats stats_[2]{};
  std::vector<CollDesc> page_ = std::vector<CollDesc>(CollTable::kPageSize);
  std::vector<CollDesc*> pages_ = std::vector<CollDesc*>(CollTable::kMaxPages, nullptr);
  Sqe sqSlots_[4]{};
  uint64_t sqPublished_ = 0;
  uint64_t cqSlots_[8]{};  // two rings of 4
  uint64_t cqHeads_[2 * CompletionQueue::kHeadStride]{};
  BlockReport reports_[2]{};
  TaskEntry tasks_[2][4]{};
  BlockState blocks_[2]{};
  uint32_t abortFlag_ = 0;
  uint64_t quitWord_ = 0;
  uint32_t endedEpoch_ = 0;
  DaemonEnv env_{};
};

TEST(DaemonTryTest, AFirstTryThatRunsNothingSavesOnceAndItsRetriesSaveNothing) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());

  // Block 1 waits for its peer: its first try marks the submission started, which must be
  // saved, yet no data moved, so the block is idle (it may back off and park).
  PassResult first = rig.pass(1);
  EXPECT_FALSE(first.progressed);
  EXPECT_TRUE(first.pending);
  EXPECT_EQ(rig.counters(1), (Counters{1, 1, 1}));

  for (uint64_t retry = 2; retry <= 5; ++retry) {
    EXPECT_FALSE(rig.pass(1).progressed);
    EXPECT_EQ(rig.counters(1), (Counters{retry, retry, 1})) << "retry " << retry;
  }
}

TEST(DaemonTryTest, DirtyAndProgressedAreSeparateThroughOneSubmission) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());

  // Block 0 waits for block 1's step: the first try saves (started), the retry saves nothing.
  EXPECT_FALSE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{1, 1, 1}));
  EXPECT_FALSE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{2, 2, 1}));

  // Block 1 receives its chunk and finishes; block 0 has not, so no CQE yet.
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  PassResult blockOneDone = rig.pass(1);
  EXPECT_TRUE(blockOneDone.progressed);
  EXPECT_FALSE(blockOneDone.pending);
  EXPECT_EQ(rig.counters(1), (Counters{0, 1, 0}));
  EXPECT_EQ(rig.cqesPublished(), 0u);

  // Block 0 passes the dependency and the nop, then waits at its receive: the context moved
  // (saved) but no data did (not progressed).
  EXPECT_FALSE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{3, 3, 2}));
  EXPECT_FALSE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{4, 4, 2}));

  // One chunk arrives: received (progressed) and the context moved to the next chunk (saved).
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(1.0f));
  EXPECT_TRUE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{5, 5, 3}));
  EXPECT_FALSE(rig.pass(0).progressed);
  EXPECT_EQ(rig.counters(0), (Counters{6, 6, 3}));

  // The last chunk: block 0 completes, is the last block, and publishes the CQE.
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(2.0f));
  PassResult blockZeroDone = rig.pass(0);
  EXPECT_TRUE(blockZeroDone.progressed);
  EXPECT_FALSE(blockZeroDone.pending);
  EXPECT_EQ(rig.counters(0), (Counters{6, 7, 3}));
  EXPECT_EQ(rig.completions(0), 1u);
  EXPECT_EQ(rig.cqesPublished(), 1u);
  EXPECT_EQ(rig.cqe(), cqe::pack(0, occlSuccess, 0));

  EXPECT_EQ(rig.output, outputOfChunks123());
}

// A submission whose form differs from its predecessor's (kSqeBarrier) starts only once every
// earlier submission of its collective completed, even where its own part is free to run: block 1
// is done with submission 0 and its connector already holds submission 1's chunk, yet it waits
// until block 0 has finished submission 0 too.
TEST(DaemonTryTest, ABarrierSubmissionWaitsForEveryEarlierOneToComplete) {
  DaemonRig rig(/*smallForm=*/true);
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake(0));
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake(1, kSqeBarrier));
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(4.0f));
  EXPECT_TRUE(rig.pass(1).progressed);  // submission 0's part; submission 1's is not tried
  EXPECT_EQ(rig.counters(1), (Counters{0, 1, 0}));
  EXPECT_FALSE(rig.pass(1).progressed);
  EXPECT_EQ(rig.counters(1), (Counters{0, 1, 0}));
  EXPECT_EQ(rig.output[2 * kChunkElems], 3.0f);

  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(1.0f));
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(2.0f));
  EXPECT_TRUE(rig.pass(0).progressed);  // submission 0 completes: its CQE
  EXPECT_EQ(rig.cqesPublished(), 1u);
  EXPECT_TRUE(rig.pass(1).progressed);  // now submission 1's part runs
  EXPECT_EQ(rig.counters(1), (Counters{0, 2, 0}));
  EXPECT_EQ(rig.output[2 * kChunkElems], 4.0f);
}

// A failure is one outcome on every rank. The peer sends every chunk this rank needs and then
// fails the collective (its deadline passed while it waited for something else). Block 0 is past
// its start, finds both chunks in its connector and never waits, so only the look after its last
// step sees the poison: the submission fails with the peer's cause instead of succeeding.
TEST(DaemonTryTest, AllDataInAndThePeerFailedStillFails) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  EXPECT_TRUE(rig.pass(1).progressed);  // block 1 done, before the failure
  EXPECT_FALSE(rig.pass(0).progressed);  // past the dependency and the nop, waiting at its receive
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(1.0f));
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(2.0f));
  rig.a.poison(occlTimeout);
  PassResult last = rig.pass(0);
  EXPECT_FALSE(last.pending);
  ASSERT_EQ(rig.cqesPublished(), 1u);
  EXPECT_EQ(rig.cqe(), cqe::pack(0, occlTimeout, 0)) << "completed with data from a peer that failed";
}

// The peer finished submission 0 (it sent all of it) and failed its next one: the poison names
// submission 1, so this rank's submission 0, still finishing, completes as the peer's did.
TEST(DaemonTryTest, APeersFailureOfALaterSubmissionLeavesThisOneStanding) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  EXPECT_TRUE(rig.pass(1).progressed);
  EXPECT_FALSE(rig.pass(0).progressed);
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(1.0f));
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(2.0f));
  rig.a.poison(occlRemoteError, 1);
  EXPECT_FALSE(rig.pass(0).pending);
  ASSERT_EQ(rig.cqesPublished(), 1u);
  EXPECT_EQ(rig.cqe(), cqe::pack(0, occlSuccess, 0)) << "failed by a peer's failure of a later submission";
}

// A failure known before the first try (the peer poisoned the connector before this rank
// submitted) fails the submission without touching the user's buffers, although the data it
// would receive is there.
TEST(DaemonTryTest, AFailureKnownAtTheFirstTryTouchesNothing) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  rig.b.poison(occlRemoteError);
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());
  EXPECT_FALSE(rig.pass(1).pending);
  EXPECT_EQ(rig.output, std::vector<float>(kChunks * kChunkElems, -1.0f));
  // Block 0 shares the collective's sticky failure: it fails at its first try too.
  EXPECT_FALSE(rig.pass(0).pending);
  ASSERT_EQ(rig.cqesPublished(), 1u);
  EXPECT_EQ(rig.cqe(), cqe::pack(0, occlRemoteError, 0));
  EXPECT_EQ(rig.output, std::vector<float>(kChunks * kChunkElems, -1.0f));
}

// A launch ends only once every block of its grid has joined. Block 1 starts after block 0 has
// left for the exit SQE (a GPU busy elsewhere makes blocks resident late): block 0's exit vote
// does not seal launch 1 alone, so block 1 still joins it, reads the exit SQE and ends it. A
// retired block joins later launches and votes at once, so they end too.
TEST(DaemonTryTest, AnExitVoteDoesNotEndALaunchBeforeEveryBlockJoined) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.publishExit(0));
  rig.launchBlock(1, 0);  // reads the exit SQE and votes for good: 1 of a grid of 2
  EXPECT_EQ(rig.endedEpoch(), 0u);
  rig.launchBlock(1, 1);  // joins, reads the exit SQE, and its vote seals launch 1
  EXPECT_EQ(rig.endedEpoch(), 1u);
  EXPECT_EQ(rig.sqNext(0), 1u);
  EXPECT_EQ(rig.sqNext(1), 1u) << "block 1 never read the exit SQE";

  rig.launchBlock(2, 0);
  rig.launchBlock(2, 1);
  EXPECT_EQ(rig.endedEpoch(), 2u) << "a launch of retired blocks never ended";
}

// The simt livelock of issue 42. Block 0 waits for block 1's step (a cross-block dependency, as
// an MSCCL-IR program's threadblocks wait for its reducing one); block 1 starts far later than
// the stuck time after block 0. Before, block 0's stuck vote sealed the launch alone, block 1
// left unjoined, and if it always started that late it never ran: every launch ended stuck, and
// the ranks preempted in step forever with no callback. Block 0 now keeps its launch open for
// block 1, which runs its part, and the submission completes in this launch.
TEST(DaemonTryTest, ABlockThatStartsAfterTheStuckTimeStillRuns) {
  DaemonRig rig;
  ASSERT_NO_FATAL_FAILURE(rig.submitAndTake());
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(1.0f));
  ASSERT_NO_FATAL_FAILURE(rig.a.sendChunkOf(2.0f));
  ASSERT_NO_FATAL_FAILURE(rig.b.sendChunkOf(3.0f));
  const QuitLimits quick{1'000'000, 1'000'000};  // 1 ms idle and stuck
  std::thread early([&] { rig.launchBlock(1, 0, quick); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // 50 stuck times
  // Block 1 stays 2 s idle after its part before it votes: block 0, which voted stuck long ago,
  // withdraws its vote only at its next pass after block 1's step, and a thread of a loaded
  // machine (the ASan stage of a CI run) can take more than 1 ms to get there; block 1's idle
  // vote would then seal the launch first, and the submission would complete only in the next
  // launch (correct, as the host relaunches, but not what this test shows).
  rig.launchBlock(1, 1, QuitLimits{2'000'000'000, 1'000'000});
  early.join();
  EXPECT_EQ(rig.endedEpoch(), 1u);
  ASSERT_EQ(rig.cqesPublished(), 1u) << "block 1 never ran in the launch block 0 had started";
  EXPECT_EQ(rig.cqe(), cqe::pack(0, occlSuccess, 0));
  EXPECT_EQ(rig.output, outputOfChunks123());
}

}  // namespace
}  // namespace occl
