// The deadlock torture workload, a library of its own (occl_torture, not part of libocc) that
// tests/deadlock and tools/occl_torture.cpp link; it uses only the public API (no GoogleTest). A PendingTracker counts the submissions of every (rank, collId) that have not called
// back yet, so a bounded wait that fails can say exactly which collectives are stuck on which
// rank before the communicators are aborted. runRank() drives one rank of a workload: every
// iteration it fills its inputs, submits its collectives in its own order, waits (bounded) and
// checks every output bit-exactly.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "occl/occl.h"

namespace occl::torture {

class PendingTracker {
 public:
  // One (rank, collId): its address is the callback argument of every submission.
  struct Slot {
    PendingTracker* owner;
    int rank;
    uint64_t collId;
    int outstanding = 0;  // guarded by owner->mu_
  };

  explicit PendingTracker(int nRanks);
  PendingTracker(const PendingTracker&) = delete;
  PendingTracker& operator=(const PendingTracker&) = delete;

  Slot* slot(int rank, uint64_t collId);
  // Counts the submission before it exists (its callback may fire at once), submits it, and
  // undoes the count when occlSubmit fails. With `gate`, submits with occlSubmitGated instead.
  occlResult_t submit(occlComm_t comm, Slot* s, const void* sendbuf, void* recvbuf, occlGate_t* gate = nullptr);
  static void callback(uint64_t collId, occlResult_t status, void* arg);

  // Waits until `rank` (every rank when rank < 0) has nothing outstanding. False on timeout or
  // after cancel().
  bool wait(int rank, std::chrono::milliseconds timeout);
  // Wakes every waiter; later waits fail at once. Used when any rank has given up.
  void cancel();
  bool cancelled() const;

  // "rank 0: 0x11 (1 pending) 0x12 (2 pending); rank 3: ..." or "nothing pending".
  std::string describePending() const;
  uint64_t failedCallbacks() const;
  std::string firstFailure() const;
  // collIds in the order their callbacks fired on `rank`.
  std::vector<uint64_t> completionOrder(int rank) const;

 private:
  void complete(Slot& s, occlResult_t status);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Slot> slots_;  // deque: addresses stay valid as slots are added
  std::map<std::pair<int, uint64_t>, Slot*> index_;
  std::vector<int> outstandingByRank_;
  std::vector<std::vector<uint64_t>> completions_;
  uint64_t failed_ = 0;
  std::string firstFailure_;
  bool cancelled_ = false;
};

// Owns communicators; aborts them on request and destroys what is left at scope exit.
class CommSet {
 public:
  CommSet() = default;
  ~CommSet();
  CommSet(const CommSet&) = delete;
  CommSet& operator=(const CommSet&) = delete;
  // occlCommInitAll over `n` ranks with `config`; returns the first index of the new comms.
  occlResult_t initAll(int n, const occlConfig_t& config, size_t* first);
  // occlCommInitFromEnv: this process's one rank of a job started by mpirun or torchrun.
  occlResult_t initFromEnv(const occlConfig_t& config, size_t* first);
  // Takes ownership of a communicator made elsewhere (occlCommSplit's; NULL is kept as a hole)
  // and returns its index.
  size_t adopt(occlComm_t comm);
  occlComm_t operator[](size_t i) const { return comms_[i]; }
  size_t size() const { return comms_.size(); }
  // Fails every pending submission (callbacks fire with occlAborted) and frees the comms.
  void abortAll();

 private:
  std::vector<occlComm_t> comms_;
};

// Prints `why` and the pending collectives to stderr, then cancels every waiter.
void reportHang(PendingTracker& tracker, const std::string& why);

// One collective as seen from one rank: the communicator this rank submits it on and the global
// ranks of that communicator (index = rank in the communicator), which fix the expected sum.
struct CollPlan {
  occlComm_t comm = nullptr;
  uint64_t collId = 0;
  size_t count = 0;  // float32 elements
  int priority = 0;
  int nBlocks = 0;   // 0 = config.daemonBlocks
  const char* algorithm = nullptr;  // occlCollDesc_t.algorithm: NULL = the built-in choice
  std::vector<int> members;
};

enum class Order { Consistent, Shuffled };

struct RunOptions {
  int iters = 200;
  Order order = Order::Shuffled;
  uint64_t seed = 1;
  std::chrono::milliseconds iterTimeout{30000};
  bool hashOutputs = false;  // fold every output into RankResult::outputHash
  // Rank 0 sleeps this long before submitting each iteration: the lagging rank of paper Fig. 9,
  // whose peers fetch their collectives early and preempt them while they wait for it.
  std::chrono::microseconds lagRank0{0};
  // Gated submission (occlSubmitGated): a rank submits its collectives before their inputs exist;
  // a thread of its own then writes each input and opens its gate, in an order of its own per
  // rank and iteration, while the rank waits. Checks that nothing starts before its gate and that
  // gates opened in any order across ranks complete.
  bool gates = false;
};

struct RankResult {
  uint64_t wrong = 0;      // output elements that differ from the expected sum
  std::string firstWrong;  // where the first one was
  uint64_t completed = 0;  // submissions that called back successfully
  int itersDone = 0;
  bool timedOut = false;
  uint64_t outputHash = 0;
};

occlCollDesc_t allReduceDesc(const CollPlan& p);
// Registers every collective of `plan` on its communicator; returns the first failure.
occlResult_t registerAll(const std::vector<CollPlan>& plan, std::string* error);

// A rank's send and receive buffers. A rank that gives up on a hang returns with submissions
// still pending, so the buffers must outlive runRank until its communicators are aborted.
struct RankBuffers {
  std::vector<std::vector<float>> send, recv;
};

// Runs `o.iters` iterations of `plan` on global rank `rank`. Never blocks longer than
// o.iterTimeout per iteration: on timeout it reports the pending collectives, cancels the
// tracker (so the other ranks stop too) and returns with timedOut set.
RankResult runRank(int rank, const std::vector<CollPlan>& plan, const RunOptions& o, PendingTracker& tracker,
                   RankBuffers& buffers);

// Runs runRank for every rank on its own thread (plans[r] is rank r's), then aborts `comms` if any
// rank gave up, so that the callbacks of stuck collectives fire and the caller can return.
std::vector<RankResult> runRankThreads(const std::vector<std::vector<CollPlan>>& plans, const RunOptions& o,
                                       PendingTracker& tracker, CommSet& comms);

// One communicator over all ranks (comms[first + r] is rank r's) and one AllReduce per count,
// collIds base, base + 1, ...
std::vector<std::vector<CollPlan>> singleCommPlans(const CommSet& comms, size_t first, int nRanks,
                                                   const std::vector<size_t>& counts, uint64_t base = 0x100);

// The order `rank` submits K collectives in at iteration `iter`: a per-rank, per-iteration
// shuffle rotated so that ranks start with different collectives (identity when Consistent).
std::vector<size_t> submissionOrder(int rank, int iter, size_t k, Order order, uint64_t seed);

// k float32 element counts: minBytes, x4 per step up to maxBytes, then from minBytes again.
std::vector<size_t> geometricCounts(size_t k, size_t minBytes, size_t maxBytes);

// Sums the statistics of one collective over communicators.
occlCollStats_t sumStats(const std::vector<std::pair<occlComm_t, uint64_t>>& colls);
// Adds every counter of `s` into `into`. The part count stays where every summand has the same;
// a sum over registrations of different part counts has parts = 0.
void addStats(occlCollStats_t& into, const occlCollStats_t& s);
// Empty when consistent after every submission completed: completions == submissions,
// contextLoads == preemptions + parts * completions (where parts is known, else at least
// preemptions + completions), contextSaves <= preemptions.
std::string statsProblems(const occlCollStats_t& s);

// CPU seconds used by this process so far (user + system).
double processCpuSeconds();

}  // namespace occl::torture
