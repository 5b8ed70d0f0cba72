// Callback semantics of occlSubmit on ranks as threads: exactly once with the status, in
// submission order per collId, resubmission from inside a callback, occlCommWaitAll, the C++
// wrapper (std::function and std::future), and statistics that agree with the callbacks.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "occl/occl.hpp"
#include "support/ranks.hpp"

namespace occl::test {
namespace {

constexpr auto kWait = std::chrono::seconds(30);

void registerAllReduce(occlComm_t comm, uint64_t collId, size_t count) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = count;
  expectOk(occlCollRegister(comm, collId, &d), comm, "register");
}

// One rank's buffers for one submission; the expected sum of 2 ranks is 3 * inputValue(0, i).
struct Buffers {
  std::vector<float> send, recv;
  Buffers(int rank, size_t count) : send(count), recv(count, -1.0f) {
    for (size_t i = 0; i < count; ++i) send[i] = inputValue(rank, i);
  }
  bool summedOverTwoRanks() const {
    for (size_t i = 0; i < recv.size(); ++i)
      if (recv[i] != 3.0f * inputValue(0, i)) return false;
    return true;
  }
};

// Two ranks with one 256-float AllReduce registered, for the waitAll tests: rank 0 submits alone
// and waits in vain, then rank 1 submits too. submit(r) counts rank r's callbacks in counter[r].
struct LatePeer {
  explicit LatePeer(uint64_t collId, const occlConfig_t& config = testConfig()) : comms(2, config), id(collId) {
    for (int r = 0; r < 2; ++r) registerAllReduce(comms[r], id, 256);
  }
  void submit(int r) {
    Buffers& b = r == 0 ? b0 : b1;
    expectOk(occlSubmit(comms[r], id, b.send.data(), b.recv.data(), &CallbackCounter::callback, counter[r].arg()), comms[r],
             "submit");
  }
  CommGroup comms;
  uint64_t id;
  CallbackCounter counter[2];
  Buffers b0{0, 256}, b1{1, 256};
};

// Records every callback with its arg, so duplicates and order are both visible.
struct Recorder {
  struct Entry {
    uint64_t collId;
    occlResult_t status;
    int tag;
  };
  std::mutex mu;
  std::vector<Entry> entries;

  struct Arg {
    Recorder* recorder;
    int tag;
  };
  static void callback(uint64_t collId, occlResult_t status, void* arg) {
    auto* a = static_cast<Arg*>(arg);
    std::lock_guard<std::mutex> lock(a->recorder->mu);
    a->recorder->entries.push_back({collId, status, a->tag});
  }
  std::vector<Entry> snapshot() {
    std::lock_guard<std::mutex> lock(mu);
    return entries;
  }
};

TEST(CallbacksTest, EachFiresExactlyOnceWithItsStatus) {
  CommGroup comms(2);
  constexpr int kColls = 4, kRounds = 3;
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < kColls; ++c) registerAllReduce(comms[r], 100 + c, 64 + c);
  Recorder rec[2];
  std::vector<Recorder::Arg> args[2];
  std::vector<std::unique_ptr<Buffers>> bufs;
  for (int r = 0; r < 2; ++r) args[r].reserve(kColls * kRounds);
  for (int round = 0; round < kRounds; ++round) {
    for (int c = 0; c < kColls; ++c) {
      for (int r = 0; r < 2; ++r) {
        args[r].push_back({&rec[r], round * kColls + c});
        bufs.push_back(std::make_unique<Buffers>(r, 64 + c));
        expectOk(occlSubmit(comms[r], 100 + c, bufs.back()->send.data(), bufs.back()->recv.data(), &Recorder::callback,
                            &args[r].back()),
                 comms[r], "submit");
      }
    }
  }
  for (int r = 0; r < 2; ++r) expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // room for a duplicate to show up
  for (int r = 0; r < 2; ++r) {
    std::map<int, int> fired;
    for (const auto& e : rec[r].snapshot()) {
      fired[e.tag] += 1;
      EXPECT_EQ(e.status, occlSuccess) << "rank " << r << " tag " << e.tag;
      EXPECT_EQ(e.collId, 100u + static_cast<uint64_t>(e.tag % kColls));
    }
    ASSERT_EQ(fired.size(), static_cast<size_t>(kColls * kRounds)) << "rank " << r;
    for (auto [tag, n] : fired) EXPECT_EQ(n, 1) << "rank " << r << " tag " << tag;
    occlResult_t async = occlSuccess;
    expectOk(occlCommGetAsyncError(comms[r], &async), comms[r], "async error");
    EXPECT_EQ(async, occlSuccess) << occlGetLastError(comms[r]);
  }
  for (const auto& b : bufs) EXPECT_TRUE(b->summedOverTwoRanks());
}

// Rank 1 submits only after rank 0 has filled its window, so every submission is in flight at
// once and their CQEs may come back in any order; callbacks must still fire in order.
TEST(CallbacksTest, InFlightSubmissionsCompleteInSubmissionOrder) {
  occlConfig_t cfg = testConfig();
  cfg.maxInflightPerColl = 8;
  cfg.daemonBlocks = 2;
  constexpr uint64_t kId = 7;
  constexpr size_t kCount = 4099;
  // Declared before the communicators, so that they outlive them: a wait that times out (a VM
  // that stalls for 30 s) leaves submissions in flight until the communicators are destroyed.
  Recorder rec[2];
  std::vector<Recorder::Arg> args[2];
  std::vector<std::unique_ptr<Buffers>> bufs[2];
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < cfg.maxInflightPerColl; ++k) {
      args[r].push_back({&rec[r], k});
      bufs[r].push_back(std::make_unique<Buffers>(r, kCount));
    }
  }
  CommGroup comms(2, cfg);
  for (int r = 0; r < 2; ++r) registerAllReduce(comms[r], kId, kCount);
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < cfg.maxInflightPerColl; ++k)
      expectOk(occlSubmit(comms[r], kId, bufs[r][k]->send.data(), bufs[r][k]->recv.data(), &Recorder::callback,
                          &args[r][k]),
               comms[r], "submit");
  }
  for (int r = 0; r < 2; ++r) expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
  for (int r = 0; r < 2; ++r) {
    auto fired = rec[r].snapshot();
    ASSERT_EQ(fired.size(), static_cast<size_t>(cfg.maxInflightPerColl));
    for (int k = 0; k < cfg.maxInflightPerColl; ++k) {
      EXPECT_EQ(fired[k].tag, k) << "rank " << r << ": callback " << k << " out of submission order";
      EXPECT_EQ(fired[k].status, occlSuccess);
      EXPECT_TRUE(bufs[r][k]->summedOverTwoRanks()) << "rank " << r << " submission " << k;
    }
  }
}

// A training loop driven from the callback: each completion submits the next iteration.
struct Chain {
  occlComm_t comm = nullptr;
  uint64_t collId = 0;
  int rank = 0;
  int target = 0;
  std::unique_ptr<Buffers> buf;
  std::atomic<int> done{0};
  std::atomic<int> failures{0};

  static void next(uint64_t, occlResult_t status, void* arg) {
    auto* c = static_cast<Chain*>(arg);
    if (status != occlSuccess || !c->buf->summedOverTwoRanks()) c->failures.fetch_add(1);
    if (c->done.fetch_add(1) + 1 >= c->target) return;
    c->buf = std::make_unique<Buffers>(c->rank, c->buf->send.size());
    if (occlSubmit(c->comm, c->collId, c->buf->send.data(), c->buf->recv.data(), &Chain::next, c) != occlSuccess)
      c->failures.fetch_add(1);
  }
};

// occlCommWaitAll waits for the submissions made before it, however many later callbacks fire:
// rank 0 waits with A in flight, which its peer has not submitted, and B, whose callback submits
// B again; both of B's callbacks fire during the wait, as many as rank 0 had submissions when it
// began. The wait must still time out on A.
TEST(CallbacksTest, WaitAllWaitsForTheEarlierSubmissionsNotForACountOfCallbacks) {
  CommGroup comms(2);
  constexpr uint64_t kLate = 0xA1, kChained = 0xA2;
  Chain chains[2];
  for (int r = 0; r < 2; ++r) {
    registerAllReduce(comms[r], kLate, 256);
    registerAllReduce(comms[r], kChained, 256);
    chains[r].comm = comms[r];
    chains[r].collId = kChained;
    chains[r].rank = r;
    chains[r].target = 2;
    chains[r].buf = std::make_unique<Buffers>(r, 256);
  }
  Buffers late[2] = {Buffers(0, 256), Buffers(1, 256)};
  CallbackCounter lateDone[2];
  auto submitLate = [&](int r) {
    expectOk(occlSubmit(comms[r], kLate, late[r].send.data(), late[r].recv.data(), &CallbackCounter::callback,
                        lateDone[r].arg()),
             comms[r], "submit A");
  };
  auto submitChained = [&](int r) {
    expectOk(occlSubmit(comms[r], kChained, chains[r].buf->send.data(), chains[r].buf->recv.data(), &Chain::next,
                        &chains[r]),
             comms[r], "submit B");
  };
  submitLate(0);
  submitChained(0);
  std::thread peer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // rank 0 waits by now
    submitChained(1);
  });
  EXPECT_EQ(occlCommWaitAll(comms[0], 2000), occlTimeout) << "it returned with A in flight";
  peer.join();
  EXPECT_EQ(chains[0].done.load(), 2) << "B's two callbacks, during the wait";
  EXPECT_TRUE(lateDone[0].fired().empty());
  submitLate(1);  // the peer comes: A completes, and every wait returns
  for (int r = 0; r < 2; ++r) {
    expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
    EXPECT_EQ(lateDone[r].fired().size(), 1u) << "rank " << r;
    EXPECT_TRUE(late[r].summedOverTwoRanks()) << "rank " << r;
    EXPECT_EQ(chains[r].done.load(), 2) << "rank " << r;
    EXPECT_EQ(chains[r].failures.load(), 0) << "rank " << r;
  }
}

TEST(CallbacksTest, CallbackMaySubmitAgain) {
  CommGroup comms(2);
  constexpr uint64_t kId = 0xC4A1;
  constexpr int kIterations = 50;
  Chain chains[2];
  for (int r = 0; r < 2; ++r) {
    registerAllReduce(comms[r], kId, 1000);
    chains[r].comm = comms[r];
    chains[r].collId = kId;
    chains[r].rank = r;
    chains[r].target = kIterations;
    chains[r].buf = std::make_unique<Buffers>(r, 1000);
  }
  for (int r = 0; r < 2; ++r)
    expectOk(occlSubmit(comms[r], kId, chains[r].buf->send.data(), chains[r].buf->recv.data(), &Chain::next, &chains[r]),
             comms[r], "first submit");
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while ((chains[0].done < kIterations || chains[1].done < kIterations) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(chains[r].done.load(), kIterations) << "rank " << r;
    EXPECT_EQ(chains[r].failures.load(), 0) << "rank " << r << ": " << occlGetLastError(comms[r]);
    expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
  }
}

// A burst larger than the completion ring: the daemon's pass fills the ring and must wake the
// poller to free slots, since the pass rings it only once it ends, after its last CQE. On an idle
// communicator the poller parks for 20 ms, so a pass that waited for it took each burst that
// long. Callbacks only, no occlCommWaitAll (whose thread would drain the ring itself).
TEST(CallbacksTest, ABurstLargerThanTheCompletionRingDoesNotWaitForAnIdlePoller) {
  occlConfig_t config = testConfig();
  config.cqDepth = 4;
  config.maxInflightPerColl = 4;
  CommGroup comms(1, config);
  occlConfig_t used;
  expectOk(occlCommGetConfig(comms[0], &used), comms[0], "getConfig");
  constexpr int kColls = 4, kPerColl = 4, kRounds = 15;
  for (int c = 0; c < kColls; ++c) registerAllReduce(comms[0], 0xB0 + c, 1);
  std::vector<Buffers> bufs;
  for (int i = 0; i < kColls * kPerColl; ++i) bufs.emplace_back(0, 1);
  CallbackCounter counter;
  std::vector<double> roundMs;
  for (int round = 0; round < kRounds; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the poller has parked, idle
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kColls * kPerColl; ++i)
      expectOk(occlSubmit(comms[0], 0xB0 + i % kColls, bufs[i].send.data(), bufs[i].recv.data(),
                          &CallbackCounter::callback, counter.arg()),
               comms[0], "submit");
    ASSERT_TRUE(counter.waitFor(static_cast<size_t>((round + 1) * kColls * kPerColl))) << "round " << round;
    roundMs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  for (const auto& [collId, status] : counter.fired()) EXPECT_EQ(status, occlSuccess) << "collId " << collId;
  for (const Buffers& b : bufs) EXPECT_EQ(b.recv, b.send);
  // The host backend's pass rings the poller. A GPU daemon's poller, and the simt backend's,
  // polls the ring instead: there a burst takes as long as that polling (and the emulation), and
  // only the results are checked.
  if (used.backend == occlBackendSimt || used.backend == occlBackendCuda) return;
  std::sort(roundMs.begin(), roundMs.end());
  // The bug cost a burst the rest of the poller's 20 ms park; a burst takes well under 1 ms
  // (the counter looks every millisecond).
  EXPECT_LT(roundMs[kRounds / 2], 8.0) << "median of " << kRounds << " bursts, ms";
}

// A test that gives up leaves callbacks to come, which its communicator's destruction fires
// (aborted) after the test's CallbackCounter is gone: they land in the state the counter left
// behind (tests/support/ranks.hpp), not in freed memory.
TEST(CallbacksTest, ACounterDestroyedBeforeItsCommunicatorKeepsWhereItsCallbacksGo) {
  Buffers b{0, 256};  // outlives the communicators, which may use it until they are destroyed
  const size_t lateBefore = CallbackCounter::lateCallbacks().load();
  {
    CommGroup comms(2, testConfig());
    for (int r = 0; r < 2; ++r) registerAllReduce(comms[r], 0x3B, 256);
    {
      CallbackCounter done;
      expectOk(occlSubmit(comms[0], 0x3B, b.send.data(), b.recv.data(), &CallbackCounter::callback, done.arg()),
               comms[0], "submit");
      EXPECT_FALSE(done.waitFor(1, std::chrono::milliseconds(50))) << "rank 1 never submitted";
    }
  }
  EXPECT_EQ(CallbackCounter::lateCallbacks().load(), lateBefore + 1);
}

TEST(CallbacksTest, WaitAllReturnsAfterEveryCallbackAndTimesOutWhenStuck) {
  LatePeer pair(0x3A);
  const CommGroup& comms = pair.comms;
  pair.submit(0);
  // Rank 1 has not submitted: rank 0 cannot finish, and waitAll says so within its bound.
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(occlCommWaitAll(comms[0], 200), occlTimeout);
  EXPECT_NE(std::string(occlGetLastError(comms[0])).find("pending"), std::string::npos) << occlGetLastError(comms[0]);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  pair.submit(1);
  for (int r = 0; r < 2; ++r) {
    expectOk(occlCommWaitAll(comms[r], 30000), comms[r], "waitAll");
    EXPECT_EQ(pair.counter[r].fired().size(), 1u) << "waitAll returned before the callback fired";
  }
  EXPECT_TRUE(pair.b0.summedOverTwoRanks());
  expectOk(occlCommWaitAll(comms[0], 0), comms[0], "waitAll with nothing pending");
}

// occlCommWaitAll on the host backend runs the daemon and fires the callbacks in the waiting
// thread (Comm::waitByPolling): the results are exact, and on a one-rank communicator, where
// nothing but the waiter's own work is awaited, the waiter fires the callbacks itself, nearly
// every one (the poller takes a CQE only when it finds one before the waiter looks); a waiter
// that never took the poller's part would fire none. Which thread ran the daemon's pass is not
// visible here: every host test that waits runs through that path. (A GPU daemon, and
// the simt backend that emulates it, is not helped: there the poller fires them.)
TEST(CallbacksTest, WaitAllFiresTheCallbacksInTheWaitingThread) {
  CommGroup comms(1);
  occlConfig_t used;
  expectOk(occlCommGetConfig(comms[0], &used), comms[0], "getConfig");
  // occlCommInitAll without a devlist runs host ranks unless the backend says otherwise.
  if (used.backend == occlBackendSimt || used.backend == occlBackendCuda)
    GTEST_SKIP() << "only a host daemon is helped by its waiter";
  constexpr uint64_t kId = 0x51;
  constexpr int kRounds = 200;
  registerAllReduce(comms[0], kId, 64);
  struct Seen {
    std::thread::id waiter;
    int onWaiter = 0;
    int fired = 0;
  } seen{std::this_thread::get_id()};
  auto callback = [](uint64_t, occlResult_t status, void* arg) {
    auto* s = static_cast<Seen*>(arg);
    EXPECT_EQ(status, occlSuccess);
    s->fired += 1;
    if (std::this_thread::get_id() == s->waiter) s->onWaiter += 1;
  };
  for (int i = 0; i < kRounds; ++i) {
    Buffers b(0, 64);
    expectOk(occlSubmit(comms[0], kId, b.send.data(), b.recv.data(), callback, &seen), comms[0], "submit");
    expectOk(occlCommWaitAll(comms[0], 30000), comms[0], "waitAll");
    ASSERT_EQ(seen.fired, i + 1) << "waitAll returned before the callback fired";
    for (size_t k = 0; k < b.recv.size(); ++k) ASSERT_EQ(b.recv[k], b.send[k]) << "round " << i << ", element " << k;
  }
  EXPECT_GT(seen.onWaiter, kRounds / 2) << "the waiting thread fired " << seen.onWaiter << " of " << kRounds;
}

// A waiter gives up helping once nothing moves (here: the peer has not submitted) and hands the
// work back: with nobody waiting any more, the daemon thread and the poller complete it.
TEST(CallbacksTest, AWaiterThatGivesUpHandsTheWorkBack) {
  LatePeer pair(0x52);
  for (int round = 0; round < 3; ++round) {
    pair.submit(0);
    EXPECT_EQ(occlCommWaitAll(pair.comms[0], 20), occlTimeout);
    pair.submit(1);
    for (int r = 0; r < 2; ++r)
      ASSERT_TRUE(pair.counter[r].waitFor(static_cast<size_t>(round + 1))) << "rank " << r << ", round " << round;
    EXPECT_TRUE(pair.b0.summedOverTwoRanks()) << "round " << round;
  }
}

// A waiter's pass ends its waits at the waiter's deadline (executor.hpp tPassDeadlineNs): with a
// spin threshold of a minute per wait (2^30 rounds of 64 ns), occlCommWaitAll(…, 200) still comes
// back within its bound, and the daemon thread completes the collective once the peer submits.
TEST(CallbacksTest, WaitAllKeepsItsTimeoutWhileHelpingAStuckCollective) {
  occlConfig_t config = testConfig();
  config.spinPolicy = occlSpinPolicyFixed;
  config.spinThresholdMax = 1 << 30;
  LatePeer pair(0x53, config);
  pair.submit(0);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(occlCommWaitAll(pair.comms[0], 200), occlTimeout);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  pair.submit(1);
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(pair.counter[r].waitFor(1)) << "rank " << r;
  EXPECT_TRUE(pair.b0.summedOverTwoRanks());
}

// Each of these waits for the poller (or joins it), and the callback runs on the poller or in a
// thread inside occlCommWaitAll: they must be refused, not hang or crash.
struct BlockingCalls {
  occlComm_t comm = nullptr;
  std::vector<occlResult_t> results;
  std::vector<std::string> messages;
  std::atomic<bool> done{false};

  static void callback(uint64_t, occlResult_t, void* arg) {
    auto* b = static_cast<BlockingCalls*>(arg);
    b->record(occlCommWaitAll(b->comm, 1000));
    b->record(occlCommFinalize(b->comm));
    b->record(occlCommAbort(b->comm));
    b->record(occlCommDestroy(b->comm));
    b->done = true;
  }
  void record(occlResult_t r) {
    results.push_back(r);
    messages.push_back(occlGetLastError(comm));
  }
};

TEST(CallbacksTest, BlockingCallsFromACallbackAreRefused) {
  CommGroup comms(1);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = 0;
  expectOk(occlCollRegister(comms[0], 1, &d), comms[0], "register");
  BlockingCalls calls;
  calls.comm = comms[0];
  expectOk(occlSubmit(comms[0], 1, nullptr, nullptr, &BlockingCalls::callback, &calls), comms[0], "submit");
  auto deadline = std::chrono::steady_clock::now() + kWait;
  while (!calls.done && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(calls.done.load());
  ASSERT_EQ(calls.results.size(), 4u);
  for (size_t i = 0; i < calls.results.size(); ++i) {
    EXPECT_EQ(calls.results[i], occlInvalidUsage) << "call " << i << ": " << calls.messages[i];
    EXPECT_NE(calls.messages[i].find("callback"), std::string::npos) << calls.messages[i];
  }
  expectOk(occlCommWaitAll(comms[0], 30000), comms[0], "waitAll outside the callback");
}

// Two ranks as threads through the C++ wrapper, with a `count`-float AllReduce registered as `id`.
std::vector<occl::Comm> wrapperPairWith(uint64_t id, uint64_t count) {
  occlConfig_t cfg = testConfig();
  std::vector<occl::Comm> comms = occl::Comm::all(2, &cfg);
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = count;
  for (auto& c : comms) c.registerCollective(id, d);
  return comms;
}

// One more run of `id` on both ranks, through futures: the communicators still work.
void expectAnotherRunWorks(std::vector<occl::Comm>& comms, uint64_t id, size_t count) {
  Buffers b0(0, count), b1(1, count);
  std::future<occlResult_t> f0 = comms[0].submit(id, b0.send.data(), b0.recv.data());
  std::future<occlResult_t> f1 = comms[1].submit(id, b1.send.data(), b1.recv.data());
  ASSERT_EQ(f0.wait_for(kWait), std::future_status::ready);
  ASSERT_EQ(f1.wait_for(kWait), std::future_status::ready);
  EXPECT_EQ(f0.get(), occlSuccess);
  EXPECT_EQ(f1.get(), occlSuccess);
  EXPECT_TRUE(b0.summedOverTwoRanks());
  EXPECT_TRUE(b1.summedOverTwoRanks());
}

TEST(CallbacksTest, CppWrapperFunctionFutureAndStats) {
  constexpr uint64_t kId = 0xF00;
  constexpr int kRounds = 5;
  std::vector<occl::Comm> comms = wrapperPairWith(kId, 333);
  EXPECT_EQ(comms[1].rank(), 1);
  EXPECT_EQ(comms[0].size(), 2);

  std::vector<std::unique_ptr<Buffers>> bufs;
  std::atomic<int> viaFunction{0};
  std::vector<std::future<occlResult_t>> futures;
  for (int round = 0; round < kRounds; ++round) {
    for (int r = 0; r < 2; ++r) {
      bufs.push_back(std::make_unique<Buffers>(r, 333));
      Buffers* b = bufs.back().get();
      if (r == 0) {
        comms[r].submit(kId, b->send.data(), b->recv.data(), [&](uint64_t id, occlResult_t s) {
          if (id == kId && s == occlSuccess) viaFunction.fetch_add(1);
        });
      } else {
        futures.push_back(comms[r].submit(kId, b->send.data(), b->recv.data()));
      }
    }
  }
  for (auto& f : futures) {
    ASSERT_EQ(f.wait_for(kWait), std::future_status::ready);
    EXPECT_EQ(f.get(), occlSuccess);
  }
  for (auto& c : comms) c.waitAll(30000);
  EXPECT_EQ(viaFunction.load(), kRounds);
  for (const auto& b : bufs) EXPECT_TRUE(b->summedOverTwoRanks());
  for (auto& c : comms) {
    occlCollStats_t s = c.stats(kId);
    EXPECT_EQ(s.submissions, static_cast<uint64_t>(kRounds));
    EXPECT_EQ(s.completions, s.submissions) << "rank " << c.rank();
    EXPECT_GE(s.contextLoads, s.completions);
  }
  try {
    comms[0].stats(0xDEAD);
    ADD_FAILURE() << "stats of an unregistered collId did not throw";
  } catch (const occl::Error& e) {
    EXPECT_EQ(e.code(), occlInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("not registered"), std::string::npos) << e.what();
  }
}

// A std::function callback that throws: the exception stays out of occl's threads (the other
// callbacks fire and every round's data arrives), and the submitting thread gets the first one
// from its next waitAll(), once.
TEST(CallbacksTest, CppWrapperRethrowsTheFirstCallbackExceptionFromWaitAll) {
  constexpr uint64_t kId = 0xF01;
  constexpr int kRounds = 4;
  std::vector<occl::Comm> comms = wrapperPairWith(kId, 100);
  std::vector<std::unique_ptr<Buffers>> bufs;
  std::atomic<int> fired{0};
  for (int round = 0; round < kRounds; ++round) {
    for (int r = 0; r < 2; ++r) {
      bufs.push_back(std::make_unique<Buffers>(r, 100));
      Buffers* b = bufs.back().get();
      comms[r].submit(kId, b->send.data(), b->recv.data(), [&fired, r, round](uint64_t, occlResult_t) {
        fired.fetch_add(1);
        if (r == 0 && round == 1) throw std::runtime_error("round 1 failed");
        if (r == 0 && round == 2) throw std::logic_error("round 2 failed");
      });
    }
  }
  comms[1].waitAll(30000);
  try {
    comms[0].waitAll(30000);
    ADD_FAILURE() << "waitAll did not rethrow the callback's exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "round 1 failed");
  }
  EXPECT_EQ(fired.load(), 2 * kRounds);
  for (const auto& b : bufs) EXPECT_TRUE(b->summedOverTwoRanks());
  EXPECT_NO_THROW(comms[0].waitAll(30000)) << "the exception was rethrown once; the second was dropped";
  expectAnotherRunWorks(comms, kId, 100);
}

// abort() from a callback is refused (it would join the thread it runs on): the refusal reaches
// waitAll as an occl::Error, and the Comm still holds its communicator and works.
TEST(CallbacksTest, CppWrapperAbortFromACallbackIsRefusedAndKeepsTheCommunicator) {
  constexpr uint64_t kId = 0xF02;
  std::vector<occl::Comm> comms = wrapperPairWith(kId, 100);
  Buffers b0(0, 100), b1(1, 100);
  comms[0].submit(kId, b0.send.data(), b0.recv.data(), [&](uint64_t, occlResult_t) { comms[0].abort(); });
  comms[1].submit(kId, b1.send.data(), b1.recv.data(), [](uint64_t, occlResult_t) {});
  comms[1].waitAll(30000);
  try {
    comms[0].waitAll(30000);
    ADD_FAILURE() << "abort() from a callback did not throw";
  } catch (const occl::Error& e) {
    EXPECT_EQ(e.code(), occlInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("callback"), std::string::npos) << e.what();
  }
  ASSERT_NE(comms[0].get(), nullptr);
  EXPECT_TRUE(b0.summedOverTwoRanks());
  EXPECT_EQ(comms[0].rank(), 0);
  expectAnotherRunWorks(comms, kId, 100);
}

}  // namespace
}  // namespace occl::test
