// occl-micro: what one hand-off between two threads costs, the price of every wake-up on the host
// backend's paths (submit -> daemon, FIFO publish -> peer daemon, CQE -> poller -> caller).
//   BM_HandoffDoorbell : the token goes back and forth through two backend::Doorbells (the waiter
//                        parks on a futex, the other side rings it): two context switches per
//                        iteration when the threads share a core, two futex wakes when not.
//   BM_HandoffYield    : the same token, waited for with sched_yield between looks.
//   BM_HandoffPause    : waited for with the CPU's pause instruction only (no system call): the
//                        floor, honest only while both threads have a core of their own.
//   BM_FifoSendRecv/B/S : B bytes sent and received back by one thread through one FIFO of S
//                        slots: a message's CPU cost without a line crossing cores (S = 3: the
//                        division a slot count other than a power of two takes).
//   BM_FifoPingPong/B  : B bytes each way through a pair of connector FIFOs (queues/fifo.hpp), as
//                        two daemons pass a tiny message, waited for with pause: up to
//                        kFifoLineBytes (56) a message crosses in its slot's line, above that in
//                        its slot after tail (64 is the first size that does).
//   BM_TokenRing{Yield,Board}/N : a token goes round N threads, each waiting for its turn, with
//                        sched_yield between looks, or (Board) spinning while the thread before it
//                        on the ring has no thread in a yield (queues/yield_board.hpp: a host wait
//                        for a peer on a CPU), yielding otherwise. Time per iteration: one lap.
// Time per iteration is one round trip (two hand-offs); the real time is what counts.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "backend/doorbell.hpp"
#include "queues/fifo.hpp"
#include "queues/yield_board.hpp"
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

// One connector's memory, zeroed and page-aligned as the transports map it, with `slots` slots
// (config.connectorSlots' default: 4) of 4 KiB.
class FifoMemory {
 public:
  static constexpr uint64_t kSlotBytes = 4096;
  explicit FifoMemory(uint32_t slots = 4)
      : slots_(slots),
        bytes_((occl::fifoBytes(slots, kSlotBytes) + 4095) / 4096 * 4096),
        base_(std::aligned_alloc(4096, bytes_)) {
    if (base_ == nullptr) throw std::bad_alloc();
    std::memset(base_, 0, bytes_);
  }
  ~FifoMemory() { std::free(base_); }
  occl::FifoHandle handle() const {
    return occl::FifoHandle{static_cast<occl::FifoHeader*>(base_), static_cast<char*>(base_) + occl::kFifoDataOffset,
                            slots_, 0, kSlotBytes};
  }

 private:
  uint32_t slots_;
  size_t bytes_;
  void* base_;
};

// Sends `bytes` of `value`, as a primitive fills its slot and commits it.
void fifoSend(const occl::FifoHandle& f, uint64_t bytes, char value) {
  while (!f.canSend()) occl::cpuRelax();
  std::memset(f.sendSlot(), value, bytes);
  f.commitSend(bytes);
}
// Receives `bytes` and returns their sum, as a reduction reads them.
uint64_t fifoRecv(const occl::FifoHandle& f, uint64_t bytes) {
  while (!f.canRecv()) occl::cpuRelax();
  const char* in = f.recvSlot();
  uint64_t sum = 0;
  for (uint64_t i = 0; i < bytes; ++i) sum += static_cast<unsigned char>(in[i]);
  f.commitRecv();
  return sum;
}

// The timed loop of both FIFO benchmarks: a message out, then one in (what it sums to goes into
// the next message, so neither can be skipped).
uint64_t timedRoundTrips(benchmark::State& state, const occl::FifoHandle& out, const occl::FifoHandle& in,
                         uint64_t bytes) {
  uint64_t sum = 1;
  for (auto _ : state) {
    fifoSend(out, bytes, static_cast<char>(sum));
    sum = fifoRecv(in, bytes);
  }
  return sum;
}

void BM_FifoPingPong(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  FifoMemory there, back;  // main -> partner, partner -> main
  std::atomic<bool> stop{false};
  std::thread partner([&] {
    const occl::FifoHandle in = there.handle(), out = back.handle();
    for (;;) {
      const uint64_t sum = fifoRecv(in, bytes);
      if (stop.load(std::memory_order_acquire)) return;
      fifoSend(out, bytes, static_cast<char>(sum));
    }
  });
  const occl::FifoHandle out = there.handle(), in = back.handle();
  benchmark::DoNotOptimize(timedRoundTrips(state, out, in, bytes));
  stop.store(true, std::memory_order_release);
  fifoSend(out, bytes, 0);
  partner.join();
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FifoPingPong)->Arg(8)->Arg(56)->Arg(64)->Arg(1024)->UseRealTime();

// What a message costs the CPU alone: one thread sends it and receives it back through one FIFO,
// so no line crosses cores. A power-of-two slot count finds its slots with a mask, another one
// with a division (FifoHandle::slotIndex).
void BM_FifoSendRecv(benchmark::State& state) {
  const auto bytes = static_cast<uint64_t>(state.range(0));
  FifoMemory memory(static_cast<uint32_t>(state.range(1)));
  const occl::FifoHandle send = memory.handle(), recv = memory.handle();
  benchmark::DoNotOptimize(timedRoundTrips(state, send, recv, bytes));
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_FifoSendRecv)->ArgNames({"bytes", "slots"})->ArgsProduct({{8, 64}, {3, 4}});

enum class RingWait { Yield, Board };

template <RingWait kWait>
void BM_TokenRing(benchmark::State& state) {
  const auto n = static_cast<int>(state.range(0));
  std::atomic<uint64_t> token{0};  // token t: thread t % n's turn
  std::atomic<bool> stop{false};
  auto board = std::make_unique<occl::YieldBoard>();
  auto waitTurn = [&](uint64_t turn, int me) {
    const int before = (me + n - 1) % n;
    uint64_t spinStartNs = 0;
    while (token.load(std::memory_order_acquire) < turn) {
      if constexpr (kWait == RingWait::Board) {
        if (occl::namedRankOnCpu(board.get(), occl::namedRank(before))) {
          const uint64_t now = occl::exec::nowNs();
          if (spinStartNs == 0) spinStartNs = now;
          if (now - spinStartNs < occl::kPeerOnCpuSpinNs) {
            occl::cpuRelax();
            continue;
          }
        }
        occl::countedYield(board->of(me));
      } else {
        std::this_thread::yield();
      }
    }
  };
  std::vector<std::thread> partners;
  for (int k = 1; k < n; ++k) partners.emplace_back([&, k] {
      for (uint64_t lap = 0;; ++lap) {
        const uint64_t mine = lap * static_cast<uint64_t>(n) + static_cast<uint64_t>(k);
        waitTurn(mine, k);
        token.store(mine + 1, std::memory_order_release);  // passed on before leaving: no one waits for it
        if (stop.load(std::memory_order_acquire)) return;
      }
    });
  uint64_t lap = 0;
  for (auto _ : state) {
    waitTurn(lap * static_cast<uint64_t>(n), 0);
    token.store(lap * static_cast<uint64_t>(n) + 1, std::memory_order_release);
    ++lap;
  }
  stop.store(true, std::memory_order_release);
  waitTurn(lap * static_cast<uint64_t>(n), 0);  // a partner still in the ring sees stop on its next turn
  token.store(lap * static_cast<uint64_t>(n) + 1, std::memory_order_release);
  for (std::thread& t : partners) t.join();
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_TEMPLATE(BM_TokenRing, RingWait::Yield)->Name("BM_TokenRingYield")->Arg(2)->Arg(4)->UseRealTime();
BENCHMARK_TEMPLATE(BM_TokenRing, RingWait::Board)->Name("BM_TokenRingBoard")->Arg(2)->Arg(4)->UseRealTime();

}  // namespace
