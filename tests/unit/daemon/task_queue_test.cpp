// The task queue's order policies (src/daemon/task_queue.hpp): FIFO keeps arrival order,
// priority puts higher priorities first (arrival order among equals), and the agreed order puts
// the same submissions in the same order whatever order they arrived in, which is what lets ranks
// that submit in different orders wait on the same collective at the same time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "daemon/task_queue.hpp"

namespace occl {
namespace {

// A submission as the queue sees it: (submission number of its collective, collId).
struct Sub {
  uint64_t seq;
  uint64_t collId;
  int32_t priority = 0;
  uint32_t part = 0;
};

class Queue {
 public:
  explicit Queue(uint32_t capacity) : tasks_(capacity) {
    state_.tasks = tasks_.data();
    state_.report = &report_;
    state_.capacity = capacity;
  }
  void insert(const Sub& s, uint32_t order) {
    TaskEntry t{};
    t.seq = s.seq;
    t.collId = s.collId;
    t.priority = s.priority;
    t.part = s.part;
    insertTask(state_, t, order);
  }
  void remove(uint32_t position) { removeTask(state_, position); }
  std::vector<Sub> contents() const {
    std::vector<Sub> out;
    for (uint32_t i = 0; i < state_.nTasks; ++i)
      out.push_back({tasks_[i].seq, tasks_[i].collId, tasks_[i].priority, tasks_[i].part});
    return out;
  }
  // What the block reports as it leaves a launch.
  uint32_t reportedHeld() {
    reportOnLeaving(state_);
    return report_.held;
  }

 private:
  std::vector<TaskEntry> tasks_;
  BlockReport report_{};
  BlockState state_{};
};

std::vector<std::pair<uint64_t, uint64_t>> keys(const std::vector<Sub>& subs) {
  std::vector<std::pair<uint64_t, uint64_t>> k;
  for (const Sub& s : subs) k.emplace_back(s.seq, s.collId);
  return k;
}

// Three rounds of 8 collectives with scattered ids, every round submitted in another random order
// on each of 6 "ranks": every rank's queue ends up the same, oldest round first, then by collId.
TEST(TaskQueueTest, AgreedOrderIsTheSameOnEveryRankWhateverTheArrivalOrder) {
  const uint64_t ids[] = {0x900, 0x17, 0x4242, 0x100, 0x3, 0xffff'ffff'0000'0001ull, 0x101, 0x55};
  std::vector<Sub> all;
  for (uint64_t round = 0; round < 3; ++round)
    for (uint64_t id : ids) all.push_back({round, id});
  std::vector<std::pair<uint64_t, uint64_t>> expected = keys(all);
  std::sort(expected.begin(), expected.end());

  for (unsigned rank = 0; rank < 6; ++rank) {
    Queue q(64);
    std::mt19937 rng(rank * 7919 + 1);
    for (uint64_t round = 0; round < 3; ++round) {
      std::vector<Sub> order(all.begin() + static_cast<long>(round * 8), all.begin() + static_cast<long>(round * 8 + 8));
      std::shuffle(order.begin(), order.end(), rng);
      for (const Sub& s : order) q.insert(s, occlOrderAgreed);
    }
    EXPECT_EQ(keys(q.contents()), expected) << "rank " << rank;
    EXPECT_EQ(q.reportedHeld(), all.size());
  }
}

// A later round that arrives while an earlier one is still queued goes behind it, even with a
// lower collId; an earlier submission that arrives late (a rank that submitted it last) goes
// ahead of everything newer.
TEST(TaskQueueTest, AgreedOrderPutsALateOlderSubmissionAhead) {
  Queue q(8);
  q.insert({1, 0x20}, occlOrderAgreed);
  q.insert({2, 0x10}, occlOrderAgreed);
  q.insert({1, 0x30}, occlOrderAgreed);
  q.insert({0, 0x99}, occlOrderAgreed);
  EXPECT_EQ(keys(q.contents()), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 0x99}, {1, 0x20}, {1, 0x30}, {2, 0x10}}));
  q.remove(1);
  q.insert({1, 0x21}, occlOrderAgreed);
  EXPECT_EQ(keys(q.contents()), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 0x99}, {1, 0x21}, {1, 0x30}, {2, 0x10}}));
  EXPECT_EQ(q.reportedHeld(), 4u);
}

// The parts of one submission (a collective with more threadblocks than the rank has daemon
// blocks) are inserted one after the other with the same key: they keep their order.
TEST(TaskQueueTest, AgreedOrderKeepsThePartsOfOneSubmissionInOrder) {
  Queue q(8);
  q.insert({0, 0x50}, occlOrderAgreed);
  for (uint32_t part = 0; part < 3; ++part) q.insert({0, 0x40, 0, part}, occlOrderAgreed);
  const std::vector<Sub> c = q.contents();
  ASSERT_EQ(c.size(), 4u);
  for (uint32_t i = 0; i < 3; ++i) {
    EXPECT_EQ(c[i].collId, 0x40u);
    EXPECT_EQ(c[i].part, i);
  }
  EXPECT_EQ(c[3].collId, 0x50u);
}

TEST(TaskQueueTest, FifoKeepsArrivalOrder) {
  Queue q(8);
  const std::vector<Sub> arrivals = {{3, 0x9}, {0, 0x1}, {1, 0x5}, {0, 0x2}};
  for (const Sub& s : arrivals) q.insert(s, occlOrderFifo);
  EXPECT_EQ(keys(q.contents()), keys(arrivals));
}

TEST(TaskQueueTest, PriorityPutsHigherFirstAndKeepsArrivalOrderAmongEquals) {
  Queue q(8);
  q.insert({0, 0xa, 1}, occlOrderPriority);
  q.insert({0, 0xb, 5}, occlOrderPriority);
  q.insert({0, 0xc, 1}, occlOrderPriority);
  q.insert({9, 0x1, 5}, occlOrderPriority);
  EXPECT_EQ(keys(q.contents()), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 0xb}, {9, 0x1}, {0, 0xa}, {0, 0xc}}));
}

}  // namespace
}  // namespace occl
