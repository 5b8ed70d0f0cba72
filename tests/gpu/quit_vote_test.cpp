// The CUDA daemon's quit vote (src/daemon/quit_vote.hpp) on the host: the protocol is shared
// header code, so its rules are checked here without a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "daemon/quit_vote.hpp"

namespace occl {
namespace {

TEST(QuitVote, SealsOnlyWhenEveryJoinedBlockVotes) {
  uint64_t word = 0;
  for (int b = 0; b < 3; ++b) ASSERT_TRUE(joinLaunch(&word, 1));
  EXPECT_FALSE(castQuitVote(&word, 1, 3));
  EXPECT_FALSE(castQuitVote(&word, 1, 3));
  EXPECT_FALSE(launchSealed(&word, 1));
  EXPECT_TRUE(castQuitVote(&word, 1, 3));
  EXPECT_TRUE(launchSealed(&word, 1));
}

TEST(QuitVote, WithdrawnVoteDelaysTheSealAndFailsOnceSealed) {
  uint64_t word = 0;
  ASSERT_TRUE(joinLaunch(&word, 7));
  ASSERT_TRUE(joinLaunch(&word, 7));
  EXPECT_FALSE(castQuitVote(&word, 7, 2));
  EXPECT_TRUE(withdrawQuitVote(&word, 7));
  EXPECT_FALSE(castQuitVote(&word, 7, 2));  // 1 of 2 again
  EXPECT_TRUE(castQuitVote(&word, 7, 2));  // 2 of 2: sealed
  EXPECT_FALSE(withdrawQuitVote(&word, 7));
}

TEST(QuitVote, LateBlockLeavesASealedLaunch) {
  uint64_t word = 0;
  ASSERT_TRUE(joinLaunch(&word, 2));
  ASSERT_TRUE(castQuitVote(&word, 2, 1));  // a grid of one block
  EXPECT_FALSE(joinLaunch(&word, 2));
}

// Blocks that started cannot seal the launch while a block of the grid has not joined: it may be
// the one whose part they wait for. Before, two of three blocks sealed a stuck launch here, and
// a block that always started late never ran (the simt livelock of issue 42).
TEST(QuitVote, NoSealBeforeEveryBlockOfTheGridHasJoined) {
  uint64_t word = 0;
  ASSERT_TRUE(joinLaunch(&word, 6));
  ASSERT_TRUE(joinLaunch(&word, 6));
  EXPECT_FALSE(castQuitVote(&word, 6, 3));
  EXPECT_FALSE(castQuitVote(&word, 6, 3));  // every joined block voted: 2 of a grid of 3
  EXPECT_FALSE(launchSealed(&word, 6));
  ASSERT_TRUE(joinLaunch(&word, 6)) << "the late block must still get in";
  EXPECT_FALSE(launchSealed(&word, 6));
  EXPECT_TRUE(castQuitVote(&word, 6, 3));  // its own vote completes the quorum
}

TEST(QuitVote, NewEpochStartsFromAnEmptyWord) {
  uint64_t word = 0;
  ASSERT_TRUE(joinLaunch(&word, 3));
  ASSERT_TRUE(castQuitVote(&word, 3, 1));
  EXPECT_FALSE(launchSealed(&word, 4));
  EXPECT_TRUE(joinLaunch(&word, 4));
  EXPECT_FALSE(launchSealed(&word, 4));
  EXPECT_TRUE(castQuitVote(&word, 4, 1));
}

TEST(BlockQuit, IdleAndStuckLimitsAndProgress) {
  uint64_t word = 0;
  const QuitLimits limits{100, 1000};
  BlockQuit a(&word, 1, 2, limits, 0), b(&word, 1, 2, limits, 0);
  ASSERT_TRUE(a.join());
  ASSERT_TRUE(b.join());
  const PassResult idle{false, false, false}, stuck{false, true, false}, progress{true, true, false};
  EXPECT_FALSE(a.afterPass(idle, 50));     // not idle long enough
  EXPECT_FALSE(a.afterPass(idle, 150));    // votes: 1 of 2
  EXPECT_FALSE(b.afterPass(stuck, 500));   // stuck, but below the stuck limit
  EXPECT_FALSE(b.afterPass(progress, 600));
  EXPECT_FALSE(b.afterPass(stuck, 1500));  // 900 since progress: still below
  EXPECT_TRUE(b.afterPass(stuck, 1700));   // votes: 2 of 2, sealed
  EXPECT_TRUE(a.afterPass(idle, 1800));    // a sees the seal
}

TEST(BlockQuit, LeaveTellsTheHostOnlyOnceSealed) {
  uint64_t word = 0;
  uint32_t ended = 0;
  const QuitLimits limits{10, 10};
  BlockQuit a(&word, 9, 2, limits, 0), b(&word, 9, 2, limits, 0);
  ASSERT_TRUE(a.join());
  ASSERT_TRUE(b.join());
  const PassResult idle{false, false, false}, exit{false, false, true};
  ASSERT_TRUE(a.afterPass(exit, 1));  // a leaves for the exit SQE; b still runs
  a.leave(&ended);
  EXPECT_EQ(ended, 0u);
  ASSERT_TRUE(b.afterPass(idle, 20));  // b's vote seals
  b.leave(&ended);
  EXPECT_EQ(ended, 9u);
}

// Blocks finish the pass they are in before they see the seal: the host must hear of the end
// from the last block out, or it reads block state a late block is still writing. Here the block
// that started late seals the launch with its vote and is the first out.
TEST(BlockQuit, OnlyTheLastBlockOutOfASealedLaunchTellsTheHost) {
  uint64_t word = 0;
  uint32_t ended = 0;
  const QuitLimits limits{10, 10};
  BlockQuit a(&word, 4, 3, limits, 0), b(&word, 4, 3, limits, 0), late(&word, 4, 3, limits, 0);
  ASSERT_TRUE(a.join());
  ASSERT_TRUE(b.join());
  const PassResult idle{false, false, false};
  EXPECT_FALSE(a.afterPass(idle, 20));  // votes: 1 of 2 joined, of a grid of 3
  EXPECT_FALSE(b.afterPass(idle, 20));  // 2 of 2 joined: not sealed, `late` has not started
  ASSERT_TRUE(late.join());
  EXPECT_TRUE(late.afterPass(idle, 20));  // 3 of 3: sealed
  late.leave(&ended);
  EXPECT_EQ(ended, 0u) << "a and b are still in their passes";
  EXPECT_TRUE(a.afterPass(idle, 30));  // a sees the seal
  a.leave(&ended);
  EXPECT_EQ(ended, 0u);
  EXPECT_TRUE(b.afterPass(idle, 30));
  b.leave(&ended);
  EXPECT_EQ(ended, 4u);
}

TEST(BlockQuit, ProgressWithdrawsAndExitVotesForGood) {
  uint64_t word = 0;
  const QuitLimits limits{10, 10};
  BlockQuit a(&word, 5, 2, limits, 0), b(&word, 5, 2, limits, 0);
  ASSERT_TRUE(a.join());
  ASSERT_TRUE(b.join());
  const PassResult idle{false, false, false}, progress{true, false, false}, exit{false, false, true};
  EXPECT_FALSE(a.afterPass(idle, 20));      // a votes
  EXPECT_FALSE(a.afterPass(progress, 25));  // and takes it back
  EXPECT_TRUE(b.afterPass(exit, 30));       // b leaves for good, its vote stays
  EXPECT_FALSE(a.afterPass(idle, 30));      // 5 since progress
  EXPECT_TRUE(a.afterPass(idle, 40));       // a's vote completes the quorum
}

// Blocks voting, withdrawing and voting again at once: the word ends sealed with every block's
// vote in it (a sealed word's votes never change, so it was sealed by the full quorum).
TEST(QuitVote, ConcurrentVotersSealWithTheFullQuorum) {
  constexpr int kBlocks = 16;
  for (uint32_t epoch = 1; epoch <= 50; ++epoch) {
    uint64_t word = 0;
    std::atomic<int> joined{0};
    std::vector<std::thread> threads;
    for (int b = 0; b < kBlocks; ++b) {
      threads.emplace_back([&] {
        if (!joinLaunch(&word, epoch)) return;
        joined.fetch_add(1);
        while (joined.load() < kBlocks) std::this_thread::yield();
        if (castQuitVote(&word, epoch, kBlocks)) return;
        if (!withdrawQuitVote(&word, epoch)) return;
        castQuitVote(&word, epoch, kBlocks);
      });
    }
    for (auto& t : threads) t.join();
    const quitword::Fields f = quitword::decode(atomics::loadAcquire(&word), epoch);
    EXPECT_TRUE(f.sealed);
    EXPECT_EQ(f.joined, static_cast<uint32_t>(kBlocks));
    EXPECT_EQ(f.votes, static_cast<uint32_t>(kBlocks));
  }
}

}  // namespace
}  // namespace occl
