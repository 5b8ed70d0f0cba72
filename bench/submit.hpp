// One timed unit of work: submit the registrations of a row (one, or SendRecv's two) and block
// until all their callbacks have fired. The wait is bounded, so a lost completion becomes an
// error message instead of a hung benchmark.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>

#include "devices.hpp"
#include "occl/occl.h"
#include "options.hpp"

namespace occl::bench {

struct Submission {
  uint64_t collId;
  const void* send;
  void* recv;
  size_t count;  // occlSubmitCount's (Registration::count)
};

// Counts a run's callbacks down. The count is an atomic, and the lock is taken only by a waiter
// that sleeps and by a callback that must wake it: the benchmark's own waits (usually over by the
// time occlCommWaitAll returns) then cost no lock, as MPI's blocking call costs none. A Completion
// outlives its callbacks (RankRunner keeps one for all its runs).
class Completion {
 public:
  void arm(int expected);
  // occlCallback_t; `arg` is the Completion.
  static void callback(uint64_t collId, occlResult_t status, void* arg);
  // Counts a submission that never reached occl as fired, so wait() does not wait for it.
  void cancel(int n);
  // False if the callbacks did not all fire within `bound`.
  bool wait(std::chrono::milliseconds bound);
  occlResult_t firstError() const { return firstError_.load(std::memory_order_acquire); }

 private:
  bool done() const { return pending_.load(std::memory_order_seq_cst) <= 0; }

  std::atomic<int> pending_{0};
  std::atomic<occlResult_t> firstError_{occlSuccess};
  // A waiter announces itself here (seq_cst with the count: either the last callback sees it,
  // or the waiter sees the count at 0) before it sleeps on cv_ under mu_.
  std::atomic<bool> sleeping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
};

// Outcome of one run; `lost` means a callback may still fire later, so the buffers it names must
// not be freed or reused (the caller aborts the communicator).
struct RunStatus {
  std::string error;  // empty on success
  bool lost = false;
  bool ok() const { return error.empty(); }
};

// How submitAndWait starts its parts (Options::submit); `stream` is the rank's for Stream.
struct SubmitPath {
  SubmitMode mode = SubmitMode::Plain;
  RunStream* stream = nullptr;
};

RunStatus submitAndWait(occlComm_t comm, std::span<const Submission> parts, Completion& done,
                        std::chrono::milliseconds bound, const SubmitPath& path = {});

}  // namespace occl::bench
