// A backend decides where the daemon's memory lives and how the daemon runs: threads of this
// process (host backend), a persistent CUDA kernel (cuda backend), or that kernel's device code
// on emulated blocks of host threads (simt backend). The communicator builds the same DaemonEnv
// for all three.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_format.h"
#include "daemon/daemon.hpp"
#include "occl/occl.h"
#include "queues/yield_board.hpp"
#include "util/status.hpp"

namespace occl::backend {

class Backend {
 public:
  virtual ~Backend() = default;

  // Zeroed memory that both the host and the daemon read and write (SQ, CQ, block reports, the
  // host's abort flag): host memory, or pinned host-mapped memory on the GPU.
  virtual Result<void*> allocShared(size_t bytes) = 0;
  // Zeroed memory the daemon owns (block states, the collective table, programs, contexts,
  // statistics, scratch); device memory on the GPU, which the host reaches only by copies.
  virtual Result<void*> allocDaemon(size_t bytes) = 0;
  virtual Status copyToDaemon(void* dst, const void* src, size_t bytes) = 0;
  virtual Status copyFromDaemon(void* dst, const void* src, size_t bytes) = 0;
  // Reads `n` words of daemon memory that the daemon keeps updating with relaxed stores (the
  // statistics), without stopping it: each word whole, the set not as one snapshot.
  virtual Status readDaemonWords(uint64_t* dst, const uint64_t* src, size_t n) {
    for (size_t i = 0; i < n; ++i) dst[i] = atomics::loadRelaxed(const_cast<uint64_t*>(src + i));
    return Status::success();
  }
  // Writes one word of daemon memory that the daemon may be reading (the abort flag's copy), without
  // stopping it.
  virtual Status writeDaemonWord(uint32_t* dst, uint32_t value) {
    atomics::storeRelease(dst, value);
    return Status::success();
  }
  // Sets the communicator's abort flag, env.hostAbortFlag (`keepFirst`: an abort already under way
  // keeps its own reason), then the daemon's copy of it (env.abortFlag, writeDaemonWord), which the
  // daemon reads without a bus crossing: to whatever the host's flag says under abortMu_, so
  // concurrent raisers (the API, a peer's failure, a backend's own fault) leave the copy equal to it.
  Status raiseAbort(const DaemonEnv& env, uint32_t reason, bool keepFirst) {
    std::lock_guard<std::mutex> lock(abortMu_);
    if (keepFirst) {
      uint32_t expected = 0;
      atomics::compareExchange(env.hostAbortFlag, expected, reason);
    } else {
      atomics::storeRelease(env.hostAbortFlag, reason);
    }
    return writeDaemonWord(env.abortFlag, atomics::loadAcquire(env.hostAbortFlag));
  }
  virtual void freeShared(void* p) = 0;
  virtual void freeDaemon(void* p) = 0;

  // Whether the daemon can address memory the user gives it (NULL is skipped): a GPU daemon given
  // plain host memory would fault and take the CUDA context down with it. `name` names the
  // argument in the error. checkUserBuffers: a submission's two buffers and the bytes it reads or
  // writes in each; one it does not touch is not checked, since it may point anywhere (a block of
  // 0 elements at the end of an allocation points one past it).
  virtual Status checkUserBuffer(const void* p, const char* name) const { return Status::success(); }
  // Whether checkUserBuffer looks at anything: the submit path skips both calls where it does not.
  virtual bool checksUserBuffers() const { return false; }
  Status checkUserBuffers(const void* sendbuf, uint64_t sendBytes, const void* recvbuf, uint64_t recvBytes) const {
    if (sendBytes > 0)
      if (Status s = checkUserBuffer(sendbuf, "sendbuf"); !s.ok()) return s;
    return recvBytes > 0 ? checkUserBuffer(recvbuf, "recvbuf") : Status::success();
  }

  // Starts the daemon over `env` (which lives in shared memory and outlives the daemon).
  virtual Status start(DaemonEnv* env) = 0;
  // A new SQE was published: wake a parked daemon (host) or relaunch a quit one (cuda).
  virtual void notifySubmission() = 0;
  // The poller found nothing: parks it until a CQE waits in the CQ (CompletionQueue::anyWaiting)
  // or `timeoutUs` passes. `outstanding()`: whether submissions wait for their CQEs, which turns
  // true before the submission's notifySubmission().
  virtual void waitForCompletion(int64_t timeoutUs, absl::FunctionRef<bool()> outstanding) = 0;
  // A thread waiting for completions (Comm::waitAll) may lend itself to the daemon: between
  // beginHelp and endHelp it calls help(), which runs one daemon pass where the daemon's own
  // thread would, and the daemon's threads stand aside. Only a daemon of host threads can be
  // helped, and only one whose waits end (not with preemption disabled): canHelp. `workLeft` at
  // endHelp says whether the daemon must take over again now.
  struct HelpResult {
    bool ran = false;         // a pass ran (false: a daemon thread was in it, or the daemon retired)
    bool progressed = false;  // it moved something (PassResult::progressed)
  };
  // `deadlineNs` (steady clock; 0 = none): the pass preempts what still waits by then.
  // `clockNs`: a reading of the steady clock the caller has just taken, which the pass uses as
  // its first (daemon.hpp, PassClock), or 0: it reads its own. Comm::waitAll passes the reading
  // it took for its deadline to its first pass, when it has a timeout.
  virtual bool canHelp() const { return false; }
  virtual void beginHelp() {}
  virtual HelpResult help(uint64_t deadlineNs, uint64_t clockNs) { return {}; }
  virtual void endHelp(bool workLeft) {}
  // Before start(): the yield board of the communicator's ranks of this host and this rank
  // (queues/yield_board.hpp), or nullptr. The host backend's threads count their yields on it and
  // spin for a peer that is on a CPU; blocks that are not host threads of their own ignore it.
  virtual void useYieldBoard(YieldBoard* board, int rank) {}
  // Joins the daemon after the exit SQE (or the abort flag) has been published.
  virtual Status stop() = 0;
  // After stop(): whether a daemon that did not exit in time may still run (a kernel backend's
  // stop is bounded), so that what it reads must leak rather than be freed under it.
  virtual bool daemonMayStillRun() { return false; }

  virtual const char* name() const = 0;

  // Stream-ordered submission (occlSubmitOnStream, device/gate.hpp). checkStream: whether
  // `stream` is one this backend can order a submission on. enqueueGate: enqueues on `stream` a
  // write of `value` to `open` after the stream's earlier work, then a wait until `done` reaches
  // `value` (cyclic) before its later work. Both words are daemon memory. Only the CUDA backend
  // has streams.
  virtual Status checkStream(void* stream) {
    (void)stream;
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("occlSubmitOnStream needs a CUDA rank: this communicator runs on the %s "
                                         "backend; submit with occlSubmitGated and open the gate with occlGateOpen "
                                         "once the input is ready",
                                         name()));
  }
  virtual Status enqueueGate(void* stream, uint32_t* open, const uint32_t* done, uint32_t value) {
    (void)open, (void)done, (void)value;
    return checkStream(stream);
  }

  // The daemon's blocks: config.daemonBlocks, or the backend's choice where it is 0 (auto).
  virtual int daemonBlocks() const = 0;
  // Whether the daemon is a kernel (the CUDA backend, and simt, which runs the same device code):
  // its blocks are many and cheap, and shared memory lies across a bus. A collective that names no
  // block count is then split into parts by its size (host/algorithms.hpp: partsFor), not over
  // every daemon block as host threads are, and only block 0 reads the SQ (daemon.hpp: fan-out).
  virtual bool daemonIsKernel() const { return false; }

 private:
  std::mutex abortMu_;  // raiseAbort
};

std::unique_ptr<Backend> makeHostBackend(const occlConfig_t& config);
Result<std::unique_ptr<Backend>> makeSimtBackend(const occlConfig_t& config);
#if OCCL_HAVE_CUDA
Result<std::unique_ptr<Backend>> makeCudaBackend(const occlConfig_t& config, int device);
#endif

}  // namespace occl::backend
