// Stress and edge tests of the lock-free queues shared by the host and the daemon: the SQ (one
// producer, every consumer reads every entry and reports how far it read) and the CQ (one ring
// per producer, one poller over all rings). Both use loads and stores only. Every wait backs off (yield, then a short park), so five threads pass on two cores
// shared with other jobs; the bounded waits turn a protocol bug into a failure, not a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "backend/doorbell.hpp"
#include "queues/cq.hpp"
#include "queues/sq.hpp"

namespace occl {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kBudget = std::chrono::seconds(20);

// A waiter that only yields keeps its thread runnable; with five threads on two shared cores the
// thread it waits for may then get no time at all, and a timed sleep wakes too late or too
// often. So a waiter yields a few times, then parks on a doorbell that the other side rings
// when it makes room or publishes (as the host daemon and poller do); parks are short, so a
// missed ring costs microseconds, never a hang.
class Backoff {
 public:
  template <typename Ready>
  void pause(backend::Doorbell& bell, Ready&& ready) {
    if (++misses_ < kYields) {
      std::this_thread::yield();
    } else {
      bell.park(500, ready);
    }
  }
  void reset() { misses_ = 0; }

 private:
  static constexpr int kYields = 16;
  int misses_ = 0;
};

// The payload of SQ ticket t, so a consumer can tell a torn or overwritten slot from a good one.
// Each field within what an entry carries (SqeView's comment).
SqeView sqePayload(uint64_t t) {
  return SqeView{kSqeSubmit,          static_cast<uint16_t>((t * 40503u) & 0xffu),
                 static_cast<uint32_t>((t * 2654435761u) & 0xfffffu), t,
                 t * 3 + 1,           ~t,
                 (t * 0x9e3779b97f4a7c15ull) & sqe::kMaxCount};
}

// kSqeReport is the producer's to set (SubmissionQueue::tryPush), so it is not compared.
bool samePayload(const SqeView& a, const SqeView& b) {
  return (a.flags & ~kSqeReport) == (b.flags & ~kSqeReport) && a.nParts == b.nParts && a.collIndex == b.collIndex &&
         a.seq == b.seq && a.sendbuf == b.sendbuf && a.recvbuf == b.recvbuf && a.count == b.count;
}

// Every field at its widest goes through the eight pieces and back, each piece's bits its own.
TEST(SqeTest, EveryFieldRoundTripsAtItsWidest) {
  const SqeView widest{0xff, 0xff, (1u << sqe::kIndexBits) - 1, (uint64_t{1} << sqe::kSeqBits) - 1, ~uint64_t{0},
                       ~uint64_t{0} - 1, sqe::kMaxCount};
  for (const SqeView& e : {widest, SqeView{0, 0, 0, 0, 0, 0, sqe::kMaxCount}, SqeView{0xff, 0xff, 0, 0, 0, 0, 0},
                           SqeView{0, 0, (1u << sqe::kIndexBits) - 1, 0, 0, 0, 1},
                           SqeView{0, 0, 0, uint64_t{1} << 47, 0, 0, uint64_t{1} << 43}}) {
    uint64_t words[sqe::kWords];
    sqe::words(e, 5, words);
    for (uint64_t w : words) ASSERT_EQ(w >> 32, sqe::tagOf(5));
    SqeView out{};
    ASSERT_TRUE(sqe::join(words, 5, out));
    EXPECT_TRUE(e.flags == out.flags && e.nParts == out.nParts && e.collIndex == out.collIndex && e.seq == out.seq &&
                e.sendbuf == out.sendbuf && e.recvbuf == out.recvbuf && e.count == out.count)
        << "count " << e.count << " -> " << out.count << ", seq " << e.seq << " -> " << out.seq << ", index "
        << e.collIndex << " -> " << out.collIndex;
  }
}

struct SqRig {
  std::vector<Sqe> slots;
  std::vector<BlockReport> reports;
  uint64_t published = 0;
  SubmissionQueue sq;
  backend::Doorbell publishedBell;  // rung by the producer
  backend::Doorbell freedBell;      // rung by a consumer that read past an entry
  SqRig(uint32_t depth, uint32_t consumers) : slots(depth), reports(consumers) {
    for (Sqe& s : slots) s = Sqe{};
    for (BlockReport& r : reports) r = BlockReport{};
    sq = SubmissionQueue{slots.data(), reports.data(), &published, depth, consumers};
  }
};

struct ConsumerReport {
  uint64_t received = 0;
  std::string error;  // first anomaly, empty if none
};

// One daemon block's view: its own cursor, every ticket in order, each exactly once. It reports
// its cursor only where the producer asks (kSqeReport), as a daemon block with room in its task
// queue does: the producer must never be left waiting for a report that does not come.
void consumeAll(SqRig& rig, uint32_t consumer, uint64_t total, Clock::time_point deadline, ConsumerReport& report) {
  const SubmissionQueue& sq = rig.sq;
  uint64_t cursor = 0;
  SqeView got{};
  Backoff backoff;
  while (cursor < total && Clock::now() < deadline) {
    if (!sq.tryPop(cursor, got)) {
      backoff.pause(rig.publishedBell, [&] { return sq.publishedCount() > cursor; });
      continue;
    }
    backoff.reset();
    // A copy the producer overwrote while it was taken would mix two tickets' payloads.
    if (!samePayload(got, sqePayload(cursor)) && report.error.empty())
      report.error = "ticket " + std::to_string(cursor) + " read seq " + std::to_string(got.seq);
    ++cursor;
    if (got.flags & kSqeReport) {
      sq.advance(consumer, cursor);
      rig.freedBell.ring();  // the producer may be waiting for this consumer to move on
    }
  }
  report.received = cursor;
}

TEST(SubmissionQueueTest, EveryConsumerSeesEveryEntryOnceInOrder) {
  // 250,000 entries reuse each of the 64 slots about 3,900 times. A million took 20 s, the whole
  // budget, on the 2-core VM with a CUDA build and ctest -j2 beside it.
  constexpr uint32_t kDepth = 64, kConsumers = 4;
  constexpr uint64_t kEntries = 250'000;
  SqRig rig(kDepth, kConsumers);
  const auto deadline = Clock::now() + kBudget;
  std::vector<ConsumerReport> reports(kConsumers);
  std::vector<std::thread> consumers;
  for (uint32_t c = 0; c < kConsumers; ++c)
    consumers.emplace_back([&, c] { consumeAll(rig, c, kEntries, deadline, reports[c]); });

  uint64_t ticket = 0, limit = 0, refusals = 0;
  Backoff backoff;
  while (ticket < kEntries && Clock::now() < deadline) {
    if (rig.sq.tryPush(ticket, sqePayload(ticket), limit)) {
      ++ticket;
      backoff.reset();
      rig.publishedBell.ring();
    } else {
      ++refusals;
      backoff.pause(rig.freedBell, [&] { return rig.sq.writableLimit() > ticket; });
    }
  }
  for (auto& t : consumers) t.join();  // each stops at kEntries or at the deadline

  ASSERT_EQ(ticket, kEntries) << "the producer could not publish everything within the budget";
  EXPECT_EQ(rig.sq.publishedCount(), kEntries);
  EXPECT_GT(refusals, 0u) << "the ring of 64 never filled: the test did not exercise slot reuse";
  for (uint32_t c = 0; c < kConsumers; ++c) {
    EXPECT_EQ(reports[c].received, kEntries) << "consumer " << c;
    EXPECT_TRUE(reports[c].error.empty()) << "consumer " << c << ": " << reports[c].error;
  }
}

TEST(SubmissionQueueTest, FullRingRefusesUntilTheSlowestConsumerReads) {
  SqRig rig(4, 2);
  uint64_t limit = 0;
  for (uint64_t t = 0; t < 4; ++t) ASSERT_TRUE(rig.sq.tryPush(t, sqePayload(t), limit));
  EXPECT_FALSE(rig.sq.tryPush(4, sqePayload(4), limit)) << "ring of 4 accepted a 5th entry";
  SqeView got{};
  ASSERT_TRUE(rig.sq.tryPop(0, got));  // consumer A copies ticket 0...
  EXPECT_FALSE(rig.sq.tryPush(4, sqePayload(4), limit)) << "slot reused before its reader reported";
  rig.sq.advance(0, 1);  // ...and reports it
  EXPECT_FALSE(rig.sq.tryPush(4, sqePayload(4), limit)) << "slot reused after one of two consumers read it";
  ASSERT_TRUE(rig.sq.tryPop(0, got));  // consumer B
  rig.sq.advance(1, 1);
  EXPECT_TRUE(rig.sq.tryPush(4, sqePayload(4), limit));
  EXPECT_FALSE(rig.sq.tryPop(5, got)) << "an unpublished ticket was readable";
  EXPECT_FALSE(rig.sq.tryPop(0, got)) << "ticket 0's slot now holds ticket 4: a stale cursor must not read it";
  ASSERT_TRUE(rig.sq.tryPop(4, got));
  EXPECT_TRUE(samePayload(got, sqePayload(4)));
}

// A group's entries go in all at once or not at all, and carry the report flags that single
// pushes of the same tickets would: the one before the limit and the one half-way to it.
TEST(SubmissionQueueTest, APushOfSeveralIsAllOrNoneWithTheSinglePushesFlags) {
  constexpr uint32_t kDepth = 8;
  SqRig rig(kDepth, 1);
  std::vector<SqeView> entries;
  for (uint64_t t = 0; t < kDepth + 2; ++t) entries.push_back(sqePayload(t));
  uint64_t limit = 0;
  ASSERT_TRUE(rig.sq.tryPushAll(0, entries.data(), 3, limit));
  EXPECT_FALSE(rig.sq.tryPushAll(3, entries.data() + 3, 6, limit)) << "6 entries fit where 5 slots are free";
  SqeView got{};
  EXPECT_FALSE(rig.sq.tryPop(3, got)) << "a refused push wrote its first entry";
  EXPECT_EQ(rig.sq.publishedCount(), 3u);
  ASSERT_TRUE(rig.sq.tryPushAll(3, entries.data() + 3, 5, limit));
  EXPECT_EQ(rig.sq.publishedCount(), uint64_t{kDepth});
  SqRig single(kDepth, 1);
  uint64_t singleLimit = 0;
  for (uint64_t t = 0; t < kDepth; ++t) {
    ASSERT_TRUE(single.sq.tryPush(t, entries[t], singleLimit));
    SqeView alone{};
    ASSERT_TRUE(rig.sq.tryPop(t, got));
    ASSERT_TRUE(single.sq.tryPop(t, alone));
    EXPECT_TRUE(samePayload(got, entries[t])) << "ticket " << t;
    EXPECT_EQ(got.flags & kSqeReport, alone.flags & kSqeReport) << "ticket " << t;
  }
  EXPECT_NE(got.flags & kSqeReport, 0) << "the entry before the limit asks for a report";
  rig.sq.advance(0, 2);
  EXPECT_FALSE(rig.sq.tryPushAll(kDepth, entries.data() + kDepth, 3, limit)) << "3 entries fit 2 free slots";
  EXPECT_TRUE(rig.sq.tryPushAll(kDepth, entries.data() + kDepth, 2, limit));
  ASSERT_TRUE(rig.sq.tryPop(kDepth + 1, got));
  EXPECT_TRUE(samePayload(got, entries[kDepth + 1]));
}

// A consumer reads a slot while the producer may be writing it: every word carries the ticket's
// tag, so a read that finds any word still old (or a word of a later ticket) takes nothing.
TEST(SubmissionQueueTest, ASlotReadHalfWrittenIsNotTaken) {
  SqRig rig(4, 1);
  uint64_t limit = 0;
  ASSERT_TRUE(rig.sq.tryPush(0, sqePayload(0), limit));
  Sqe& slot = rig.slots[0];
  SqeView got{};
  for (int w = 0; w < sqe::kWords; ++w) {
    const uint64_t written = slot.words[w];
    slot.words[w] = 0;  // as before the producer reached this word
    EXPECT_FALSE(rig.sq.tryPop(0, got)) << "taken with word " << w << " unwritten";
    slot.words[w] = (sqe::tagOf(4) << 32) | (written & 0xffffffffu);  // ticket 4's tag: written later
    EXPECT_FALSE(rig.sq.tryPop(0, got)) << "taken with word " << w << " of another ticket";
    slot.words[w] = written;
  }
  ASSERT_TRUE(rig.sq.tryPop(0, got));
  EXPECT_TRUE(samePayload(got, sqePayload(0)));
}

// A consumer that copies each entry as it comes is asked for its cursor about once per half ring,
// not for every entry: one bus write per depth/2 submissions on a GPU.
TEST(SubmissionQueueTest, AConsumerThatKeepsUpIsAskedOncePerHalfRing) {
  constexpr uint32_t kDepth = 64;
  constexpr uint64_t kEntries = 10'000;
  SqRig rig(kDepth, 1);
  uint64_t limit = 0, asked = 0;
  SqeView got{};
  for (uint64_t t = 0; t < kEntries; ++t) {
    ASSERT_TRUE(rig.sq.tryPush(t, sqePayload(t), limit)) << "ticket " << t << ": the ring filled behind a consumer that kept up";
    ASSERT_TRUE(rig.sq.tryPop(t, got));
    ASSERT_TRUE(samePayload(got, sqePayload(t)));
    if (got.flags & kSqeReport) {
      rig.sq.advance(0, t + 1);
      ++asked;
    }
  }
  EXPECT_GE(asked, kEntries / (kDepth / 2 + 1));
  EXPECT_LE(asked, kEntries / (kDepth / 2) + 1);
}

// A consumer that lags behind the producer reports each time an entry it copies asks, and the
// producer's limit then moves by less than half a ring: asked more often than once per half ring,
// but never at every entry (at most once per depth / 4 entries, whatever the lag).
TEST(SubmissionQueueTest, AConsumerThatLagsIsStillNotAskedAtEveryEntry) {
  constexpr uint32_t kDepth = 64;
  constexpr uint64_t kEntries = 10'000;
  for (uint64_t lag : {1u, 16u, 31u, 32u, 33u, 48u, 63u}) {
    SCOPED_TRACE("lag " + std::to_string(lag));
    SqRig rig(kDepth, 1);
    uint64_t limit = 0, asked = 0, cursor = 0;
    SqeView got{};
    auto copyOne = [&] {
      ASSERT_TRUE(rig.sq.tryPop(cursor, got));
      ASSERT_TRUE(samePayload(got, sqePayload(cursor)));
      ++cursor;
      if (got.flags & kSqeReport) {
        rig.sq.advance(0, cursor);
        ++asked;
      }
    };
    for (uint64_t t = 0; t < kEntries; ++t) {
      while (!rig.sq.tryPush(t, sqePayload(t), limit)) ASSERT_NO_FATAL_FAILURE(copyOne());
      while (cursor + lag < t) ASSERT_NO_FATAL_FAILURE(copyOne());
    }
    EXPECT_LE(asked, kEntries / (kDepth / 4));
    EXPECT_GE(asked, kEntries / kDepth);
  }
}

// A consumer that stops copying (its task queue full) leaves the producer stuck at the limit; the
// entry just before that limit asked for a report, so once the consumer copies on, the producer
// gets in again.
TEST(SubmissionQueueTest, TheEntryBeforeTheLimitAsksForAReport) {
  constexpr uint32_t kDepth = 8;
  SqRig rig(kDepth, 1);
  uint64_t limit = 0;
  for (uint64_t t = 0; t < kDepth; ++t) ASSERT_TRUE(rig.sq.tryPush(t, sqePayload(t), limit));
  EXPECT_FALSE(rig.sq.tryPush(kDepth, sqePayload(kDepth), limit));
  SqeView got{};
  uint64_t cursor = 0;
  while (rig.sq.tryPop(cursor, got)) {
    ++cursor;
    if (got.flags & kSqeReport) rig.sq.advance(0, cursor);
  }
  EXPECT_EQ(cursor, kDepth);
  EXPECT_TRUE(got.flags & kSqeReport) << "the last entry before the limit did not ask for a report";
  EXPECT_TRUE(rig.sq.tryPush(kDepth, sqePayload(kDepth), limit));
}

// Exact-once bookkeeping of one collective's completions, in any arrival order: `base` is the
// first sequence number not seen yet; `seen` is a window of flags from there.
struct SeqTracker {
  static constexpr uint64_t kWindow = 4096;
  uint64_t base = 0;
  std::vector<uint8_t> seen = std::vector<uint8_t>(kWindow, 0);

  // Rebuilds the full sequence number from its low bits, like the poller does.
  std::string take(uint32_t seqLow) {
    uint64_t delta = (seqLow - base) & cqe::kSeqMask;
    if (delta >= kWindow) return "seq low bits " + std::to_string(seqLow) + " outside the window at " + std::to_string(base);
    uint8_t& flag = seen[(base + delta) % kWindow];
    if (flag != 0) return "seq " + std::to_string(base + delta) + " arrived twice";
    flag = 1;
    while (seen[base % kWindow] != 0) seen[base++ % kWindow] = 0;
    return {};
  }
};

constexpr uint32_t kProducers = 4;
constexpr uint32_t kIndicesPerProducer = 3;
// Starts near 2^31 so the 31 sequence bits wrap in the middle of the stress run.
constexpr uint64_t kFirstSeq = (1ull << 31) - 50'000;

uint32_t statusOf(uint32_t index, uint64_t seq) { return static_cast<uint32_t>((index * 31 + seq * 7) & 0xffu); }
uint32_t indexOf(uint32_t producer, uint32_t k) { return cqe::kMaxCollIndex - (producer * kIndicesPerProducer + k); }

struct CqRig {
  std::vector<uint64_t> slots;
  std::vector<uint64_t> heads;
  std::vector<BlockReport> reports;
  CompletionQueue cq;
  backend::Doorbell pushedBell;  // rung by producers
  backend::Doorbell takenBell;   // rung by the poller
  std::atomic<bool> stop{false};
  CqRig(uint32_t depth, uint32_t rings)
      : slots(static_cast<size_t>(depth) * rings, 0), heads(static_cast<size_t>(rings) * CompletionQueue::kHeadStride, 0),
        reports(rings), cq{slots.data(), heads.data(), reports.data(), depth, rings} {
    for (BlockReport& r : reports) r = BlockReport{};
  }

  bool any(bool empty) {
    for (uint64_t& w : slots)
      if ((atomics::loadAcquire(&w) == 0) == empty) return true;
    return false;
  }
};

// One block's leader: its ring only, its CQEs in order.
void produceCqes(CqRig& rig, uint32_t producer, uint64_t perProducer) {
  const CompletionQueue& cq = rig.cq;
  uint64_t limit = 0;  // the producer's credit (BlockState::cqLimit)
  for (uint64_t n = 0; n < perProducer && !rig.stop.load(std::memory_order_relaxed); ++n) {
    uint32_t index = indexOf(producer, static_cast<uint32_t>(n % kIndicesPerProducer));
    uint64_t seq = kFirstSeq + n / kIndicesPerProducer;
    uint64_t word = cqe::pack(index, statusOf(index, seq), seq);
    Backoff backoff;
    while (!cq.tryPush(producer, n, word, limit)) {
      if (rig.stop.load(std::memory_order_relaxed)) return;
      backoff.pause(rig.takenBell, [&] { return atomics::loadAcquire(cq.head(producer)) + cq.depth > n; });
    }
    rig.pushedBell.ring();
  }
}

TEST(CompletionQueueTest, ManyProducersOnePollerExactlyOnce) {
  constexpr uint32_t kDepth = 256;
  constexpr uint64_t kPerProducer = 300'000;  // 1.2e6 CQEs in all
  CqRig rig(kDepth, kProducers);
  const CompletionQueue& cq = rig.cq;
  std::vector<std::thread> producers;
  for (uint32_t p = 0; p < kProducers; ++p) producers.emplace_back([&, p] { produceCqes(rig, p, kPerProducer); });

  std::vector<SeqTracker> trackers(kProducers * kIndicesPerProducer);
  for (auto& t : trackers) t.base = kFirstSeq;
  const uint64_t total = kPerProducer * kProducers;
  uint64_t taken = 0, badStatus = 0;
  std::string firstError;
  std::vector<uint64_t> heads(kProducers, 0);
  uint32_t ring = 0;
  const auto deadline = Clock::now() + kBudget;
  Backoff backoff;
  while (taken < total && Clock::now() < deadline) {
    uint64_t word = 0;
    bool got = false;
    for (uint32_t i = 0; i < kProducers && !got; ++i, ring = (ring + 1) % kProducers) {
      if (!cq.tryTake(ring, heads[ring], word)) continue;
      heads[ring] += 1;
      got = true;
    }
    if (!got) {
      backoff.pause(rig.pushedBell, [&] { return rig.any(/*empty=*/false); });
      continue;
    }
    backoff.reset();
    rig.takenBell.ring();
    ++taken;
    const Cqe c = cqe::unpack(word);
    uint32_t slot = cqe::kMaxCollIndex - c.collIndex;
    if (slot >= trackers.size()) {
      if (firstError.empty()) firstError = "unknown collIndex " + std::to_string(c.collIndex);
      continue;
    }
    uint64_t before = trackers[slot].base;
    std::string err = trackers[slot].take(c.seqLow);
    if (!err.empty() && firstError.empty()) firstError = err;
    uint64_t seq = before + ((c.seqLow - before) & cqe::kSeqMask);
    if (c.status != statusOf(c.collIndex, seq)) ++badStatus;
  }
  rig.stop.store(true);
  for (auto& t : producers) t.join();

  ASSERT_EQ(taken, total) << "CQEs lost or the run exceeded its budget";
  EXPECT_TRUE(firstError.empty()) << firstError;
  EXPECT_EQ(badStatus, 0u);
  const uint64_t perIndex = kPerProducer / kIndicesPerProducer;
  for (auto& t : trackers) EXPECT_EQ(t.base, kFirstSeq + perIndex);
  for (uint64_t w : rig.slots) EXPECT_EQ(w, 0u) << "a CQE was left behind";
  for (uint32_t r = 0; r < kProducers; ++r) EXPECT_EQ(*cq.head(r), kPerProducer) << "ring " << r << "'s published head";
  EXPECT_FALSE(cq.anyWaiting());
}

TEST(CompletionQueueTest, FullRingRefusesWithoutLosingAndLeavesOtherRingsAlone) {
  CqRig rig(4, 2);
  const CompletionQueue& cq = rig.cq;
  uint64_t limit0 = 0, limit1 = 0;  // each ring's producer keeps its own credit
  EXPECT_FALSE(cq.anyWaiting());
  for (uint64_t s = 0; s < 4; ++s) ASSERT_TRUE(cq.tryPush(1, s, cqe::pack(1, 0, s), limit1));
  EXPECT_FALSE(cq.tryPush(1, 4, cqe::pack(1, 0, 4), limit1)) << "a ring of 4 accepted a 5th CQE";
  EXPECT_TRUE(cq.tryPush(0, 0, cqe::pack(2, 0, 0), limit0)) << "block 1's full ring blocked block 0";
  EXPECT_TRUE(cq.anyWaiting());
  uint64_t word = 0;
  ASSERT_TRUE(cq.tryTake(1, 0, word));
  EXPECT_EQ(cqe::unpack(word).seqLow, 0u);
  EXPECT_EQ(*cq.head(1), 1u) << "the poller publishes its head as it takes";
  EXPECT_FALSE(cq.tryTake(1, 0, word)) << "a slot was taken twice";
  EXPECT_FALSE(cq.tryTake(1, 4, word)) << "the 5th CQE was taken before it was written";
  ASSERT_TRUE(cq.tryPush(1, 4, cqe::pack(1, 0, 4), limit1)) << "the taken slot gave no credit";
  EXPECT_FALSE(cq.tryPush(1, 5, cqe::pack(1, 0, 5), limit1)) << "credit beyond the poller's head";
  for (uint64_t h = 1; h <= 4; ++h) {
    ASSERT_TRUE(cq.tryTake(1, h, word)) << "CQE " << h;
    EXPECT_EQ(cqe::unpack(word).seqLow, h) << "a ring gives its CQEs back in the order they were written";
  }
  ASSERT_TRUE(cq.tryTake(0, 0, word));
  EXPECT_FALSE(cq.anyWaiting());
}

TEST(CqePackingTest, EdgeValuesRoundTrip) {
  struct Case {
    uint32_t index, status;
    uint64_t seq;
    uint32_t seqLow;
  };
  const Case cases[] = {
      {0, 0, 0, 0},
      {cqe::kMaxCollIndex, 255, cqe::kSeqMask, static_cast<uint32_t>(cqe::kSeqMask)},
      {cqe::kMaxCollIndex, 0, 1ull << 31, 0},        // wraps to 0
      {1, 255, (1ull << 31) + 7, 7},                  // past the wrap
      {12345, 9, (1ull << 40) + 3, 3},                // far past: only the low bits travel
  };
  for (const Case& c : cases) {
    uint64_t word = cqe::pack(c.index, c.status, c.seq);
    EXPECT_NE(word, 0u) << "a packed CQE must never look like an empty slot";
    const Cqe got = cqe::unpack(word);
    EXPECT_EQ(got.collIndex, c.index);
    EXPECT_EQ(got.status, c.status);
    EXPECT_EQ(got.seqLow, c.seqLow) << "seq " << c.seq;
  }
}

TEST(CqePackingTest, FieldsDoNotBleedIntoEachOther) {
  const Cqe a = cqe::unpack(cqe::pack(cqe::kMaxCollIndex, 0, 0));
  EXPECT_EQ(a.status, 0u);
  EXPECT_EQ(a.seqLow, 0u);
  const Cqe b = cqe::unpack(cqe::pack(0, 255, 0));
  EXPECT_EQ(b.collIndex, 0u);
  EXPECT_EQ(b.seqLow, 0u);
  const Cqe c = cqe::unpack(cqe::pack(0, 0, cqe::kSeqMask));
  EXPECT_EQ(c.collIndex, 0u);
  EXPECT_EQ(c.status, 0u);
}

}  // namespace
}  // namespace occl
