// A communicator: one rank's daemon (through its Backend), SQ and CQ, registered collectives,
// and the poller thread that turns CQEs into callbacks. Its methods, by job: lifecycle (comm.cpp:
// create, start, shutdown, finalize, abort, revoke), registration (comm_register.cpp, over
// host/coll_registry.hpp), submission (comm_submit.cpp; gates: comm_gates.cpp), the poller and
// callbacks (comm_poller.cpp), waiting (comm_wait.cpp, over host/wait_generations.hpp), who is
// missing (comm_pending.cpp), statistics and the timeline (comm_stats.cpp); its errors are
// host/comm_errors.hpp.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "backend/doorbell.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/group.hpp"
#include "daemon/daemon.hpp"
#include "host/algorithm_library.hpp"
#include "host/coll_registry.hpp"
#include "host/collective.hpp"
#include "host/comm_errors.hpp"
#include "host/premul_ops.hpp"
#include "host/wait_generations.hpp"
#include "occl/occl.h"
#include "queues/yield_board.hpp"
#include "transport/connector.hpp"
#include "util/one_writer.hpp"
#include "util/status.hpp"


namespace occl::host {

struct CommOptions {
  int rank = 0;
  int nRanks = 1;
  occlConfig_t config{};
  std::unique_ptr<backend::Backend> backend;
  std::unique_ptr<transport::ConnectorFactory> connectors;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap;  // multi-process communicators keep it for failure detection
  // Ranks that are threads of one process (occlCommInitAll) meet here instead, to split.
  std::unique_ptr<bootstrap::Group> threadGroup;
  int device = -1;             // the CUDA device of a cuda rank, -1 otherwise
  occlConfig_t requested{};    // the config before occl resolved its automatic fields: what a split inherits
  // Every shm peer runs in this rank's pid namespace, so it can reach this rank's occlMemAlloc
  // memory (memory/shared_buffers.hpp); otherwise desc.sharedBuffers never selects the peer program.
  bool shmPeersSharePids = true;
  // Ranks of this communicator on this host (this one included), and the CPUs their affinity
  // masks cover together (0: this thread's mask, as for ranks that are threads of one process):
  // they decide whether a wait may spin on its core before it yields (comm.cpp, spinInPlaceNs).
  int ranksOnThisHost = 1;
  int cpusOfThisHostsRanks = 0;
  // Ranks that are processes: every rank's spare unique id, whose listener waits in that rank's
  // process, where the survivors of a shrink meet (host/comm_setup.cpp).
  std::vector<bootstrap::UniqueIdData> spareIds;
};

class Comm {
 public:
  static Result<std::unique_ptr<Comm>> create(CommOptions options);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank() const { return rank_; }
  int size() const { return nRanks_; }
  const occlConfig_t& config() const { return config_; }
  const char* transportTo(int peer) const { return connectors_->transportTo(peer); }
  int device() const { return device_; }
  const occlConfig_t& requestedConfig() const { return requested_; }
  // Where this communicator's ranks meet again (host/comm_setup.cpp, split): the TCP bootstrap
  // of ranks that are processes, else the group of this process's threads.
  bootstrap::Group& setupGroup() const;
  bool bootstrapped() const { return bootstrap_ != nullptr; }

  Status registerCollective(uint64_t collId, const occlCollDesc_t& desc);
  Status deregisterCollective(uint64_t collId);
  // occlRedOpCreatePreMulSum / occlRedOpDestroy (host/premul_ops.hpp).
  PreMulSumOps& preMulSumOps() { return preMulSumOps_; }
  // `count`: occlSubmitCount's (a variable count's collective), or OCCL_COUNT_REGISTERED.
  Status submit(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                uint64_t count = OCCL_COUNT_REGISTERED) {
    return submitEntry(collId, count, sendbuf, recvbuf, callback, arg, Start::Now, nullptr, nullptr);
  }
  // occlSubmitV: a v-collective's submission (host/vec_layout.hpp).
  Status submitVector(uint64_t collId, const void* sendbuf, void* recvbuf, const occlVectors_t& vectors,
                      occlCallback_t callback, void* arg) {
    return submitEntry(collId, OCCL_COUNT_REGISTERED, sendbuf, recvbuf, callback, arg, Start::Now, nullptr, nullptr,
                       &vectors);
  }
  // occlSubmitGroup: every entry checked before any is queued, then all queued under one lock
  // with one notifySubmission(); `submitted` receives how many were queued.
  Status submitGroup(std::span<const occlSubmission_t> subs, int* submitted);
  // occlSubmitGated: the submission starts once openGate(*gate) (device/gate.hpp).
  Status submitGated(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                     occlGate_t* gate);
  Status openGate(const occlGate_t& gate);
  // occlSubmitOnStream: the submission starts when `stream` reaches it, and the stream's later
  // work waits for its completion (Backend::enqueueGate).
  Status submitOnStream(uint64_t collId, const void* sendbuf, void* recvbuf, void* stream, occlCallback_t callback,
                        void* arg);
  Status waitAll(int64_t timeoutMs);
  Result<occlCollStats_t> collectiveStats(uint64_t collId);
  // The records each daemon block kept (daemon/timeline.hpp), oldest first, block by block.
  Result<std::vector<occlTimelineEntry_t>> timeline();
  // occlAlgorithmLoad, and the name of the algorithm a registered collective runs by placement.
  Status loadAlgorithm(const std::string& name, const std::string& path) { return library_.load(name, path); }
  Result<const std::string*> algorithmOf(uint64_t collId, bool inPlace);
  // occlCollGetSmallForm: the small-message form's bound and algorithm (0 and null: none).
  struct SmallForm {
    uint64_t maxCount;
    const char* algorithm;  // valid while collId is registered
  };
  Result<SmallForm> smallFormOf(uint64_t collId);
  Status finalize();
  // Fails every pending submission with `reason` and stops the daemon without waiting for peers.
  Status abort(occlResult_t reason);
  // occlCommRevoke: abort() that keeps the communicator (for occlCommShrink and Destroy), its
  // pending submissions failed with occlAborted as revoked, later calls refused as revoked.
  Status revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Submissions whose callbacks have not returned (occlCommShrink's default refuses to leave
  // them), read under the CQ's lock (comm_wait.cpp): a callback that has run, as its caller may
  // already have seen, is counted out before this reads. Not from a callback (api.cpp refuses).
  uint64_t pendingSubmissions();
  // What each registration asked for, for a shrink to register again (host/coll_registry.hpp).
  using Registration = host::Registration;
  std::vector<Registration> registrations();
  // Each rank's spare rendezvous (host/comm_setup.cpp, shrink): empty for thread ranks.
  const std::vector<bootstrap::UniqueIdData>& spareIds() const { return spareIds_; }
  // A peer process died (called on the bootstrap's monitor thread): fails what is pending and
  // every later submission with occlRemoteError. It stops nothing: finalize/destroy do that on
  // the user's thread, so a destroy that races with this call never frees what it uses.
  void failFromPeer(const std::string& why);
  occlResult_t asyncError() const { return errors_.async(); }
  // occlCommGetPending (comm_pending.cpp): per pending submission, the peers it waits on and why.
  Result<std::vector<occlPendingWait_t>> pendingWaits();
  // Callbacks run on the poller, or on a thread in waitAll that takes the poller's part while it
  // waits: waiting for or stopping the communicator inside one would wait for the very thread
  // that asks.
  bool inCallback() const;

  // "rank 0 of 4 ready: backend host, ...; peers: 0 self, 1 shm, ...", for the init log line.
  std::string describe() const;
  // Records `s` as this communicator's last error and returns its code.
  occlResult_t record(const Status& s) { return errors_.record(s); }
  std::string lastError() const { return errors_.lastError(); }

 private:
  // Lifecycle (comm.cpp).
  explicit Comm(CommOptions& options);
  Status allocateDaemonState();
  Status start();
  void shutdown();
  // Sets the abort flag and the daemon's copy (Backend::raiseAbort). `keepFirst`: an abort already
  // under way keeps its own reason.
  void raiseAbort(occlResult_t reason, bool keepFirst);
  // Why a call finds the communicator stopped: finalized, aborted or revoked.
  Status stoppedError() const;
  // abort() and revoke(): `why` becomes the asynchronous error's message.
  Status stopAndFail(occlResult_t reason, const std::string& why);

  // Submission (comm_submit.cpp).
  // The SQ (SubmissionQueue's producer side, under the submit lock): room for `n` entries at
  // sqTicket_ (sqHasRoom), else waited for a bounded time (waitForSqRoom; an abort ends the wait,
  // except for the exit request's); then writeSqe or writeSqes writes and publishes them
  // (SubmissionQueue::writeAll), which advances sqTicket_. Room is there before an entry is
  // prepared, so a submission that cannot go in leaves nothing to take back. One entry's push is
  // inlined (a call there cost a single submission 3-4 ns); a group's is not.
  bool sqHasRoom(uint32_t n) { return env_->sq.hasRoom(sqTicket_, n, sqLimit_); }
  Status waitForSqRoom(uint32_t n, bool exitRequest);
  void writeSqe(const SqeView& e) {
    env_->sq.writeAll(sqTicket_, &e, 1, sqLimit_);
    sqTicket_ += 1;
  }
  void writeSqes(const SqeView* e, uint32_t n);
  // One entry, waiting for room as waitForSqRoom does: the exit request.
  Status pushSqe(const SqeView& e);
  // Takes `lock` (on submitMu_, deferred) unless the communicator is stopped or a peer failed,
  // which it reports instead: what every submission does first. Here, to be inlined into the
  // submit path.
  Status lockForSubmission(std::unique_lock<std::mutex>& lock) {
    if (stopped_) return stoppedError();
    if (atomics::loadAcquire(env_->hostAbortFlag) != 0) {
      return errors_.asyncStatus(occlInvalidUsage);  // a peer failed: say which, not "finalized"
    }
    lock.lock();
    // Again under the lock, which shutdown() takes to push the exit SQE after setting stopped_: a
    // submission that passed the first look while shutdown began would otherwise go in behind
    // the exit SQE, where no daemon reads it, and its callback would never fire.
    if (stopped_) return stoppedError();
    return Status::success();
  }
  // How a submission starts (device/gate.hpp): at once, when openGate opens its gate, or when a
  // stream reaches it.
  enum class Start { Now, AtGate, OnStream };
  // submit(), submitVector(), submitGated() and submitOnStream(); `seq` receives the submission's
  // number; `vectors`: a v-collective's blocks (occlSubmitV), else nullptr.
  Status submitEntry(uint64_t collId, uint64_t count, const void* sendbuf, void* recvbuf, occlCallback_t callback,
                     void* arg, Start start, void* stream, uint64_t* seq, const occlVectors_t* vectors = nullptr);
  // The checks of one submission under the submit lock: registered, its count (OCCL_COUNT_REGISTERED
  // or one the collective takes), its buffers, room in its window for it after the entries of the
  // same group checked before it (groupScratch). Gives the collective and the count in `out`. A
  // v-collective takes `vectors` instead of a count, and only it takes them.
  // A v-collective's table goes into vecScratch_ (under the submit lock), not here: a group's
  // entries are copied into groupChecks_, and a Checked of three words copies as one.
  struct Checked {
    Collective* coll;
    uint64_t count;
    bool inPlace;  // NCCL's in-place position for this count: the form it runs (kSqeInPlace)
  };
  static_assert(std::is_trivially_copyable_v<Checked>, "a group's checks copy as plain words");
  // Returns false with the reason in `error` (a Status is built only for a failure: a success's
  // string costs the submit path a few nanoseconds each time it is made and dropped). Inlined in
  // the submit paths: the usual entry passes passesAtFirstLook there, and only the others, failures
  // included, take the call to checkEntryFully.
  inline bool checkEntry(Collective* found, uint64_t collId, uint64_t count, const void* sendbuf, const void* recvbuf,
                  const occlVectors_t* vectors, Checked& out, Status& error);
  // True for the usual entry, which then passes checkEntryFully too: its registered count on a
  // collective without desc.variableCount or desc.vectorCounts, two buffers in place or apart that
  // need no look beyond their addresses (no desc.sharedBuffers, a backend that reads any memory),
  // room in its window. False says only that checkEntryFully must decide.
  inline bool passesAtFirstLook(Collective& c, uint64_t count, const void* sendbuf, const void* recvbuf, Checked& out) const;
  bool checkEntryFully(Collective* found, uint64_t collId, uint64_t count, const void* sendbuf, const void* recvbuf,
                       const occlVectors_t* vectors, Checked& out, Status& error);
  // Whether collective `c` takes a submission of `count` elements (checkEntry).
  Status checkCount(const Collective& c, uint64_t count, bool inPlace) const;
  // Whether `tasks` more task-queue entries fit every block's task queue.
  Status checkTaskRoom(uint64_t tasks) const;
  // A checked submission's callback slot (of `generation`) and its collective's count, before its
  // SQE (written to `out`) is pushed; the caller counts it in `generation` (addSubmitted) before.
  // `out` is where the push reads it: a returned SQE, copied there whole, was read back a few
  // stores after its narrow fields were written, which store forwarding cannot serve (about 3 ns
  // of a group entry's 34: BM_SubmitBurst/32/1).
  inline void prepareEntry(const Checked& e, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                    Start start, int generation, SqeView& out);
  // NULL buffers that must hold data, buffers not from occlMemAlloc where desc.sharedBuffers asks
  // for them, and overlapping buffers other than in place.
  Status validateBuffers(const Collective& c, const Collective::BufferExtents& x, const void* sendbuf,
                         const void* recvbuf, bool inPlace) const;
  // desc.sharedBuffers: both buffers lie in occlMemAlloc memory holding these bytes.
  Status checkSharedBuffers(const Collective& c, const void* sendbuf, uint64_t sendBytes, const void* recvbuf,
                            uint64_t recvBytes) const;
  // Whether the two buffers sit at NCCL's in-place position for these extents (this rank's).
  static inline bool inPlace(const Collective::BufferExtents& x, const void* sendbuf, const void* recvbuf);
  // After an abort: writes the done word of every gated submission that has not completed, so a
  // stream waiting for one goes on even where the daemon stopped before it failed them
  // (comm_gates.cpp).
  void releaseGateWaiters();

  // Who is missing (comm_pending.cpp): this rank's status table, read by the group's thread every
  // tick; a pending submission (its board entry, its seq) and the waits the board explains.
  struct Waiting {
    bootstrap::BoardEntry entry;
    uint64_t seq;
  };
  struct Wait {
    occlPendingWait_t row;
    std::string text;  // "rank 2 has not submitted it (...)", for messages
  };
  static bootstrap::BoardEntry boardEntry(const Collective& c);
  bool fillBoard(std::vector<bootstrap::BoardEntry>& out);
  std::vector<Wait> waitsOf(const std::vector<Waiting>& pending);
  std::string describeWaits(const Waiting& failed);

  // The poller and callbacks (comm_poller.cpp).
  void pollerLoop();
  // Takes every CQE published so far and fires what it completes; the caller holds cqMu_.
  // Returns whether it took any.
  bool drainCq();
  void processCqe(uint64_t word);
  void fireInOrder(uint32_t index, std::unique_lock<std::mutex> lock);
  // `failed`: the submission, for a timeout's message to say whom it waited on.
  std::string completionFailure(const Waiting& failed, occlResult_t status);
  // waitAll's first phase: the waiting thread runs the daemon's passes where the backend lets it
  // and drains the CQ itself, until every callback of generation `generation` has fired
  // (returns true), `deadline` passes, or nothing has moved for kHelpSpinUs.
  using Clock = WaitGenerations::Clock;
  // `readAt`: when the caller read the clock for `deadline` (the first helped pass reuses it).
  bool waitByPolling(int generation, std::optional<Clock::time_point> deadline,
                     std::optional<Clock::time_point> readAt);

  // Waiting (comm_wait.cpp): waitAll for one generation: true once its callbacks have all fired,
  // false at `deadline`.
  bool waitForGeneration(int generation, std::optional<Clock::time_point> deadline,
                         std::optional<Clock::time_point> readAt);

  const int rank_;
  const int nRanks_;
  const int ranksOnThisHost_;
  const int cpusOfThisHostsRanks_;
  const occlConfig_t config_;
  const occlConfig_t requested_;
  const int device_;
  std::unique_ptr<backend::Backend> backend_;
  // backend_->checksUserBuffers(), read once: the submit path asks for every entry.
  const bool checksUserBuffers_;
  std::unique_ptr<transport::ConnectorFactory> connectors_;
  // (declared after connectors_: initialised from it) every rank may read every other's buffers
  bool peerReads_;
  bool peerShared_;
  // The host's ranks' yield board (queues/yield_board.hpp; host backend, every peer on this host),
  // and this rank's word on it: its daemon and its helping waiters count their yields there.
  YieldBoard* yieldBoard_;
  YieldWord* yieldWord_;
  AlgorithmLibrary library_;
  PreMulSumOps preMulSumOps_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::unique_ptr<bootstrap::Group> threadGroup_;
  const std::vector<bootstrap::UniqueIdData> spareIds_;
  std::atomic<bool> revoked_{false};

  // Daemon-visible state (Backend::allocShared / allocDaemon).
  DaemonEnv* env_ = nullptr;
  std::vector<std::pair<void*, bool>> allocations_;  // (pointer, shared?)

  // The SQ producer lock; also guards registry_'s collId map, its table pages and index
  // allocation (registry_.indexMu() guards what the poller touches).
  std::mutex submitMu_;
  CollRegistry registry_;
  uint64_t sqTicket_ = 0;
  uint64_t sqLimit_ = 0;  // SubmissionQueue::hasRoom caches the first ticket it cannot write yet
  // Under the submit lock, reused so that a submission allocates nothing: a v-collective's table
  // from checkEntry to prepareEntry (vecLayout fills it in place), and a group's checked entries
  // and SQEs (submitGroup).
  VecLayout vecScratch_;
  std::vector<Checked> groupChecks_;
  std::vector<SqeView> groupSqes_;

  // Task-queue entries of the submissions whose callbacks have not fired (tasksPerSubmission()
  // each): kept <= taskQueueDepth, so that every block can always take every published SQE.
  // Counted in by the submitter (under submitMu_) and out by the thread firing callbacks (under
  // cqMu_), one writer each.
  std::atomic<uint64_t> tasksIn_{0};
  std::atomic<uint64_t> tasksOut_{0};
  uint64_t queuedTasks() const {
    return tasksIn_.load(std::memory_order_acquire) - tasksOut_.load(std::memory_order_acquire);
  }
  // Submissions counted in (under submitMu_) and out (under cqMu_), in total and by generation,
  // for pendingSubmissions() and occlCommWaitAll.
  WaitGenerations waits_;
  void addSubmitted(uint64_t submissions, uint64_t tasks, int generation) {
    addByOneWriter(tasksIn_, tasks);
    waits_.countIn(submissions, generation);
  }
  // Submissions counted in by addSubmitted that never went into the SQ (submitGroup).
  void countBackSubmitted(uint64_t submissions, uint64_t tasks, int generation) {
    addByOneWriter(tasksIn_, 0 - tasks);
    waits_.countBack(submissions, generation);
  }

  std::thread poller_;
  // The CQ's one consumer at a time: the poller, or a thread in waitAll (waitByPolling). Held
  // while callbacks fire, so a collective's callbacks never run concurrently or out of order.
  std::mutex cqMu_;
  std::vector<uint64_t> cqHeads_;  // the next word of each block's ring (guarded by cqMu_)
  // Threads in waitByPolling: while there is one, the poller parks on pollerBell_ instead of the
  // daemon's completion doorbell, so a CQE costs no futex wake of a thread that would find
  // nothing to do.
  std::atomic<int> pollingWaiters_{0};
  backend::Doorbell pollerBell_;
  std::atomic<bool> stopPoller_{false};
  bool started_ = false;
  std::atomic<bool> stopped_{false};  // read by submissions from callbacks on the poller thread

  CommErrors errors_;
};

}  // namespace occl::host
