// occl-micro: the cost of occl's queue operations alone, on one thread, with no daemon.
//   BM_SqPushPop/C  : one SQE published and read by each of C consumers, each reporting its cursor
//                     where the SQE asks (about once per half ring; queues/sq.hpp).
//   BM_CqPushTake/D : one CQE stored into a block's D-slot ring and taken by the poller.
// These are floors for the submit and completion paths that occl-bench measures end to end.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <vector>

#include "occl/occl.h"
#include "queues/cq.hpp"
#include "queues/sq.hpp"

namespace {

// SQ slots are cache-line aligned and zeroed: tag 0 = never written.
struct SqStorage {
  explicit SqStorage(uint32_t depth, uint32_t consumers)
      : slots(static_cast<occl::Sqe*>(std::aligned_alloc(64, depth * sizeof(occl::Sqe)))), reports(consumers) {
    if (slots == nullptr) throw std::bad_alloc();
    for (uint32_t i = 0; i < depth; ++i) new (&slots[i]) occl::Sqe{};
    queue = occl::SubmissionQueue{slots, reports.data(), &published, depth, consumers};
  }
  ~SqStorage() { std::free(slots); }
  occl::Sqe* slots;
  std::vector<occl::BlockReport> reports;
  uint64_t published = 0;
  occl::SubmissionQueue queue{};
};

void BM_SqPushPop(benchmark::State& state) {
  const auto consumers = static_cast<uint32_t>(state.range(0));
  SqStorage sq(1024, consumers);
  std::vector<uint64_t> cursors(consumers, 0);
  uint64_t ticket = 0, limit = 0;
  occl::SqeView in{occl::kSqeSubmit, 1, 7, 0, 0x1000, 0x2000, 0};
  occl::SqeView out{};
  for (auto _ : state) {
    in.seq = ticket;
    if (!sq.queue.tryPush(ticket, in, limit)) {
      state.SkipWithError("SQ full: a consumer fell behind");
      break;
    }
    for (uint32_t c = 0; c < consumers; ++c) {
      if (!sq.queue.tryPop(cursors[c]++, out)) state.SkipWithError("SQE not visible to a consumer");
      if (out.flags & occl::kSqeReport) sq.queue.advance(c, cursors[c]);
    }
    benchmark::DoNotOptimize(out);
    ++ticket;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SqPushPop)->Arg(1)->Arg(4)->Arg(16);

void BM_CqPushTake(benchmark::State& state) {
  const auto depth = static_cast<uint32_t>(state.range(0));
  std::vector<uint64_t> slots(depth, 0);
  std::vector<uint64_t> heads(occl::CompletionQueue::kHeadStride, 0);
  std::vector<occl::BlockReport> reports(1);
  occl::CompletionQueue cq{slots.data(), heads.data(), reports.data(), depth, 1};
  uint64_t seq = 0, limit = 0;
  for (auto _ : state) {
    const uint64_t word = occl::cqe::pack(3, occlSuccess, seq);
    uint64_t taken = 0;
    if (!cq.tryPush(0, seq, word, limit) || !cq.tryTake(0, seq, taken)) {
      state.SkipWithError("CQE not where the poller looks");
      break;
    }
    benchmark::DoNotOptimize(occl::cqe::unpack(taken));
    ++seq;
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CqPushTake)->Arg(64)->Arg(1024);

}  // namespace

BENCHMARK_MAIN();
