// A communicator's lifecycle: building its daemon's state and starting it, the poller and the
// board (create, start), and stopping them (shutdown; finalize, abort, revoke, a peer's failure,
// destruction).
#include "host/comm.hpp"

#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/group.hpp"
#include "util/cpus.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace occl::host {
namespace {

// A host daemon's spin round yields the core, and a yield costs as much as the other runnable
// threads on that core take; with 8 ranks on 2 cores, thousands of rounds on an absent peer last
// tens of milliseconds and starve the ranks that could progress. So host rounds are also bounded
// in time, at the length of a GPU round (a 64 ns sleep), and the spin thresholds mean about the
// same time on both backends. The GPU's rounds are that fixed sleep: counting them is enough.
// The simt backend's lanes are host threads too, and are bounded like the host's.
uint32_t spinRoundNs(const backend::Backend& backend) {
  constexpr uint32_t kHostSpinRoundNs = 64;
  return std::string_view(backend.name()) == "cuda" ? 0 : kHostSpinRoundNs;
}

// How often a running try looks for new submissions between tiles (SpinBudget::arrivalEveryTiles).
// The CUDA daemon reads the SQ across PCIe, 1-2 us a look on the H200, which was as much as a
// 128 KiB tile's other overhead: it looks once per MiB of tiles (every 8th of 128 KiB, every one
// of the GPU's default 1 MiB), a few percent of a one-block copy of that MiB, and an arrival waits
// at most that MiB. The simt backend does as the GPU (it counts the looks as crossings); the host
// daemon reads the SQ from its own memory: every tile.
uint32_t arrivalEveryTiles(const backend::Backend& backend, uint64_t slotBytes) {
  constexpr uint64_t kGpuArrivalLookBytes = uint64_t{1} << 20;
  if (std::string_view(backend.name()) == "host" || slotBytes == 0 || slotBytes >= kGpuArrivalLookBytes) return 1;
  return static_cast<uint32_t>(kGpuArrivalLookBytes / slotBytes);
}

// Which round of every 64 a wait that is not ready looks for new submissions
// (SpinBudget::arrivalLookRound): the first on the host backend, whose SQ is its own memory; the
// last on the kernel backends, whose look is a read across the bus (simt counts it as one).
uint32_t arrivalLookRound(const backend::Backend& backend) {
  return std::string_view(backend.name()) == "host" ? 0 : 63;
}

// Whether any peer is reached over the NET connector, whose proxy threads the host daemon's waits
// need beside it (parkAfterSpins, spinInPlaceNs).
bool hasNetPeer(const transport::ConnectorFactory& connectors, int nRanks) {
  for (int peer = 0; peer < nRanks; ++peer)
    if (std::string_view(connectors.transportTo(peer)) == "net") return true;
  return false;
}

// Host backend with a NET peer only: a wait on a FIFO sleeps on it (queues/fifo_wait.hpp) after
// this many yielding rounds, and its peer's publish wakes it. A few rounds catch a peer that is
// about to publish; past them, a yielding waiter takes the core from the NET proxy threads the
// waits need (4 ranks on 2 namespace hosts: a quarter of the CPU in sched_yield, 8 B 704 -> 381
// us when the waits slept). Between ranks of one host (shared memory, in-process) every thread a
// wait needs is a daemon thread that yields too, and a sleep costs its waker a futex wake and its
// CPU an idle gap: 5 interleaved runs on this 2-vCPU VM, waits that never sleep against waits
// that sleep after 16 rounds (medians): the MoE exchange of 8 processes 0.63-0.92 of the time
// (4 to 1024 tokens), of 8 threads 0.65-1.00; AllReduce of 8 processes 0.55-0.96, of 4 processes
// 0.56-0.97, of 8 threads 0.89-1.17 (8 B to 8 MiB; bench/results/park-2026-11-30.md). The GPU
// never sleeps, and the simt backend emulates it.
uint32_t parkAfterSpins(const backend::Backend& backend, const transport::ConnectorFactory* connectors, int nRanks) {
  constexpr uint32_t kHostParkAfterSpins = 16;
  if (std::string_view(backend.name()) != "host" || connectors == nullptr) return 0;
  return hasNetPeer(*connectors, nRanks) ? kHostParkAfterSpins : 0;
}

// Host backend only: how long a wait spins on its core before it yields (SpinBudget::spinInPlaceNs),
// where the daemon threads of this host's ranks are no more than the CPUs those ranks may run on
// together (`hostCpus`: the union of their affinity masks, which daemon threads inherit from the
// thread that creates the communicator; 0 = this thread's mask): then the thread a wait
// needs is running on another core, and a yield is a system call (microseconds on this
// project's VM) that only delays seeing its write. 2 ranks on 2 cores, 8 B AllReduce: 3.0-3.7
// us yielding, 1.5-2.8 us spinning. With more threads than cores a spin holds the core a
// waited-for rank needs: 4 ranks on 2 cores went from 15-22 us to 62-72 us (there a wait spins
// only while the rank it waits for is on a CPU: queues/yield_board.hpp). Never with NET
// peers, whose proxy threads the waits also need. Not seen: other communicators' threads and a
// cgroup's CPU quota; the spin is bounded, so they cost at most 2 us per wait. Ranks bound to a
// core each (mpirun -np 2's default) have one-CPU masks but still a core each.
uint32_t spinInPlaceNs(const backend::Backend& backend, const transport::ConnectorFactory* connectors, int nRanks,
                       int daemonThreadsOnThisHost, int hostCpus) {
  constexpr uint32_t kHostSpinInPlaceNs = 2000;
  if (std::string_view(backend.name()) != "host" || connectors == nullptr || hasNetPeer(*connectors, nRanks)) return 0;
  int usable = hostCpus;
  if (usable <= 0) {
    const cpu_set_t own = threadCpus();
    usable = CPU_COUNT(&own);
  }
  return daemonThreadsOnThisHost <= usable ? kHostSpinInPlaceNs : 0;
}

// Peer reads (primitives/peer_read.hpp) need every rank in this process, reading host memory:
// the host backend with every peer's connectors in-process. Every rank then sees the same, so
// all of them choose the same programs.
// With shmToo, "shm" peers count as well: processes of this host, which reach each other's
// occlMemAlloc buffers (desc.sharedBuffers, memory/shared_buffers.hpp).
bool ranksShareMemory(const backend::Backend* backend, const transport::ConnectorFactory* connectors, int rank,
                      int nRanks, bool shmToo) {
  if (backend == nullptr || connectors == nullptr || std::string_view(backend->name()) != "host") return false;
  for (int peer = 0; peer < nRanks; ++peer) {
    const std::string_view t = connectors->transportTo(peer);
    if (peer != rank && t != "in-process" && !(shmToo && t == "shm")) return false;
  }
  return true;
}

// The yield board of a host daemon whose peers all share one (transport/connector.hpp): the only
// daemon whose blocks are threads that yield.
YieldBoard* yieldBoardFor(backend::Backend* backend, transport::ConnectorFactory* connectors) {
  if (backend == nullptr || connectors == nullptr || std::string_view(backend->name()) != "host") return nullptr;
  return connectors->yieldBoard();
}

// config.daemonBlocks = 0 (auto) becomes the backend's choice, which occlCommGetConfig reports.
occlConfig_t withBackendsBlocks(occlConfig_t config, const backend::Backend* backend) {
  if (backend != nullptr) config.daemonBlocks = backend->daemonBlocks();
  return config;
}

}  // namespace

Comm::Comm(CommOptions& o)
    : rank_(o.rank),
      nRanks_(o.nRanks),
      ranksOnThisHost_(o.ranksOnThisHost),
      cpusOfThisHostsRanks_(o.cpusOfThisHostsRanks),
      config_(withBackendsBlocks(o.config, o.backend.get())),
      requested_(o.requested),
      device_(o.device),
      backend_(std::move(o.backend)),
      checksUserBuffers_(backend_->checksUserBuffers()),
      connectors_(std::move(o.connectors)),
      peerReads_(ranksShareMemory(backend_.get(), connectors_.get(), rank_, nRanks_, /*shmToo=*/false)),
      peerShared_(o.shmPeersSharePids && ranksShareMemory(backend_.get(), connectors_.get(), rank_, nRanks_, /*shmToo=*/true)),
      yieldBoard_(yieldBoardFor(backend_.get(), connectors_.get())),
      yieldWord_(yieldBoard_ != nullptr ? yieldBoard_->of(rank_) : nullptr),
      bootstrap_(std::move(o.bootstrap)),
      threadGroup_(std::move(o.threadGroup)),
      spareIds_(std::move(o.spareIds)) {}

bootstrap::Group& Comm::setupGroup() const {
  if (bootstrap_) return *bootstrap_;
  return *threadGroup_;
}

Result<std::unique_ptr<Comm>> Comm::create(CommOptions options) {
  if (options.nRanks < 1)
    return Status::error(occlInvalidArgument, absl::StrFormat("nranks = %d: expected >= 1", options.nRanks));
  if (options.rank < 0 || options.rank >= options.nRanks)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank = %d: expected 0..%d (nranks = %d)", options.rank, options.nRanks - 1, options.nRanks));
  if (!options.bootstrap && !options.threadGroup)
    return Status::error(occlInternalError, "a communicator needs a group to meet its ranks through");
  std::unique_ptr<Comm> comm(new Comm(options));
  if (Status s = comm->allocateDaemonState(); !s.ok()) return s;
  if (Status s = comm->start(); !s.ok()) return s;
  if (logEnabled(LogLevel::Info, LogSubsys::Init)) logInfo(LogSubsys::Init, comm->describe());
  return comm;
}

std::string Comm::describe() const {
  std::string peers;
  constexpr int kPeersNamed = 16;
  for (int p = 0; p < nRanks_ && p < kPeersNamed; ++p)
    absl::StrAppend(&peers, p == 0 ? "" : ", ", p, " ", p == rank_ ? "self" : transportTo(p));
  if (nRanks_ > kPeersNamed) absl::StrAppend(&peers, ", ...");
  return absl::StrFormat("rank %d of %d ready: backend %s, %d daemon block(s)%s, %s; peers: %s", rank_, nRanks_,
                         backend_->name(), config_.daemonBlocks,
                         device_ >= 0 ? absl::StrFormat(" on CUDA device %d", device_) : std::string(),
                         bootstrap_ ? "ranks are processes" : "ranks are threads of this process", peers);
}

Status Comm::allocateDaemonState() {
  auto shared = [&](size_t bytes) -> Result<void*> {
    Result<void*> p = backend_->allocShared(bytes);
    if (p.ok()) allocations_.emplace_back(p.value(), true);
    return p;
  };
  auto daemon = [&](size_t bytes) -> Result<void*> {
    Result<void*> p = backend_->allocDaemon(bytes);
    if (p.ok()) allocations_.emplace_back(p.value(), false);
    return p;
  };
  const auto nBlocks = static_cast<uint32_t>(config_.daemonBlocks);
  Result<void*> env = shared(sizeof(DaemonEnv));
  Result<void*> sq = shared(sizeof(Sqe) * config_.sqDepth);
  Result<void*> cq = shared(sizeof(uint64_t) * config_.cqDepth * nBlocks);  // one ring per block
  Result<void*> cqHeads = shared(sizeof(uint64_t) * CompletionQueue::kHeadStride * nBlocks);  // a line per ring
  Result<void*> reports = shared(sizeof(BlockReport) * nBlocks);
  Result<void*> counters = shared(2 * 64);  // SQEs published, the host's abort flag: one line each
  Result<void*> pages = daemon(sizeof(CollDesc*) * CollTable::kMaxPages);
  Result<void*> blocks = daemon(sizeof(BlockState) * nBlocks);
  Result<void*> tasks = daemon(sizeof(TaskEntry) * config_.taskQueueDepth * nBlocks);
  Result<void*> abortCopy = daemon(64);  // the daemon's copy of the abort flag
  // Kernel backends with several blocks fan out (daemon.hpp): only block 0 reads the SQ.
  const bool fanOut = backend_->daemonIsKernel() && nBlocks > 1;
  Result<void*> relay = daemon(fanOut ? sizeof(Sqe) * config_.sqDepth + 64 : 64);  // slots, then its published count
  const auto timelineDepth = static_cast<uint32_t>(config_.timelineDepth);
  Result<void*> timeline =
      daemon(timelineDepth != 0 ? sizeof(TimelineRing) * timelineRingLines(timelineDepth) * nBlocks : 64);
  for (const Result<void*>* r :
       {&env, &sq, &cq, &cqHeads, &reports, &counters, &pages, &blocks, &tasks, &abortCopy, &relay, &timeline})
    if (!r->ok()) return r->status();

  DaemonEnv e{};
  auto* counterBase = static_cast<char*>(counters.value());
  auto* blockReports = static_cast<BlockReport*>(reports.value());
  e.sq = SubmissionQueue{static_cast<Sqe*>(sq.value()), blockReports, reinterpret_cast<uint64_t*>(counterBase),
                         static_cast<uint32_t>(config_.sqDepth), fanOut ? 1u : nBlocks};
  if (fanOut) {
    auto* relaySlots = static_cast<Sqe*>(relay.value());
    e.relay = SubmissionQueue{relaySlots, blockReports + 1, reinterpret_cast<uint64_t*>(relaySlots + config_.sqDepth),
                              static_cast<uint32_t>(config_.sqDepth), nBlocks - 1};
    e.fanOut = 1;
  }
  e.cq = CompletionQueue{static_cast<uint64_t*>(cq.value()), static_cast<uint64_t*>(cqHeads.value()), blockReports,
                         static_cast<uint32_t>(config_.cqDepth), nBlocks};
  e.colls = CollTable{static_cast<CollDesc**>(pages.value())};
  e.blocks = static_cast<BlockState*>(blocks.value());
  e.nBlocks = nBlocks;
  e.policy = SchedPolicy{static_cast<uint32_t>(config_.orderPolicy), static_cast<uint32_t>(config_.spinPolicy),
                         config_.spinThresholdMax, config_.spinThresholdMin, config_.spinThresholdStep,
                         config_.spinThresholdBoost, config_.priorityPollInterval,
                         static_cast<uint32_t>(config_.forcePreempt != 0),
                         static_cast<uint32_t>(config_.disablePreemption != 0), spinRoundNs(*backend_),
                         parkAfterSpins(*backend_, connectors_.get(), nRanks_),
                         spinInPlaceNs(*backend_, connectors_.get(), nRanks_, ranksOnThisHost_ * config_.daemonBlocks,
                                       cpusOfThisHostsRanks_),
                         arrivalEveryTiles(*backend_, config_.connectorSlotBytes), arrivalLookRound(*backend_)};
  e.abortFlag = static_cast<uint32_t*>(abortCopy.value());
  e.timeline = static_cast<TimelineRing*>(timeline.value());
  e.timelineDepth = timelineDepth;
  e.hostAbortFlag = reinterpret_cast<uint32_t*>(counterBase + 64);
  // Block states are daemon memory: built here and copied, as the host never dereferences them.
  std::vector<BlockState> initial(nBlocks);
  for (uint32_t b = 0; b < nBlocks; ++b) {
    BlockState& bs = initial[b];
    bs.tasks = static_cast<TaskEntry*>(tasks.value()) + static_cast<size_t>(b) * config_.taskQueueDepth;
    bs.report = &blockReports[b];
    bs.capacity = static_cast<uint32_t>(config_.taskQueueDepth);
  }
  if (Status s = backend_->copyToDaemon(e.blocks, initial.data(), sizeof(BlockState) * nBlocks); !s.ok())
    return s.withContext("initialising the daemon's block states");
  env_ = static_cast<DaemonEnv*>(env.value());
  *env_ = e;
  return Status::success();
}

Status Comm::start() {
  backend_->useYieldBoard(yieldBoard_, rank_);
  if (Status s = backend_->start(env_); !s.ok()) return s;
  started_ = true;
  cqHeads_.assign(env_->cq.nRings, 0);
  try {
    poller_ = std::thread([this] {
      nameThisThread("occl-poller");
      pollerLoop();
    });
  } catch (const std::system_error& e) {
    shutdown();  // the daemon leaves; no poller to join
    return Status::error(occlSystemError, absl::StrFormat("starting the poller thread failed: %s", e.what()));
  }
  setupGroup().setBoardSource([this](std::vector<bootstrap::BoardEntry>& out) { return fillBoard(out); });
  return Status::success();
}

Comm::~Comm() {
  if (started_ && !stopped_) (void)abort(occlAborted);
  shutdown();
  // This rank's spare rendezvous, unless a shrink's new rank 0 (this process) took it.
  if (static_cast<size_t>(rank_) < spareIds_.size()) bootstrap::discardUniqueId(spareIds_[static_cast<size_t>(rank_)]);
  if (backend_->daemonMayStillRun()) {
    // Its stop timed out (reported then): the daemon may still read the collectives' connectors,
    // plans and tables, so they leak with the backend's own memory instead of being freed under it.
    registry_.leak();
    (void)connectors_.release();
    return;
  }
  registry_.clear(*backend_);
  for (auto [p, isShared] : allocations_) isShared ? backend_->freeShared(p) : backend_->freeDaemon(p);
}

void Comm::shutdown() {
  // The group's thread reads this rank's table no more (the group may outlive this communicator).
  if (started_) setupGroup().setBoardSource({});
  if (!started_ || stopped_.exchange(true)) return;
  {
    // An SQ that stayed full for initTimeoutMs holds tasks that cannot finish: aborted, the daemon
    // fails them and drains the SQ, and the second push gets in. Should that fail too, the abort
    // flag alone lets the daemon leave once it holds no task (Backend::stop).
    std::lock_guard<std::mutex> lock(submitMu_);
    if (!pushSqe(SqeView{kSqeExit, 0, 0, 0, 0, 0, 0}).ok()) {
      raiseAbort(occlAborted, /*keepFirst=*/true);  // an abort already under way keeps its own reason
      errors_.setAsync(occlAborted, "shutdown: the submission queue stayed full, so pending submissions were failed");
      if (Status s = pushSqe(SqeView{kSqeExit, 0, 0, 0, 0, 0, 0}); !s.ok())
        (void)record(s.withContext("shutdown: the daemon did not take the exit request"));
    }
  }
  backend_->notifySubmission();
  (void)backend_->stop();
  stopPoller_.store(true, std::memory_order_release);
  if (poller_.joinable()) poller_.join();
  if (bootstrap_) (void)bootstrap_->close();
}

Status Comm::finalize() {
  if (inCallback())
    return Status::error(occlInvalidUsage, "occlCommFinalize called from a callback: it would wait for itself");
  // A revoked communicator has nothing left to wait for: finalize then destroy, as for any other.
  if (stopped_) return revoked() ? Status::success() : Status::error(occlInvalidUsage, "the communicator is already finalized or aborted");
  int64_t timeout = config_.collTimeoutMs > 0 ? config_.collTimeoutMs : -1;
  Status waited = waitAll(timeout);
  if (!waited.ok()) {
    (void)abort(occlTimeout);
    return waited;
  }
  // Ranks in other processes: once every rank is here, every connector a peer will ever join has
  // been joined, so destroying the communicator may remove the shm segments that were not. After
  // a peer failure there is no one to wait for: finalize stops locally.
  const bool peersAlive = errors_.async(std::memory_order_seq_cst) == occlSuccess;
  Status together = bootstrap_ && peersAlive ? bootstrap_->barrier() : Status::success();
  shutdown();
  return together.withContext("occlCommFinalize: waiting for every rank to finalize");
}

Status Comm::abort(occlResult_t reason) {
  return stopAndFail(reason, reason == occlAborted ? "the communicator was aborted"
                                                   : "finalize timed out: pending submissions were failed");
}

Status Comm::revoke() {
  if (revoked_.exchange(true, std::memory_order_acq_rel))
    return Status::error(occlInvalidUsage, "the communicator is already revoked");
  if (stopped_) return Status::success();  // finalized or aborted already: nothing left to fail
  return stopAndFail(occlAborted, "the communicator was revoked (occlCommRevoke)");
}

Status Comm::stopAndFail(occlResult_t reason, const std::string& why) {
  logInfo(LogSubsys::Init, absl::StrFormat("rank %d of %d: %s", rank_, nRanks_, why));
  errors_.setAsync(reason, why);
  raiseAbort(reason, /*keepFirst=*/false);
  shutdown();
  // The daemon poisoned the connectors of what was pending; those of every other registered
  // collective go too, or a peer that submits one later would wait for this rank until its timeout.
  // From the oldest submission whose callback has not fired: normally every one has (the daemon
  // failed and poisoned what was pending, and shutdown() drained the CQ), but a daemon whose stop
  // gave up (a kernel fault, the stop timeout) left its pending ones unpoisoned.
  releaseGateWaiters();
  std::lock_guard<std::mutex> lock(submitMu_);
  Status poisoned;
  for (const auto& [collId, coll] : registry_) {
    Status s = coll->poisonConnectors(occlRemoteError, coll->completedSeq());
    if (poisoned.ok() && !s.ok()) poisoned = s.withContext(absl::StrFormat("poisoning the connectors of collId 0x%x", collId));
  }
  return poisoned;
}

Status Comm::stoppedError() const {
  if (revoked()) return Status::error(occlInvalidUsage, "the communicator is revoked: shrink it or destroy it");
  return Status::error(occlInvalidUsage, "the communicator is finalized or aborted");
}

void Comm::failFromPeer(const std::string& why) {
  errors_.setAsync(occlRemoteError, why);
  raiseAbort(occlRemoteError, /*keepFirst=*/true);  // an abort already under way keeps its own reason
  backend_->notifySubmission();  // a parked daemon block must see the flag and fail its tasks
}

// Backend::raiseAbort, recording a failure to write the daemon's copy.
void Comm::raiseAbort(occlResult_t reason, bool keepFirst) {
  if (Status s = backend_->raiseAbort(*env_, static_cast<uint32_t>(reason), keepFirst); !s.ok())
    (void)record(s.withContext("telling the daemon of the abort"));
}

}  // namespace occl::host
