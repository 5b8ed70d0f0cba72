#include "host/comm.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <optional>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/group.hpp"
#include "device/coll_types.hpp"
#include "device/gate.hpp"
#include "memory/shared_buffers.hpp"
#include "device/dtypes.hpp"
#include "util/cpus.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace occl::host {
namespace {

// Spin, then yield, then sleep: the SQ is full only while the daemon catches up.
void backoff(int attempt) {
  if (attempt < 64) return;
  if (attempt < 256) {
    std::this_thread::yield();
    return;
  }
  std::this_thread::sleep_for(std::chrono::microseconds(50));
}

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

// Host backend only: a wait on a FIFO sleeps on it (queues/fifo_wait.hpp) after this many yielding
// rounds, and its peer's publish wakes it. A few rounds catch a peer that is about to publish
// (a round-trip between two threads on two cores); past them, a yielding waiter only takes the
// core from the threads it waits for. The GPU never sleeps, and the simt backend emulates it.
uint32_t parkAfterSpins(const backend::Backend& backend) {
  constexpr uint32_t kHostParkAfterSpins = 16;
  return std::string_view(backend.name()) == "host" ? kHostParkAfterSpins : 0;
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
  if (std::string_view(backend.name()) != "host" || connectors == nullptr) return 0;
  for (int peer = 0; peer < nRanks; ++peer)
    if (std::string_view(connectors->transportTo(peer)) == "net") return 0;
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
                         parkAfterSpins(*backend_),
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
    for (auto& entry : byId_) (void)entry.second.release();
    (void)connectors_.release();
    return;
  }
  byId_.clear();
  for (auto& page : hostPages_) page.reset();
  for (CollDesc* page : daemonPages_)
    if (page != nullptr) backend_->freeDaemon(page);
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
    if (!pushSqe(SqeView{kSqeExit, 0, 0, 0, 0, 0}).ok()) {
      raiseAbort(occlAborted, /*keepFirst=*/true);  // an abort already under way keeps its own reason
      setAsyncError(occlAborted, "shutdown: the submission queue stayed full, so pending submissions were failed");
      if (Status s = pushSqe(SqeView{kSqeExit, 0, 0, 0, 0, 0}); !s.ok())
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
  const bool peersAlive = asyncError_.load() == occlSuccess;
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
  setAsyncError(reason, why);
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
  for (const auto& [collId, coll] : byId_) {
    Status s = coll->poisonConnectors(occlRemoteError, coll->completedSeq());
    if (poisoned.ok() && !s.ok()) poisoned = s.withContext(absl::StrFormat("poisoning the connectors of collId 0x%x", collId));
  }
  return poisoned;
}

Status Comm::stoppedError() const {
  if (revoked()) return Status::error(occlInvalidUsage, "the communicator is revoked: shrink it or destroy it");
  return Status::error(occlInvalidUsage, "the communicator is finalized or aborted");
}

std::vector<Comm::Registration> Comm::registrations() {
  std::lock_guard<std::mutex> lock(submitMu_);
  std::vector<Registration> out;
  for (const auto& [collId, coll] : byId_) out.push_back(Registration{collId, coll->userDesc(), coll->requestedAlgorithm()});
  std::sort(out.begin(), out.end(), [](const Registration& a, const Registration& b) { return a.collId < b.collId; });
  return out;
}

void Comm::failFromPeer(const std::string& why) {
  setAsyncError(occlRemoteError, why);
  raiseAbort(occlRemoteError, /*keepFirst=*/true);  // an abort already under way keeps its own reason
  backend_->notifySubmission();  // a parked daemon block must see the flag and fail its tasks
}

// Backend::raiseAbort, recording a failure to write the daemon's copy.
void Comm::raiseAbort(occlResult_t reason, bool keepFirst) {
  if (Status s = backend_->raiseAbort(*env_, static_cast<uint32_t>(reason), keepFirst); !s.ok())
    (void)record(s.withContext("telling the daemon of the abort"));
}

void Comm::setAsyncError(occlResult_t code, const std::string& why) {
  occlResult_t expected = occlSuccess;
  if (!asyncError_.compare_exchange_strong(expected, code)) return;
  std::lock_guard<std::mutex> lock(errorMu_);
  lastError_ = why;
  asyncWhy_ = why;
}

occlResult_t Comm::record(const Status& s) {
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(errorMu_);
    lastError_ = s.message;
  }
  return s.code;
}

std::string Comm::lastError() const {
  std::lock_guard<std::mutex> lock(errorMu_);
  return lastError_;
}

// The table is daemon memory (the daemon reads an entry on every try): the host keeps its own
// list of the pages and writes through copies. A page's pointer is copied in before any SQE can
// name an index on it, so the daemon never reads a slot the host is writing.
Result<CollDesc*> Comm::tableEntry(uint32_t index) {
  const uint32_t p = index >> CollTable::kPageBits;
  if (daemonPages_[p] == nullptr) {
    Result<void*> mem = backend_->allocDaemon(sizeof(CollDesc) * CollTable::kPageSize);
    if (!mem.ok()) return mem.status().withContext("allocating a page of the collective table");
    auto* page = static_cast<CollDesc*>(mem.value());
    if (Status s = backend_->copyToDaemon(&env_->colls.pages[p], &page, sizeof(page)); !s.ok()) {
      backend_->freeDaemon(page);
      return s.withContext("publishing a page of the collective table");
    }
    daemonPages_[p] = page;
  }
  return &daemonPages_[p][index & (CollTable::kPageSize - 1)];
}

Collective* Comm::byIndex(uint32_t index) const {
  const auto& page = hostPages_[index >> CollTable::kPageBits];
  return page ? (*page)[index & (CollTable::kPageSize - 1)] : nullptr;
}

void Comm::setByIndex(uint32_t index, Collective* c) {
  auto& page = hostPages_[index >> CollTable::kPageBits];
  if (!page) page = std::make_unique<std::array<Collective*, CollTable::kPageSize>>();
  (*page)[index & (CollTable::kPageSize - 1)] = c;
}

// An index freed by deregistration is reused at once: no daemon block reads a CollDesc it has no
// part of (pollSubmissions, daemon.hpp), and every part of every submission of a deregistered
// collective has completed.
Result<uint32_t> Comm::allocateIndex() {
  if (!freeIndices_.empty()) {
    const uint32_t index = freeIndices_.back();
    freeIndices_.pop_back();
    return index;
  }
  if (nextFreshIndex_ >= CollTable::kPageSize * CollTable::kMaxPages)
    return Status::error(occlInvalidUsage, absl::StrFormat("more than %d collectives registered at once",
                                                           CollTable::kPageSize * CollTable::kMaxPages));
  return nextFreshIndex_++;
}

Status Comm::registerCollective(uint64_t collId, const occlCollDesc_t& desc) {
  if (stopped_) return stoppedError();
  std::lock_guard<std::mutex> lock(submitMu_);
  // Again under the lock (as submit): a registration that lands after shutdown() has its
  // connectors poisoned by nobody, and a peer would wait on them until its timeout.
  if (stopped_) return stoppedError();
  if (byId_.contains(collId))
    return Status::error(occlInvalidUsage, absl::StrFormat("collId 0x%x is already registered on rank %d", collId, rank_));
  Result<uint32_t> index = allocateIndex();
  if (!index.ok()) return index.status();
  CollectiveSetup setup{rank_,     nRanks_,    &config_,   backend_.get(), connectors_.get(),
                        &library_, peerReads_, peerShared_, yieldBoard_};
  Result<std::unique_ptr<Collective>> coll = Collective::create(setup, collId, index.value(), desc);
  Status published = coll.ok() ? Status::success() : coll.status();
  if (published.ok()) {
    Result<CollDesc*> entry = tableEntry(index.value());
    published = entry.ok() ? coll.value()->publish(entry.value()) : entry.status();
  }
  if (!published.ok()) {
    freeIndices_.push_back(index.value());
    return published;
  }
  if (logEnabled(LogLevel::Trace, LogSubsys::Coll))
    logTrace(LogSubsys::Coll, absl::StrFormat("rank %d registered collId 0x%x: %s, count %d, datatype %s, algorithm %s",
                                              rank_, collId, collTypeName(desc.type), desc.count,
                                              dtypeName(desc.datatype), coll.value()->algorithmName(kFormOutOfPlace)));
  std::lock_guard<std::mutex> registry(registryMu_);
  setByIndex(index.value(), coll.value().get());
  byId_.emplace(collId, std::move(coll.value()));
  return Status::success();
}

Status Comm::deregisterCollective(uint64_t collId) {
  std::lock_guard<std::mutex> lock(submitMu_);
  auto it = byId_.find(collId);
  if (it == byId_.end())
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  if (uint64_t n = it->second->inFlight(); n != 0)
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("collId 0x%x has %d submissions in flight; wait for their callbacks", collId, n));
  std::lock_guard<std::mutex> registry(registryMu_);
  uint32_t index = it->second->index();
  setByIndex(index, nullptr);
  freeIndices_.push_back(index);
  byId_.erase(it);
  return Status::success();
}

Status Comm::pushSqe(const SqeView& e) {
  // The clock starts at the first full SQ: a push that fits reads no clock (one read costs about
  // as much as the push itself).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  for (int attempt = 0; !env_->sq.tryPush(sqTicket_, e, sqLimit_); ++attempt) {
    if (atomics::loadAcquire(env_->hostAbortFlag) != 0 && !(e.flags & kSqeExit))
      return Status::error(occlAborted, "the communicator was aborted");
    const auto now = std::chrono::steady_clock::now();
    if (!deadline) deadline = now + std::chrono::milliseconds(config_.initTimeoutMs);
    if (now > *deadline)
      return Status::error(occlTimeout, "the submission queue stayed full: is the daemon running?");
    backend_->notifySubmission();
    backoff(attempt);
  }
  sqTicket_ += 1;
  return Status::success();
}

Status Comm::validateBuffers(const Collective& c, const void* sendbuf, const void* recvbuf) const {
  const occlCollDesc_t& d = c.userDesc();
  if (c.sendElems() > 0 && sendbuf == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("sendbuf is NULL for collId 0x%x", c.collId()));
  if (c.recvElems() > 0 && recvbuf == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("recvbuf is NULL for collId 0x%x", c.collId()));
  const uint64_t eb = dtypeSize(d.datatype);
  if (d.sharedBuffers == 1) {  // the peer program maps them in other processes
    Collective::BuffersSeen& seen = c.sharedBuffersSeen();
    const uint64_t releases = memory::releases();
    if (!seen.valid || seen.send != sendbuf || seen.recv != recvbuf || seen.releases != releases) {
      for (auto [name, buf, bytes] : {std::tuple{"sendbuf", sendbuf, c.sendElems() * eb},
                                      std::tuple{"recvbuf", static_cast<const void*>(recvbuf), c.recvElems() * eb}}) {
        if (bytes > 0 && memory::describe(buf, bytes).inode == 0)
          return Status::error(occlInvalidArgument,
                               absl::StrFormat("%s of collId 0x%x is not memory from occlMemAlloc holding its %d bytes; "
                                               "the collective was registered with desc.sharedBuffers = 1",
                                               name, c.collId(), bytes));
      }
      seen = {true, sendbuf, recvbuf, releases};
    }
  }
  if (sendbuf == nullptr || recvbuf == nullptr) return Status::success();
  auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
  uint64_t sBytes = c.sendElems() * eb, rBytes = c.recvElems() * eb;
  if (s + sBytes <= r || r + rBytes <= s) return Status::success();  // disjoint
  if (inPlace(c, sendbuf, recvbuf)) return Status::success();  // the only overlap allowed
  return Status::error(occlInvalidArgument,
                       absl::StrFormat("sendbuf and recvbuf of collId 0x%x overlap but are not in place (%s in-place "
                                       "means %s)",
                                       c.collId(), collTypeName(d.type), inPlaceRuleText(d.type)));
}

bool Comm::inPlace(const Collective& c, const void* sendbuf, const void* recvbuf) const {
  const occlCollDesc_t& d = c.userDesc();
  if (sendbuf == nullptr || recvbuf == nullptr) return false;
  const auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
  if (collInfo(d.type).inPlace == InPlaceRule::None) return false;  // e.g. AllToAll: NCCL has none
  const auto [sendAt, recvAt] = inPlaceOffsets(d.type, rank_, d.count);
  const uint64_t eb = dtypeSize(d.datatype);
  return s - sendAt * eb == r - recvAt * eb;
}

Status Comm::submitEntry(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                         Start start, void* stream, uint64_t* seqOut) {
  if (stopped_) return stoppedError();
  if (atomics::loadAcquire(env_->hostAbortFlag) != 0) {
    std::lock_guard<std::mutex> error(errorMu_);
    occlResult_t code = asyncError();  // a peer failed: say which, not "finalized"
    return Status::error(code != occlSuccess ? code : occlInvalidUsage, asyncWhy_);
  }
  std::unique_lock<std::mutex> lock(submitMu_);
  // Again under the lock, which shutdown() takes to push the exit SQE after setting stopped_: a
  // submission that passed the first look while shutdown began would otherwise go in behind the
  // exit SQE, where no daemon reads it, and its callback would never fire.
  if (stopped_) return stoppedError();
  auto it = byId_.find(collId);
  if (it == byId_.end())
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  Collective& c = *it->second;
  if (Status s = validateBuffers(c, sendbuf, recvbuf); !s.ok()) return s;
  if (Status s = backend_->checkUserBuffers(sendbuf, recvbuf); !s.ok()) return s;
  if (c.inFlight() >= c.window())
    return Status::error(occlInProgress,
                         absl::StrFormat("collId 0x%x already has %d submissions in flight (config.maxInflightPerColl); "
                                         "submit again after a callback",
                                         collId, c.window()));
  // A block that cannot take an SQE stops reading the SQ, and a collective a peer waits on may be
  // behind it: so what is outstanding must always fit every block's task queue.
  const uint64_t tasks = c.tasksPerSubmission();
  if (queuedTasks() + tasks > static_cast<uint64_t>(config_.taskQueueDepth))
    return Status::error(occlInProgress,
                         absl::StrFormat("%d submissions are outstanding, %d task-queue entries of "
                                         "config.taskQueueDepth = %d; submit again after a callback",
                                         submittedTotal_.load() - firedTotal_.load(), queuedTasks(),
                                         config_.taskQueueDepth));
  const uint64_t seq = c.nextSeq();
  // The callback is in place before the SQE exists, so a fast completion always finds it: the
  // thread that takes the CQE reads nextSeq first (processCqe), which noteSubmitted releases.
  // No other thread touches this slot now: it was freed (advanceCompleted, a release that
  // inFlight() acquired above), its next CQE cannot come before this SQE, and a poller that saw
  // an undone count (a failed push, below) has let go of registryMu_.
  // A stream opens its gate itself: occlGateOpen refuses it (kGateOpen).
  const uint8_t gate = start == Start::Now ? kGateNone : start == Start::AtGate ? kGateClosed : kGateOpen;
  c.slotFor(seq) =
      CallbackSlot{callback, arg, 0, false, static_cast<uint8_t>(generation_.load(std::memory_order_relaxed)), gate};
  const uint16_t flags = static_cast<uint16_t>((inPlace(c, sendbuf, recvbuf) ? kSqeInPlace : kSqeSubmit) |
                                               (start == Start::Now ? 0 : kSqeGated));
  const SqeView e{flags, c.nParts(), c.index(), seq, reinterpret_cast<uint64_t>(sendbuf),
                  reinterpret_cast<uint64_t>(recvbuf)};
  c.noteSubmitted();
  addSubmitted(1, tasks);
  if (Status s = pushSqe(e); !s.ok()) {
    {
      // Under the poller's lock: a poller that read the count before the undo must be done
      // with this slot before the next submission writes it again (processCqe, fireInOrder
      // read slots under registryMu_ only).
      std::lock_guard<std::mutex> registry(registryMu_);
      c.undoSubmitted();
    }
    addSubmitted(~uint64_t{0}, 0 - tasks);
    return s;
  }
  if (seqOut != nullptr) *seqOut = seq;
  if (start == Start::OnStream) {
    // Under the submit lock, so one stream's submissions open in their submission order. The SQE
    // is out: were its gate never opened, only an abort would fail it, so a stream that cannot
    // take the gate (checkStream passed, so the driver itself refused) aborts the communicator.
    if (Status s = backend_->enqueueGate(stream, c.gateOpenWord(seq), c.gateDoneWord(seq), gateValue(seq)); !s.ok()) {
      lock.unlock();
      const Status failed = s.withContext("occlSubmitOnStream: the submission was queued but its stream refused "
                                          "the gate, so the communicator is aborted");
      setAsyncError(failed.code, failed.message);
      raiseAbort(failed.code, /*keepFirst=*/true);
      backend_->notifySubmission();
      return failed;
    }
  }
  lock.unlock();
  backend_->notifySubmission();
  return Status::success();
}

Result<const std::string*> Comm::algorithmOf(uint64_t collId, bool inPlace) {
  std::lock_guard<std::mutex> lock(submitMu_);
  auto it = byId_.find(collId);
  if (it == byId_.end())
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  return &it->second->algorithmName(inPlace ? kFormInPlace : kFormOutOfPlace);
}

Result<std::vector<occlTimelineEntry_t>> Comm::timeline() {
  const uint32_t depth = env_->timelineDepth;
  if (depth == 0)
    return Status::error(occlInvalidUsage,
                         "config.timelineDepth = 0: this communicator keeps no timeline (set it, or OCCL_TIMELINE_DEPTH)");
  constexpr size_t kRecordWords = sizeof(TimelineRecord) / sizeof(uint64_t);
  std::vector<occlTimelineEntry_t> out;
  const uint64_t slots = timelineSlots(depth);
  std::vector<uint64_t> words(kRecordWords * slots);
  for (uint32_t b = 0; b < env_->nBlocks; ++b) {
    TimelineRing* ring = timelineOf(*env_, static_cast<int>(b));
    uint64_t before = 0, after = 0;
    // The count, the records, the count again: a record is kept if it was complete before the
    // copy and was not overwritten during it (daemon/timeline.hpp).
    // (A seqlock's reader: the fences order the record loads after the first count and before the
    // second, where the daemon memory is this process's.)
    if (Status s = backend_->readDaemonWords(&before, &ring->count, 1); !s.ok()) return s;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Status s = backend_->readDaemonWords(words.data(), ring->records()[0].words, words.size()); !s.ok()) return s;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (Status s = backend_->readDaemonWords(&after, &ring->count, 1); !s.ok()) return s;
    const uint64_t untouched = after >= slots ? after - slots + 1 : 0;
    const uint64_t newest = before >= depth ? before - depth : 0;
    for (uint64_t i = std::max(untouched, newest); i < before; ++i) {
      const uint64_t* w = &words[(i % slots) * kRecordWords];
      occlTimelineEntry_t e{};
      e.collId = w[kTlCollId];
      e.seq = w[kTlSeq];
      e.takenNs = w[kTlTaken];
      e.startedNs = w[kTlStarted];
      e.firstDataNs = w[kTlFirstData];
      e.lastDataNs = w[kTlLastData];
      e.doneNs = w[kTlDone];
      e.part = static_cast<uint32_t>(w[kTlPartFlags]);
      e.completed = (w[kTlPartFlags] >> 32) & kTimelineWroteCqe ? 1 : 0;
      out.push_back(e);
    }
  }
  return out;
}

Result<occlCollStats_t> Comm::collectiveStats(uint64_t collId) {
  std::lock_guard<std::mutex> lock(submitMu_);
  auto it = byId_.find(collId);
  if (it == byId_.end())
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  return it->second->stats(*backend_);
}

}  // namespace occl::host
