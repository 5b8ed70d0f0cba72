// A communicator: one rank's daemon (through its Backend), SQ and CQ, registered collectives,
// and the poller thread that turns CQEs into callbacks.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "backend/backend.hpp"
#include "backend/doorbell.hpp"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/group.hpp"
#include "daemon/daemon.hpp"
#include "host/algorithm_library.hpp"
#include "host/collective.hpp"
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
  Status submit(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg) {
    return submitEntry(collId, sendbuf, recvbuf, callback, arg, Start::Now, nullptr, nullptr);
  }
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
  Status finalize();
  // Fails every pending submission with `reason` and stops the daemon without waiting for peers.
  Status abort(occlResult_t reason);
  // occlCommRevoke: abort() that keeps the communicator (for occlCommShrink and Destroy), its
  // pending submissions failed with occlAborted as revoked, later calls refused as revoked.
  Status revoke();
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }
  // Submissions whose callbacks have not fired (occlCommShrink's default refuses to leave them).
  uint64_t pendingSubmissions() const {
    return submittedTotal_.load(std::memory_order_acquire) - firedTotal_.load(std::memory_order_acquire);
  }
  // What each registration asked for, for a shrink to register again.
  struct Registration {
    uint64_t collId;
    occlCollDesc_t desc;    // desc.algorithm NULL: see `algorithm`
    std::string algorithm;  // as registered, "" for NULL
  };
  std::vector<Registration> registrations();
  // Each rank's spare rendezvous (host/comm_setup.cpp, shrink): empty for thread ranks.
  const std::vector<bootstrap::UniqueIdData>& spareIds() const { return spareIds_; }
  // A peer process died (called on the bootstrap's monitor thread): fails what is pending and
  // every later submission with occlRemoteError. It stops nothing: finalize/destroy do that on
  // the user's thread, so a destroy that races with this call never frees what it uses.
  void failFromPeer(const std::string& why);
  occlResult_t asyncError() const { return asyncError_.load(std::memory_order_acquire); }
  // occlCommGetPending (comm_pending.cpp): per pending submission, the peers it waits on and why.
  Result<std::vector<occlPendingWait_t>> pendingWaits();
  // Callbacks run on the poller, or on a thread in waitAll that takes the poller's part while it
  // waits: waiting for or stopping the communicator inside one would wait for the very thread
  // that asks.
  bool inCallback() const;

  // "rank 0 of 4 ready: backend host, ...; peers: 0 self, 1 shm, ...", for the init log line.
  std::string describe() const;
  // Records `s` as this communicator's last error and returns its code.
  occlResult_t record(const Status& s);
  std::string lastError() const;

 private:
  explicit Comm(CommOptions& options);
  Status allocateDaemonState();
  Status start();
  void shutdown();
  Status pushSqe(const SqeView& e);
  // How a submission starts (device/gate.hpp): at once, when openGate opens its gate, or when a
  // stream reaches it.
  enum class Start { Now, AtGate, OnStream };
  // submit(), submitGated() and submitOnStream(); `seq` receives the submission's number.
  Status submitEntry(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                     Start start, void* stream, uint64_t* seq);
  // After an abort: writes the done word of every gated submission that has not completed, so a
  // stream waiting for one goes on even where the daemon stopped before it failed them.
  void releaseGateWaiters();
  // Sets the abort flag and the daemon's copy (Backend::raiseAbort). `keepFirst`: an abort already
  // under way keeps its own reason.
  void raiseAbort(occlResult_t reason, bool keepFirst);
  Status validateBuffers(const Collective& c, const void* sendbuf, const void* recvbuf) const;
  // NCCL's in-place position of the two buffers for this rank.
  bool inPlace(const Collective& c, const void* sendbuf, const void* recvbuf) const;
  Result<uint32_t> allocateIndex();
  Result<CollDesc*> tableEntry(uint32_t index);
  Collective* byIndex(uint32_t index) const;
  void setByIndex(uint32_t index, Collective* c);

  void pollerLoop();
  // Takes every CQE published so far and fires what it completes; the caller holds cqMu_.
  // Returns whether it took any.
  bool drainCq();
  // waitAll's first phase: the waiting thread runs the daemon's passes where the backend lets it
  // and drains the CQ itself, until every callback of generation `generation` has fired
  // (returns true), `deadline` passes, or nothing has moved for kHelpSpinUs (comm_poller.cpp).
  using Clock = std::chrono::steady_clock;
  // `readAt`: when the caller read the clock for `deadline` (the first helped pass reuses it).
  bool waitByPolling(int generation, std::optional<Clock::time_point> deadline,
                     std::optional<Clock::time_point> readAt);
  // waitAll for one generation: true once its callbacks have all fired, false at `deadline`.
  bool waitForGeneration(int generation, std::optional<Clock::time_point> deadline,
                         std::optional<Clock::time_point> readAt);
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

  // `failed`: the submission, for a timeout's message to say whom it waited on.
  std::string completionFailure(const Waiting& failed, occlResult_t status);
  void processCqe(uint64_t word);
  void fireInOrder(uint32_t index, std::unique_lock<std::mutex> lock);
  void setAsyncError(occlResult_t code, const std::string& why);
  // Why a call finds the communicator stopped: finalized, aborted or revoked.
  Status stoppedError() const;
  // abort() and revoke(): `why` becomes the asynchronous error's message.
  Status stopAndFail(occlResult_t reason, const std::string& why);

  const int rank_;
  const int nRanks_;
  const int ranksOnThisHost_;
  const int cpusOfThisHostsRanks_;
  const occlConfig_t config_;
  const occlConfig_t requested_;
  const int device_;
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<transport::ConnectorFactory> connectors_;
  // (declared after connectors_: initialised from it) every rank may read every other's buffers
  bool peerReads_;
  bool peerShared_;
  // The host's ranks' yield board (queues/yield_board.hpp; host backend, every peer on this host),
  // and this rank's word on it: its daemon and its helping waiters count their yields there.
  YieldBoard* yieldBoard_;
  YieldWord* yieldWord_;
  AlgorithmLibrary library_;
  std::unique_ptr<bootstrap::Bootstrap> bootstrap_;
  std::unique_ptr<bootstrap::Group> threadGroup_;
  const std::vector<bootstrap::UniqueIdData> spareIds_;
  std::atomic<bool> revoked_{false};

  // Daemon-visible state (Backend::allocShared / allocDaemon).
  DaemonEnv* env_ = nullptr;
  std::vector<std::pair<void*, bool>> allocations_;  // (pointer, shared?)
  std::array<CollDesc*, CollTable::kMaxPages> daemonPages_{};  // what env_->colls.pages holds

  // Registration: collId -> collective, and index -> collective for the poller.
  std::mutex submitMu_;    // the SQ producer lock; also guards byId_ and index allocation
  std::mutex registryMu_;  // guards what the poller touches: collectives and their slots
  absl::flat_hash_map<uint64_t, std::unique_ptr<Collective>> byId_;
  std::array<std::unique_ptr<std::array<Collective*, CollTable::kPageSize>>, CollTable::kMaxPages> hostPages_{};
  uint32_t nextFreshIndex_ = 0;
  std::vector<uint32_t> freeIndices_;  // table indices of deregistered collectives, reused first
  uint64_t sqTicket_ = 0;
  uint64_t sqLimit_ = 0;  // SubmissionQueue::tryPush caches the first ticket it cannot write yet

  // Written under submitMu_ only (addByOneWriter).
  std::atomic<uint64_t> submittedTotal_{0};
  // Written under cqMu_, but by a seq_cst read-modify-write: one side of the handshake with
  // waitAll's waiters_ (fireInOrder).
  std::atomic<uint64_t> firedTotal_{0};
  // Task-queue entries of the submissions whose callbacks have not fired (tasksPerSubmission()
  // each): kept <= taskQueueDepth, so that every block can always take every published SQE.
  // Counted in by the submitter (under submitMu_) and out by the thread firing callbacks (under
  // cqMu_), one writer each.
  std::atomic<uint64_t> tasksIn_{0};
  std::atomic<uint64_t> tasksOut_{0};
  uint64_t queuedTasks() const {
    return tasksIn_.load(std::memory_order_acquire) - tasksOut_.load(std::memory_order_acquire);
  }
  // occlCommWaitAll waits for the submissions made before it, which is not a count of callbacks:
  // those of different collIds fire out of order, and later submissions (a callback's next step,
  // another thread's) may fire first. So submissions are counted by generation, of which there
  // are two: waitAll starts the other one (a compare-and-swap, once an earlier wait's has
  // drained) and waits until the one it left has drained. Counted in under submitMu_ (where
  // generation_ is read, and kept in the callback slot) and out by the thread firing callbacks,
  // under cqMu_. A submission that reads generation_ just before a wait starts the other one
  // overlaps that wait's call, so either generation is right for it.
  std::atomic<int> generation_{0};
  std::array<std::atomic<uint64_t>, 2> generationIn_{};
  std::array<std::atomic<uint64_t>, 2> generationOut_{};
  // Out first: a fire counted out after the look at `in` would otherwise make a pending
  // submission look fired (out never exceeds in).
  uint64_t generationPending(int g) const {
    const uint64_t out = generationOut_[g].load(std::memory_order_seq_cst);
    return generationIn_[g].load(std::memory_order_seq_cst) - out;
  }
  void addSubmitted(uint64_t submissions, uint64_t tasks) {
    addByOneWriter(submittedTotal_, submissions);
    addByOneWriter(tasksIn_, tasks);
    addByOneWriter(generationIn_[generation_.load(std::memory_order_relaxed)], submissions);
  }
  std::mutex waitMu_;
  std::condition_variable waitCv_;
  std::atomic<int> waiters_{0};

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

  std::atomic<occlResult_t> asyncError_{occlSuccess};
  mutable std::mutex errorMu_;
  std::string lastError_;
  std::string asyncWhy_;  // the message of asyncError_, kept apart from later errors
};

}  // namespace occl::host
