// Test support: ranks as threads (the first failure is rethrown on the test thread, as Gloo's
// tests do), communicators from occlCommInitAll with a bounded timeout, and deterministic
// inputs whose reductions are exact in any order.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "occl/occl.h"

namespace occl::test {

// Runs fn(rank) on `n` threads; rethrows the first exception after all have joined.
inline void runRanks(int n, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  std::exception_ptr first;
  std::mutex mu;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        fn(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
}

inline void expectOk(occlResult_t r, occlComm_t comm, const std::string& what) {
  if (r != occlSuccess)
    throw std::runtime_error(what + " failed: " + occlGetErrorString(r) + ": " + occlGetLastError(comm));
}

// The communicator's asynchronous error once it is set, or occlSuccess after `bound`. A pending
// collective may fail through a connector a peer poisoned before this rank's own bootstrap has
// noticed the peer's death: that error follows within seconds, so callers wait for it.
inline occlResult_t awaitAsyncError(occlComm_t comm, std::chrono::milliseconds bound) {
  occlResult_t async = occlSuccess;
  for (const auto deadline = std::chrono::steady_clock::now() + bound;;
       std::this_thread::sleep_for(std::chrono::milliseconds(5))) {
    expectOk(occlCommGetAsyncError(comm, &async), comm, "occlCommGetAsyncError");
    if (async != occlSuccess || std::chrono::steady_clock::now() >= deadline) return async;
  }
}

// Whether the tests run on the simt backend (OCCL_BACKEND=simt: occl_add_simt_runs), where a
// suite may choose fewer iterations.
inline bool onSimt() {
  const char* b = std::getenv("OCCL_BACKEND");
  return b != nullptr && std::string_view(b) == "simt";
}

inline occlConfig_t testConfig() {
  occlConfig_t c;
  occlConfigInit(&c);
  c.collTimeoutMs = 60000;  // a hang becomes a failed collective well inside ctest's timeout
  c.initTimeoutMs = 30000;
  return c;
}

// Owns n in-process communicators; destroys them (abort if still busy) at scope exit.
class CommGroup {
 public:
  explicit CommGroup(int n, occlConfig_t config = testConfig()) : comms_(static_cast<size_t>(n)) {
    expectOk(occlCommInitAll(comms_.data(), n, nullptr, &config), nullptr, "occlCommInitAll");
  }
  ~CommGroup() {
    for (occlComm_t c : comms_) {
      if (c != nullptr) occlCommDestroy(c);
    }
  }
  CommGroup(const CommGroup&) = delete;
  CommGroup& operator=(const CommGroup&) = delete;
  occlComm_t operator[](int r) const { return comms_[static_cast<size_t>(r)]; }
  int size() const { return static_cast<int>(comms_.size()); }

 private:
  std::vector<occlComm_t> comms_;
};

// Counts callbacks; waitFor() is bounded. Submit with `&CallbackCounter::callback, counter.arg()`:
// the callbacks write to state on the heap, not to the counter. A counter destroyed with callbacks
// still to come (a test that failed or gave up before its communicator was destroyed, whose
// destruction fires them) leaves its state behind for them, reachable from a list that is never
// freed, so they write to live memory and a leak checker stays quiet.
class CallbackCounter {
 public:
  CallbackCounter() : state_(new State) {}
  ~CallbackCounter() {
    {
      std::lock_guard<std::mutex> lock(state_->mu);
      state_->retired = state_->fired.size() < state_->armed;
    }
    if (!state_->retired) {
      delete state_;
      return;
    }
    static std::mutex retiredMu;
    static auto* retired = new std::vector<State*>;  // never freed: see above
    std::lock_guard<std::mutex> lock(retiredMu);
    retired->push_back(state_);
  }
  CallbackCounter(const CallbackCounter&) = delete;
  CallbackCounter& operator=(const CallbackCounter&) = delete;

  static void callback(uint64_t collId, occlResult_t status, void* arg) {
    auto* state = static_cast<State*>(arg);
    std::lock_guard<std::mutex> lock(state->mu);
    state->fired.push_back({collId, status});
    if (state->retired) lateCallbacks().fetch_add(1);
  }
  // Callbacks, of every counter of this process, that came after their counter was destroyed.
  static std::atomic<size_t>& lateCallbacks() {
    static std::atomic<size_t> late{0};
    return late;
  }
  // The argument of one submission's callback; counts the submission as one to wait for.
  void* arg() {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->armed += 1;
    return state_;
  }
  bool waitFor(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard<std::mutex> lock(state_->mu);
        if (state_->fired.size() >= n) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  std::vector<std::pair<uint64_t, occlResult_t>> fired() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return state_->fired;
  }

 private:
  struct State {
    std::mutex mu;
    size_t armed = 0;  // arg() calls: submissions whose callback may still come
    bool retired = false;  // the counter is gone
    std::vector<std::pair<uint64_t, occlResult_t>> fired;
  };
  State* state_;
};

// Small integers: sums, products, minima and maxima are exact in any order.
inline float inputValue(int rank, size_t i) { return static_cast<float>((rank + 1) * static_cast<int>(i % 7 + 1)); }

}  // namespace occl::test
