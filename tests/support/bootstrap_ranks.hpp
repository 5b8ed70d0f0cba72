// Test support for the bootstrap's suites: ranks as threads of the test (runRanks), fresh unique
// ids and free ports, and what a failure callback saw (FailureRecorder).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "support/strangers.hpp"

namespace occl::bootstrap::ranks {

using Clock = std::chrono::steady_clock;
using BootstrapPtr = std::unique_ptr<Bootstrap>;

inline int64_t msSince(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
}

// Runs fn(rank) on one thread per rank and returns each rank's Status; an exception thrown on a
// rank thread is rethrown here.
template <class Fn>
inline std::vector<Status> runRanks(int n, Fn fn) {
  std::vector<Status> out(n);
  std::exception_ptr first;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        out[r] = fn(r);
      } catch (...) {
        std::lock_guard lk(mu);
        if (!first) first = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (first) std::rethrow_exception(first);
  return out;
}

inline void expectAllOk(const std::vector<Status>& statuses) {
  for (size_t r = 0; r < statuses.size(); ++r) EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r].message;
}

// A port nobody listens on right now.
inline int freePort(const char* host = "127.0.0.1") {
  auto addr = SockAddr::resolve(host, 0);
  auto s = Socket::listen(*addr);
  return s.ok() ? s->localAddress()->port() : 0;
}

inline UniqueIdData newId() {
  auto id = createUniqueId();
  EXPECT_TRUE(id.ok()) << id.status().message;
  return *id;
}

struct FailureRecorder {
  std::mutex mu;
  std::condition_variable cv;
  int calls = 0;
  int rank = -2;
  std::string why;

  FailureCallback callback() {
    return [this](int r, const std::string& w) {
      std::lock_guard lk(mu);
      ++calls;
      rank = r;
      why = w;
      cv.notify_all();
    };
  }
  bool waitFor(std::chrono::milliseconds d) {
    std::unique_lock lk(mu);
    return cv.wait_for(lk, d, [&] { return calls > 0; });
  }
};

}  // namespace occl::bootstrap::ranks
