// The yield board (queues/yield_board.hpp): a rank's word counts its threads inside a yield; a
// wait for a peer whose word is 0 (on a CPU) spins on its core instead of yielding, and one for a
// peer in a yield, a peer the FIFO does not name, or without a board, yields as before. The
// executor's choice is seen through parking: a wait parks after parkAfter yielding rounds, and
// never after rounds that spun. The transports hand every rank of a host the same board.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "daemon/executor.hpp"
#include "queues/yield_board.hpp"
#include "support/dev_shm.hpp"
#include "support/one_block.hpp"
#include "transport/connector.hpp"
#include "transport/in_process/connectors.hpp"
#include "transport/routed.hpp"
#include "transport/shm/connectors.hpp"

namespace occl {
namespace {

TEST(YieldBoardTest, ARankIsOnACpuUnlessOneOfItsThreadsIsInAYield) {
  auto board = std::make_unique<YieldBoard>();
  EXPECT_TRUE(namedRankOnCpu(board.get(), namedRank(3)));
  board->of(3)->threadsInYield = 1;
  EXPECT_FALSE(namedRankOnCpu(board.get(), namedRank(3)));
  EXPECT_TRUE(namedRankOnCpu(board.get(), namedRank(2))) << "only rank 3 yields";
  EXPECT_FALSE(namedRankOnCpu(board.get(), 0)) << "a FIFO that names nobody";
  EXPECT_FALSE(namedRankOnCpu(nullptr, namedRank(2))) << "no board";
  EXPECT_FALSE(namedRankOnCpu(board.get(), namedRank(kYieldBoardRanks))) << "a rank past the board";
  EXPECT_EQ(board->of(kYieldBoardRanks), nullptr);
  EXPECT_EQ(board->of(-1), nullptr);
}

TEST(YieldBoardTest, AThreadInsideCountedYieldIsSeenAndLeavesTheWordAsItFoundIt) {
  auto board = std::make_unique<YieldBoard>();
  YieldWord* word = board->of(1);
  std::atomic<bool> stop{false};
  std::thread yielder([&] {
    while (!stop.load(std::memory_order_relaxed)) countedYield(word);
  });
  bool seen = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!seen && std::chrono::steady_clock::now() < until) seen = !namedRankOnCpu(board.get(), namedRank(1));
  stop = true;
  yielder.join();
  EXPECT_TRUE(seen) << "rank 1's thread was never seen inside its yield in 10 s";
  EXPECT_EQ(word->threadsInYield, 0u);
  countedYield(nullptr);  // no word: a plain yield
}

// A wait on one FIFO that never fills, run by hand: one block, one Recv step, its FIFO's sender
// named rank 1. Threshold 2 rounds and no time bound, parkAfter 1: a first round that yields makes
// the second park (fifoParksOnThisThread); rounds that spin never park, and the clock a spin reads
// once every kSpinRoundsPerClockRead rounds keeps both inside kPeerOnCpuSpinNs.
class PeerWaitTest : public ::testing::Test {
 protected:
  struct alignas(64) Memory {
    FifoHeader header;
    char pad[kFifoDataOffset - sizeof(FifoHeader)];
    char slots[2 * 64];
    uint64_t lengths[2];
    alignas(64) FifoLine lines[2];
  };

  void TearDown() override {
    tYieldBoard = nullptr;
    tYieldWord = nullptr;
  }

  // Parks the wait took before it gave up.
  uint64_t parksOfOneWait() {
    const FifoHandle recv{&memory_->header, memory_->slots, 2, 0, 64};
    const DeviceStep step{StepOp::Recv, BufKind::Input, BufKind::Output, 0, 0, 0, 1, -1, 0, kNoConnector, 0};
    const BlockPlan plan{&step, nullptr, &recv, 1, 0, 1};
    CollShared shared{};
    CollDesc d = test::oneBlockDesc(&plan, &shared, 2, 4, 4, 1);
    const ProgramForm& form = d.forms[kFormOutOfPlace];
    std::vector<float> in(4, 1.0f), out(4, 0.0f);
    BlockContext ctx{};
    const TaskBuffers bufs{reinterpret_cast<char*>(in.data()), reinterpret_cast<char*>(out.data()), nullptr};
    const SpinBudget budget{2, 0, false, 0, nullptr, 0, false, 1, 0, 1};
    BlockExecutor ex(d, form, 0, ctx, bufs, budget, nullptr, 0);
    const uint64_t before = fifoParksOnThisThread();
    const TryOutcome o = ex.run();
    EXPECT_EQ(o.status, TryStatus::Preempted);
    EXPECT_FALSE(o.progressed);
    return fifoParksOnThisThread() - before;
  }

  std::unique_ptr<Memory> memory_ = std::make_unique<Memory>();
  std::unique_ptr<YieldBoard> board_ = std::make_unique<YieldBoard>();
};

TEST_F(PeerWaitTest, AWaitForAPeerOnACpuSpinsAndNeverParks) {
  memory_->header.senderRank = namedRank(1);
  tYieldBoard = board_.get();
  tYieldWord = board_->of(0);
  EXPECT_EQ(parksOfOneWait(), 0u);
}

TEST_F(PeerWaitTest, AWaitForAPeerInAYieldYieldsAndParks) {
  memory_->header.senderRank = namedRank(1);
  board_->of(1)->threadsInYield = 1;
  tYieldBoard = board_.get();
  tYieldWord = board_->of(0);
  EXPECT_EQ(parksOfOneWait(), 1u);
  EXPECT_EQ(board_->of(0)->threadsInYield, 0u) << "the waiter's own yield was counted and uncounted";
}

TEST_F(PeerWaitTest, WithoutABoardOrANamedPeerAWaitYieldsAsBefore) {
  memory_->header.senderRank = namedRank(1);
  EXPECT_EQ(parksOfOneWait(), 1u) << "no board";
  memory_->header.senderRank = 0;
  tYieldBoard = board_.get();
  EXPECT_EQ(parksOfOneWait(), 1u) << "a FIFO that names nobody";
}

TEST(YieldBoardTransportTest, ThreadRanksOfOneWorldShareABoard) {
  auto world = transport::makeInProcessWorld();
  auto a = transport::makeInProcessFactory(world);
  auto b = transport::makeInProcessFactory(world);
  ASSERT_NE(a->yieldBoard(), nullptr);
  EXPECT_EQ(a->yieldBoard(), b->yieldBoard());
  EXPECT_NE(transport::makeInProcessFactory(transport::makeInProcessWorld())->yieldBoard(), a->yieldBoard())
      << "another communicator's world";
}

TEST(YieldBoardTransportTest, ProcessesOfOneJobShareTheBoardInTheirPoolUnlessAPeerIsBehindNet) {
  using transport::Transport;
  const uint64_t nonce = std::random_device{}() | (uint64_t{std::random_device{}()} << 32);
  {
    auto a = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    auto b = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    YieldBoard* boardA = a->yieldBoard();
    YieldBoard* boardB = b->yieldBoard();
    ASSERT_NE(boardA, nullptr);
    ASSERT_NE(boardB, nullptr);
    atomics::storeRelaxed(&boardA->of(5)->threadsInYield, 1u);
    EXPECT_EQ(atomics::loadRelaxed(&boardB->of(5)->threadsInYield), 1u) << "one board, mapped twice";
    atomics::storeRelaxed(&boardA->of(5)->threadsInYield, 0u);

    std::map<Transport, std::unique_ptr<transport::ConnectorFactory>> local;
    local[Transport::InProcess] = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    local[Transport::Shm] = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    transport::RoutedFactory routed(0, {Transport::InProcess, Transport::Shm}, std::move(local));
    ASSERT_NE(routed.yieldBoard(), nullptr);
    atomics::storeRelaxed(&boardA->of(1)->threadsInYield, 1u);
    EXPECT_FALSE(namedRankOnCpu(routed.yieldBoard(), namedRank(1))) << "the routed factory's board is the pool's";
    atomics::storeRelaxed(&boardA->of(1)->threadsInYield, 0u);

    std::map<Transport, std::unique_ptr<transport::ConnectorFactory>> mixed;
    mixed[Transport::InProcess] = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    mixed[Transport::Shm] = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    transport::RoutedFactory withNet(0, {Transport::InProcess, Transport::Shm, Transport::Net}, std::move(mixed));
    EXPECT_EQ(withNet.yieldBoard(), nullptr) << "a peer behind NET has no word here";

    // A rank with no peer in another process (a one-rank communicator, or threads that met over
    // TCP) has no shm factory: its in-process one, an shm factory of the same pool, serves.
    std::map<Transport, std::unique_ptr<transport::ConnectorFactory>> alone;
    alone[Transport::InProcess] = transport::makeShmFactory(nonce, 5000, transport::ShmRanges::Packed);
    transport::RoutedFactory self(0, {Transport::InProcess}, std::move(alone));
    ASSERT_NE(self.yieldBoard(), nullptr);
    atomics::storeRelaxed(&boardA->of(1)->threadsInYield, 1u);
    EXPECT_FALSE(namedRankOnCpu(self.yieldBoard(), namedRank(1))) << "the in-process factory's board is the pool's";
    atomics::storeRelaxed(&boardA->of(1)->threadsInYield, 0u);
  }
  EXPECT_TRUE(test::jobShmNames(nonce).empty()) << "segments left in /dev/shm: " << test::jobShmNames(nonce).front();
}

}  // namespace
}  // namespace occl
