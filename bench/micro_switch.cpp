// occl-micro: what one hand-off between two threads costs, the price of every wake-up on the host
// backend's paths (submit -> daemon, FIFO publish -> peer daemon, CQE -> poller -> caller).
//   BM_HandoffDoorbell : the token goes back and forth through two backend::Doorbells (the waiter
//                        parks on a futex, the other side rings it): two context switches per
//                        iteration when the threads share a core, two futex wakes when not.
//   BM_HandoffYield    : the same token, waited for with sched_yield between looks.
//   BM_HandoffPause    : waited for with the CPU's pause instruction only (no system call): the
//                        floor, honest only while both threads have a core of their own.
// Time per iteration is one round trip (two hand-offs); the real time is what counts.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <thread>

#include "backend/doorbell.hpp"
#include "util/spin.hpp"

namespace {

enum class Wait { Doorbell, Yield, Pause };

// The partner thread answers every odd token with the next even one until told to stop.
template <Wait kWait>
struct PingPong {
  std::atomic<uint64_t> token{0};
  occl::backend::Doorbell bells[2];

  void waitFor(uint64_t want, int side) {
    auto arrived = [&] { return token.load(std::memory_order_acquire) >= want; };
    while (!arrived()) {
      if constexpr (kWait == Wait::Doorbell) {
        bells[side].park(1000, arrived);
      } else if constexpr (kWait == Wait::Yield) {
        std::this_thread::yield();
      } else {
        occl::cpuRelax();
      }
    }
  }
  void pass(uint64_t value, int to) {
    token.store(value, std::memory_order_release);
    if constexpr (kWait == Wait::Doorbell) bells[to].ring();
  }
};

template <Wait kWait>
void BM_Handoff(benchmark::State& state) {
  PingPong<kWait> p;
  std::atomic<bool> stop{false};
  std::thread partner([&] {
    for (uint64_t t = 1;; t += 2) {
      p.waitFor(t, 1);
      if (stop.load(std::memory_order_acquire)) return;
      p.pass(t + 1, 0);
    }
  });
  uint64_t t = 0;
  for (auto _ : state) {
    p.pass(t + 1, 1);
    p.waitFor(t + 2, 0);
    t += 2;
  }
  stop.store(true, std::memory_order_release);
  p.pass(t + 1, 1);
  partner.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK_TEMPLATE(BM_Handoff, Wait::Doorbell)->Name("BM_HandoffDoorbell")->UseRealTime();
BENCHMARK_TEMPLATE(BM_Handoff, Wait::Yield)->Name("BM_HandoffYield")->UseRealTime();
BENCHMARK_TEMPLATE(BM_Handoff, Wait::Pause)->Name("BM_HandoffPause")->UseRealTime();

}  // namespace
