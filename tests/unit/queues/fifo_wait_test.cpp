// Sleeping on a FIFO word and being woken by the peer's publish (queues/fifo_wait.hpp): a parked
// receiver wakes when the sender publishes or poisons, a parked sender when the receiver frees a
// slot, a sleep that the word already outran returns at once, and the NET proxy's bell (an
// eventfd named in the header) rings only while the proxy announced it sleeps; a receiver can
// sleep until a second slot is pending, and a sender that poisons the connector waits for the
// peers using its buffers (peer access). Every sleep in these tests is 20 s long, so a lost
// wake-up fails the test instead of passing slowly.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "occl/occl.h"
#include "queues/fifo.hpp"
#include "queues/fifo_wait.hpp"
#include "queues/wake_fence.hpp"

namespace occl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kLongSleepNs = 20'000'000'000;  // far beyond what any wake-up takes
constexpr auto kWoken = std::chrono::seconds(10);   // a wake-up, not the sleep's timeout
constexpr uint32_t kSlots = 2;
constexpr uint64_t kSlotBytes = 64;

class FifoWaitTest : public ::testing::Test {
 protected:
  FifoWaitTest() : memory_(fifoBytes(kSlots, kSlotBytes) / 8 + 1, 0) {
    fifo_ = FifoHandle{reinterpret_cast<FifoHeader*>(memory_.data()),
                       reinterpret_cast<char*>(memory_.data()) + kFifoDataOffset, kSlots, 0, kSlotBytes};
  }

  // Runs `publish` on another thread once `parked` (the wake word) shows a sleeper, so the
  // publish lands while the caller sleeps; returns how long the caller's sleep lasted.
  template <typename Sleep, typename Publish>
  Clock::duration sleepUntilPublished(uint32_t* wake, Sleep&& sleep, Publish&& publish) {
    std::thread peer([&] {
      while (atomics::loadAcquire(wake) < kFifoWakeParked) std::this_thread::yield();
      publish();
    });
    const auto start = Clock::now();
    sleep();
    const auto slept = Clock::now() - start;
    peer.join();
    return slept;
  }

  std::vector<uint64_t> memory_;
  FifoHandle fifo_{};
};

TEST_F(FifoWaitTest, AParkedReceiverWakesWhenTheSenderPublishes) {
  const uint64_t parksBefore = fifoParksOnThisThread();
  auto slept = sleepUntilPublished(
      &fifo_.header->tailWake, [&] { parkUntilRecv(fifo_, kLongSleepNs); }, [&] { fifo_.commitSend(8); });
  EXPECT_LT(slept, kWoken);
  EXPECT_TRUE(fifo_.canRecv());
  EXPECT_EQ(fifoParksOnThisThread(), parksBefore + 1);
  EXPECT_EQ(atomics::loadAcquire(&fifo_.header->tailWake), 0u) << "the sleeper left its mark";
}

TEST_F(FifoWaitTest, AParkedSenderWakesWhenTheReceiverFreesASlot) {
  for (uint32_t i = 0; i < kSlots; ++i) fifo_.commitSend(kSlotBytes);
  ASSERT_FALSE(fifo_.canSend());
  auto slept = sleepUntilPublished(
      &fifo_.header->headWake, [&] { parkUntilSend(fifo_, kLongSleepNs); }, [&] { fifo_.commitRecv(); });
  EXPECT_LT(slept, kWoken);
  EXPECT_TRUE(fifo_.canSend());
}

TEST_F(FifoWaitTest, APoisonedConnectorWakesAParkedReceiver) {
  auto slept = sleepUntilPublished(
      &fifo_.header->tailWake, [&] { parkUntilRecv(fifo_, kLongSleepNs); }, [&] { fifo_.poisonWith(occlRemoteError, 0); });
  EXPECT_LT(slept, kWoken);
  EXPECT_EQ(fifo_.poisonStatus(), static_cast<uint32_t>(occlRemoteError));
}

TEST_F(FifoWaitTest, APoisonedConnectorWakesAParkedSender) {
  for (uint32_t i = 0; i < kSlots; ++i) fifo_.commitSend(kSlotBytes);
  auto slept = sleepUntilPublished(
      &fifo_.header->headWake, [&] { parkUntilSend(fifo_, kLongSleepNs); }, [&] { fifo_.poisonWith(occlInvalidUsage, 0); });
  EXPECT_LT(slept, kWoken);
  EXPECT_FALSE(fifo_.canSend());
}

// The host's poison by the header alone (an abort, a failed registration, the NET proxy) wakes
// sleepers on either word too, and keeps the first status.
TEST_F(FifoWaitTest, AHeaderPoisonWakesAParkedReceiverAndAParkedSender) {
  auto slept = sleepUntilPublished(
      &fifo_.header->tailWake, [&] { parkUntilRecv(fifo_, kLongSleepNs); },
      [&] { EXPECT_TRUE(poisonHeader(fifo_.header, occlRemoteError, 0)); });
  EXPECT_LT(slept, kWoken);
  fifo_.header->poison = 0;
  for (uint32_t i = 0; i < kSlots; ++i) fifo_.commitSend(kSlotBytes);
  slept = sleepUntilPublished(
      &fifo_.header->headWake, [&] { parkUntilSend(fifo_, kLongSleepNs); },
      [&] { EXPECT_TRUE(poisonHeader(fifo_.header, occlAborted, 0)); });
  EXPECT_LT(slept, kWoken);
  EXPECT_FALSE(poisonHeader(fifo_.header, occlTimeout, 0)) << "a second poison";
  EXPECT_EQ(fifo_.poisonStatus(), static_cast<uint32_t>(occlAborted));
}

TEST_F(FifoWaitTest, NoSleepWhenTheWordAlreadyMovedOrTheWaitIsSatisfied) {
  const uint64_t parksBefore = fifoParksOnThisThread();
  fifo_.commitSend(8);
  const auto start = Clock::now();
  parkUntilRecv(fifo_, kLongSleepNs);  // a slot is there: no sleep at all
  EXPECT_EQ(fifoParksOnThisThread(), parksBefore);
  // A sleeper that read the word before a publish it missed returns at once.
  fifoPark(fifo_.header, FifoWord::Tail, /*seen=*/0, kLongSleepNs);
  EXPECT_LT(Clock::now() - start, kWoken);
  EXPECT_EQ(fifoParksOnThisThread(), parksBefore + 1);
}

TEST_F(FifoWaitTest, ASleepEndsAtItsBound) {
  const auto start = Clock::now();
  parkUntilRecv(fifo_, 2'000'000);  // 2 ms, nobody publishes
  EXPECT_LT(Clock::now() - start, kWoken);
  EXPECT_FALSE(fifo_.canRecv());
}

// The NET proxy's bell: a publish writes the eventfd only while kFifoWakeBell is set.
TEST_F(FifoWaitTest, TheProxyBellRingsOnlyWhileAnnounced) {
  const int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  fifo_.header->bellFd = fd;
  uint64_t count = 0;
  fifo_.commitSend(8);
  EXPECT_EQ(read(fd, &count, sizeof count), -1) << "rang with nobody asleep";

  fifo_.header->tailWake = kFifoWakeBell;
  fifo_.commitSend(8);
  ASSERT_EQ(read(fd, &count, sizeof count), static_cast<ssize_t>(sizeof count)) << "a tail publish did not ring";
  EXPECT_EQ(count, 1u);

  fifo_.header->tailWake = 0;
  fifo_.header->headWake = kFifoWakeBell;
  fifo_.commitRecv();
  ASSERT_EQ(read(fd, &count, sizeof count), static_cast<ssize_t>(sizeof count)) << "a head publish did not ring";
  close(fd);
}

// A peer program waits for its second notice while the first stays unconsumed: the receiver
// sleeps until `need` slots are pending, not just one.
TEST_F(FifoWaitTest, AReceiverWaitingForASecondSlotSleepsUntilItIsPublished) {
  fifo_.commitSend(16);
  const auto start = Clock::now();
  parkUntilRecv(fifo_, 2'000'000, /*need=*/2);  // one pending: it sleeps to its bound
  EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(1));
  EXPECT_EQ(fifo_.pending(), 1u);
  auto slept = sleepUntilPublished(
      &fifo_.header->tailWake, [&] { parkUntilRecv(fifo_, kLongSleepNs, 2); }, [&] { fifo_.commitSend(16); });
  EXPECT_LT(slept, kWoken);
  EXPECT_EQ(fifo_.pending(), 2u);
}

// The access guard (fifo.hpp): a receiver using the sender's buffers is waited for by a sender
// that poisons the connector, and a receiver that comes after the poison touches nothing.
TEST_F(FifoWaitTest, APoisoningSenderWaitsForThePeersUsingItsBuffersAndLaterOnesStayOut) {
  ASSERT_TRUE(fifo_.beginPeerAccess());
  EXPECT_FALSE(fifo_.peerUsersGone());
  std::atomic<bool> peerDone{false};
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // still at it when the poison lands
    peerDone.store(true, std::memory_order_relaxed);
    fifo_.endPeerAccess();
  });
  fifo_.poisonWith(occlTimeout, 0);
  while (!fifo_.peerUsersGone()) std::this_thread::yield();
  EXPECT_TRUE(peerDone.load(std::memory_order_relaxed)) << "the sender went on while a peer used its buffers";
  peer.join();
  EXPECT_FALSE(fifo_.beginPeerAccess()) << "a peer after the poison";
  EXPECT_TRUE(fifo_.peerUsersGone()) << "a refused peer left its mark";
}

// The wake fences (queues/wake_fence.hpp) as a store-buffering litmus test: a publisher stores
// x and reads y after publisherFence(), a sleeper stores y and reads x after sleeperFence(). Both
// reading 0 is the lost wake-up; x86 shows it within a few thousand rounds when either side
// has no StoreLoad barrier (the publisher's own is a compiler barrier where membarrier works).
TEST(WakeFence, APublisherAndASleeperNeverBothMissTheOtherOne) {
  const WakeFenceMode mode = wakeFenceMode();
  ASSERT_TRUE(mode == WakeFenceMode::Asymmetric || mode == WakeFenceMode::Symmetric);
  EXPECT_EQ(wakeFenceMode(), mode) << "the mode is chosen once";
  RecordProperty("mode", mode == WakeFenceMode::Asymmetric ? "asymmetric" : "symmetric");
  constexpr int kRounds = 50000;
  const auto stopAt = Clock::now() + std::chrono::seconds(5);  // a loaded machine runs fewer rounds
  std::atomic<uint64_t> x{0}, y{0};
  std::atomic<int> round{0}, ready{0};
  std::atomic<bool> stop{false};
  uint64_t publisherSaw = 0;
  std::thread publisher([&] {
    for (int r = 1;; ++r) {
      while (round.load(std::memory_order_acquire) < r && !stop.load(std::memory_order_acquire)) std::this_thread::yield();
      if (stop.load(std::memory_order_acquire)) return;
      x.store(static_cast<uint64_t>(r), std::memory_order_relaxed);
      publisherFence();
      publisherSaw = y.load(std::memory_order_relaxed);
      ready.fetch_add(1, std::memory_order_acq_rel);
    }
  });
  int rounds = 0, bothMissed = 0;
  for (int r = 1; r <= kRounds && Clock::now() < stopAt; ++r) {
    round.store(r, std::memory_order_release);
    y.store(static_cast<uint64_t>(r), std::memory_order_relaxed);
    sleeperFence();
    const uint64_t sleeperSaw = x.load(std::memory_order_relaxed);
    while (ready.load(std::memory_order_acquire) < r) std::this_thread::yield();
    if (publisherSaw < static_cast<uint64_t>(r) && sleeperSaw < static_cast<uint64_t>(r)) ++bothMissed;
    rounds = r;
  }
  stop.store(true, std::memory_order_release);
  publisher.join();
  EXPECT_EQ(bothMissed, 0) << "in " << rounds << " rounds";
  EXPECT_GT(rounds, 100);
}

// A slot's line (queues/fifo.hpp): a message of at most kFifoLineBytes is read from its line, a
// longer one from its slot, and a line left from an earlier round through the slots, or never
// written (a NET receiver, whose proxy fills slots and tail only), sends the receiver to the slot.
using FifoLineTest = FifoWaitTest;

void sendBytes(const FifoHandle& f, uint8_t value, uint64_t bytes) {
  std::memset(f.sendSlot(), value, bytes);
  f.commitSend(bytes);
}

TEST_F(FifoLineTest, ATinyMessageIsReadFromItsLineALongerOneFromItsSlot) {
  EXPECT_FALSE(fifo_.canRecv()) << "nothing sent";
  sendBytes(fifo_, 0x11, kFifoLineBytes);
  ASSERT_TRUE(fifo_.canRecv());
  EXPECT_EQ(fifo_.recvSlot(), fifo_.line(0)->bytes);
  EXPECT_EQ(fifo_.recvSlot()[kFifoLineBytes - 1], 0x11);
  fifo_.commitRecv();
  sendBytes(fifo_, 0x22, kFifoLineBytes + 8);
  ASSERT_TRUE(fifo_.canRecv());
  EXPECT_EQ(fifo_.recvSlot(), fifo_.data + 1 * kSlotBytes);
  EXPECT_EQ(fifo_.recvSlot()[kFifoLineBytes + 7], 0x22);
  fifo_.commitRecv();
  // Slot 0 again, now with a long message: its line still says step 0.
  sendBytes(fifo_, 0x33, kSlotBytes);
  ASSERT_TRUE(fifo_.canRecv());
  EXPECT_EQ(atomics::loadAcquire(&fifo_.line(2)->flag), 1u);
  EXPECT_EQ(fifo_.recvSlot(), fifo_.data);
  EXPECT_EQ(fifo_.recvSlot()[0], 0x33);
  fifo_.commitRecv();
  EXPECT_FALSE(fifo_.canRecv());
}

TEST_F(FifoLineTest, AReceiverWhoseLineNobodyWroteGoesByTail) {
  // What a NET proxy does on the receiving host: the bytes into the slot, then tail.
  std::memset(fifo_.data, 0x44, 8);
  atomics::storeRelease(&fifo_.header->tail, uint64_t{1});
  ASSERT_TRUE(fifo_.canRecv());
  EXPECT_EQ(fifo_.recvSlot(), fifo_.data);
  EXPECT_EQ(fifo_.recvSlot()[7], 0x44);
}

// The sender's credits (FifoHandle): slots it found free, spent by its commits, topped up from
// head only when spent. It never sends into a slot the receiver has not freed.
TEST_F(FifoLineTest, TheSenderSpendsItsCreditsAndLooksAtHeadOnlyWhenTheyAreGone) {
  ASSERT_TRUE(fifo_.canSend());
  EXPECT_EQ(fifo_.credits, kSlots);
  sendBytes(fifo_, 1, 8);
  EXPECT_EQ(fifo_.credits, kSlots - 1);
  ASSERT_TRUE(fifo_.canSend());
  sendBytes(fifo_, 2, 8);
  EXPECT_EQ(fifo_.credits, 0u);
  EXPECT_FALSE(fifo_.canSend()) << "both slots hold messages";
  FifoHandle receiver = fifo_;  // the other end's own handle
  ASSERT_TRUE(receiver.canRecv());
  receiver.commitRecv();
  ASSERT_TRUE(fifo_.canSend()) << "head moved: one slot is free again";
  EXPECT_EQ(fifo_.credits, 1u);
  sendBytes(fifo_, 3, 8);
  EXPECT_FALSE(fifo_.canSend());
  FifoHandle copy = fifo_;
  copy.credits = 0;
  EXPECT_FALSE(copy.canSend()) << "a handle without credits reads head";
}

// A sender and a receiver on two threads pass messages of every length up to a slot, each
// filled with its own step, and the receiver checks every byte (under ThreadSanitizer too: the
// line's flag is what orders its bytes).
TEST_F(FifoLineTest, MessagesOfEveryLengthCrossBetweenThreadsIntact) {
  constexpr uint64_t kMessages = 20000;
  auto length = [](uint64_t step) { return 1 + step % kSlotBytes; };
  std::thread sender([&] {
    for (uint64_t step = 0; step < kMessages; ++step) {
      while (!fifo_.canSend()) std::this_thread::yield();
      sendBytes(fifo_, static_cast<uint8_t>(step), length(step));
    }
  });
  uint64_t wrong = 0;
  for (uint64_t step = 0; step < kMessages; ++step) {
    while (!fifo_.canRecv()) std::this_thread::yield();
    const char* bytes = fifo_.recvSlot();
    for (uint64_t i = 0; i < length(step); ++i) wrong += static_cast<uint8_t>(bytes[i]) != static_cast<uint8_t>(step);
    fifo_.commitRecv();
  }
  sender.join();
  EXPECT_EQ(wrong, 0u);
}

}  // namespace
}  // namespace occl
