// The host's record of one registered collective: its daemon-side static context (program,
// connectors, scratch, per-block contexts) and the host-side submission bookkeeping (callbacks
// waiting for their CQE, in submission order).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "device/chunk_geometry.hpp"
#include "device/coll_desc.hpp"
#include "host/algorithm_library.hpp"
#include "host/premul_ops.hpp"
#include "host/submit_line.hpp"
#include "host/vec_layout.hpp"
#include "ir_loader/program.hpp"
#include "occl/occl.h"
#include "queues/yield_board.hpp"
#include "transport/connector.hpp"
#include "util/one_writer.hpp"
#include "util/status.hpp"

namespace occl::host {

// A submission's callback slot. Its state is the one word both sides touch without a common lock,
// so that a completion need not read the submission side's line (SubmitLine) to know which slots
// hold a submission:
//   Free -> Armed: the submission side (submit lock), once it wrote the other fields, before the
//                  SQE; a release, which the completion side's acquire of Armed pairs with.
//   Armed -> Done: the completion side (CQ lock) at the CQE, which wrote `status`; the callback
//                  waits there while an earlier submission of the collective is still running.
//   Done -> Free:  the completion side, after copying the slot, before advanceCompleted (whose
//                  release frees the slot for the submission side's windowFits). A Free slot's
//                  other fields are stale: the next arming writes them all.
// An armed submission is never taken back: the SQ has room for its SQE before it is armed.
enum class SlotState : uint8_t { Free, Armed, Done };
struct CallbackSlot {
  occlCallback_t fn = nullptr;
  void* arg = nullptr;
  uint32_t status = 0;
  std::atomic<SlotState> state{SlotState::Free};
  uint8_t generation = 0;  // of occlCommWaitAll's (host/wait_generations.hpp) when it was submitted
  uint8_t gate = 0;        // GateState (device/gate.hpp) as the host knows it, under the submit lock
};

struct CollectiveSetup {
  int rank;
  int nRanks;
  const occlConfig_t* config;
  backend::Backend* backend;
  transport::ConnectorFactory* connectors;
  AlgorithmLibrary* library;
  bool peerReads;   // ranks share an address space and host memory (comm.cpp): the peer AllReduce may run
  bool peerShared;  // host backend, every peer in-process or shm: it may run on occlMemAlloc buffers
  YieldBoard* yieldBoard;  // the ranks' yield board (comm.hpp), or nullptr: FIFOs then name no ranks
};

class Collective {
 public:
  // Builds everything the daemon needs; nothing is visible to the daemon until publish().
  // `resolved` is the caller's `user` description with a PreMulSum handle resolved
  // (host/premul_ops.hpp); userDesc() keeps the handle as the caller passed it.
  static Result<std::unique_ptr<Collective>> create(const CollectiveSetup& setup, uint64_t collId, uint32_t index,
                                                    const occlCollDesc_t& user, const ResolvedOp& resolved);
  ~Collective();
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  // Copies the static context into the communicator's table entry (daemon memory).
  Status publish(CollDesc* tableEntry);

  uint64_t collId() const { return desc_.collId; }
  uint32_t index() const { return line_.index; }
  // Its parts (program blocks), which each SQE names (SqeView::nParts).
  uint16_t nParts() const { return line_.nParts; }
  // Whether a submission of `count` runs the small-message form (kFormSmall): a variable count up
  // to CollDesc::smallCount. Its SQE then names the small form's parts.
  bool runsSmall(uint64_t count) const { return count <= desc_.smallCount && desc_.smallCount != 0; }
  uint16_t smallParts() const { return static_cast<uint16_t>(desc_.forms[kFormSmall].nParts); }
  // The small form's bound and algorithm (occlCollGetSmallForm): 0 and "" where it has none.
  uint64_t smallCount() const { return desc_.smallCount; }
  bool hasSmallForm() const { return (line_.flags & kLineSmallForm) != 0; }
  const std::string& smallAlgorithm() const { return smallAlgorithm_; }
  const occlCollDesc_t& userDesc() const { return user_; }
  // desc.count and desc.sharedBuffers, from the submission's line (userDesc() has them too).
  uint64_t registeredCount() const { return line_.count; }
  bool sharedBuffers() const { return (line_.flags & kLineSharedBuffers) != 0; }
  // desc.algorithm as registered ("" for NULL): userDesc() holds no pointer to it.
  const std::string& requestedAlgorithm() const { return requestedAlgorithm_; }
  // FNV-1a of requestedAlgorithm(), for the status board's signature (host/comm_pending.cpp),
  // which reads it every 50 ms: hashed once here.
  uint64_t requestedAlgorithmHash() const { return requestedAlgorithmHash_; }
  uint32_t window() const { return line_.window; }
  // What the user's buffers are for a submission of `count` (Comm::checkEntry): the bytes each
  // holds (NCCL's definitions: only the root reads a Broadcast's sendbuf or writes a Reduce's
  // recvbuf, and the other ranks may pass NULL there), and where each sits in the one buffer of an
  // in-place call. The registered count's are computed once, at registration.
  struct BufferExtents {
    uint64_t sendBytes, recvBytes;
    // In place, the buffers sit at offsets sendAt and recvAt (bytes, InPlaceRule) of one buffer:
    // recvbuf - sendbuf is then recvAt - sendAt, mod 2^64.
    uint64_t inPlaceShift;
    bool inPlaceDefined;  // false: the type has no in-place form (AllToAll)
  };
  BufferExtents extentsFor(uint64_t count) const {
    if (count != line_.count) return computeExtents(count);
    return {line_.sendBytes, line_.recvBytes, line_.inPlaceShift, (line_.flags & kLineInPlaceDefined) != 0};
  }
  // desc.variableCount: a submission may carry any count up to the registered one.
  bool variableCount() const { return (line_.flags & kLineVariableCount) != 0; }
  // desc.vectorCounts: a v-collective, submitted with occlSubmitV (host/vec_layout.hpp).
  bool vectorCounts() const { return (line_.flags & kLineVectorCounts) != 0; }
  VecShape vecShape() const {
    return {user_.type, rank_, static_cast<int>(desc_.nRanks), user_.root, user_.count, desc_.elemBytes};
  }
  // Under the submit lock, before submission `seq`'s SQE: its table of blocks (VecTables::write).
  void writeVecTable(uint64_t seq, const std::vector<VecBlock>& blocks) { vecTables_->write(seq, blocks); }
  uint64_t countMultiplier() const { return desc_.countMultiplier; }
  uint32_t chunksPerLoop(uint32_t form) const { return desc_.forms[form].nChunks; }
  // Whether `count` elements split into form `form`'s chunks (always, where they may be ragged).
  bool countSplits(uint64_t count, uint32_t form) const {
    const ProgramForm& f = desc_.forms[form];
    return chunksFit(count * desc_.countMultiplier, f.nChunks, f.raggedAllowed != 0);
  }
  // The algorithm a submission runs, by form (kFormOutOfPlace, kFormInPlace, kFormSmall).
  const std::string& algorithmName(uint32_t form) const {
    return form == kFormSmall ? smallAlgorithm_ : algorithmNames_[form];
  }
  // Task-queue entries one submission takes on the daemon block that runs the most of its parts.
  uint32_t tasksPerSubmission() const { return line_.tasks; }

  // Submission side, under the communicator's submit lock: nextSeq has one writer at a time
  // (addByOneWriter).
  uint64_t nextSeq() const { return line_.nextSeq.load(std::memory_order_acquire); }
  CallbackSlot& slotFor(uint64_t seq) { return callbacks_[windowSlot(seq, line_.window)]; }
  // Submission seq's gate words (device/gate.hpp), in shared memory (CollDesc::gateWords).
  uint32_t* gateOpenWord(uint64_t seq) const { return occl::gateOpenWord(desc_, seq); }
  uint32_t* gateDoneWord(uint64_t seq) const { return occl::gateDoneWord(desc_, seq); }
  // Counted before the SQE is published, so its CQE always falls inside the in-flight window.
  void noteSubmitted() { addSubmitted(1); }
  // Whether a submission of this form class (small or not) differs from the one before it, which
  // makes it wait for every earlier submission to complete (kSqeBarrier, CollShared::doneThrough);
  // records it as the last. Only a collective with a small form has two.
  bool changesForm(bool small) {
    const LastForm now = small ? LastForm::Small : LastForm::Large;
    const bool changes = line_.lastForm != now;
    line_.lastForm = now;
    return changes;
  }
  uint64_t inFlight() const { return nextSeq() - completedSeq(); }
  // Under the submit lock: whether `more` submissions fit the in-flight window beside those
  // queued. The completion side's count (completedSeq(), on a line that side writes) is read only
  // when the last value seen here says they do not: it only grows, so room then is room now. The
  // read is an acquire, so the slots of what it counts completed are free (Comm::prepareEntry).
  bool windowFits(uint64_t more) {
    const uint64_t next = line_.nextSeq.load(std::memory_order_relaxed);  // this side is its one writer
    if (next - line_.completedSeen + more <= line_.window) return true;
    line_.completedSeen = completedSeq();
    return next - line_.completedSeen + more <= line_.window;
  }
  // Comm::submitGroup's count of this collective's entries checked so far in the group it is
  // checking (under the submit lock; 0 outside that check).
  uint8_t& groupScratch() { return line_.groupScratch; }
  // Asks for the submission's line (a look-up ahead of its checks, submitGroup).
  void prefetchLine() const { __builtin_prefetch(&line_); }

  // The last buffers a submission passed in occlMemAlloc memory (desc.sharedBuffers), and
  // memory::releases() then: while nothing was freed since, the same buffers pass again without a
  // lookup. Under the communicator's submit lock.
  struct BuffersSeen {
    bool valid;
    const void* send;
    const void* recv;
    uint64_t releases;
  };
  BuffersSeen& sharedBuffersSeen() const { return buffersSeen_; }

  // Completion side, under the communicator's CQ lock (one writer at a time, as above). It reads its
  // own line only: the slots through its copy of the window, its copy of tasksPerSubmission().
  uint64_t completedSeq() const { return done_.completedSeq.load(std::memory_order_acquire); }
  void advanceCompleted() { addByOneWriter(done_.completedSeq, uint64_t{1}); }
  CallbackSlot& completionSlot(uint64_t seq) { return callbacks_[windowSlot(seq, done_.window)]; }
  uint32_t completionWindow() const { return done_.window; }
  uint32_t completionTasks() const { return done_.tasks; }

  Result<occlCollStats_t> stats(backend::Backend& backend) const;
  // After a failed completion: where this rank saw the failure, naming the peer (": waiting for
  // data from rank 3 (block 0)", ": rank 1 failed it (...)"), or "" where the daemon recorded no
  // place (CollShared::failedWhere). The first failure's place: later submissions fail with it.
  std::string failurePlace(backend::Backend& backend) const;


  // After an abort: a peer that waits on this rank through any of these connectors fails with
  // `status` instead of waiting for data that will never come. Through the connector memory,
  // which may be device memory the host cannot address. Returns the first failure (every
  // connector is still tried).
  // `fromSeq`: the first submission it fails on the peers (the ones before it completed here).
  Status poisonConnectors(uint32_t status, uint64_t fromSeq) const {
    Status first;
    for (const auto& c : connectors_) {
      Status s = c->poison(status, fromSeq);
      if (first.ok() && !s.ok()) first = s;
    }
    return first;
  }

 private:
  // failurePlace's text for a count mismatch with `peer` (CollShared::mismatchOwnCount).
  std::string countMismatchText(backend::Backend& backend, int32_t peer) const;
  void addSubmitted(uint64_t delta) { addByOneWriter(line_.nextSeq, delta); }
  // The submission line's copies of the registration (build's last step).
  void fillSubmitLine(const occlCollDesc_t& desc);

  // The peers of a block's connectors (Collective::peersOf_).
  struct BlockPeers {
    std::vector<int32_t> sends, recvs;
  };

  Collective() = default;
  Status build(const CollectiveSetup& setup, const occlCollDesc_t& desc);
  // desc_.forms[formIndex]: `program` flattened for this rank, its geometry and scratch.
  Status buildForm(const CollectiveSetup& setup, const occlCollDesc_t& desc, const ir::Program& program,
                   uint32_t formIndex);
  // What connectors of the out-of-place form's first `blocks` parts must hold besides their own
  // program's messages: the small form's (kFormSmall), which runs on them.
  struct SharedConnectors {
    uint32_t blocks = 0;
    uint32_t slots = 0;
    uint64_t written = 0;  // bytes of the largest message
  };
  // The small form: `program`, for counts up to desc_.smallCount, on the out-of-place form's
  // connectors (AlgorithmChoice::small); what those connectors must hold for it.
  SharedConnectors smallFormNeeds(const CollectiveSetup& setup, const ir::Program& program) const;
  Status buildSmallForm(const ir::Program& program);
  // Steps, connectors and desc_.nBlocks block plans of this rank's part, in daemon memory.
  Result<const BlockPlan*> buildBlocks(const CollectiveSetup& setup, const occlCollDesc_t& desc,
                                       const ir::RankProgram& mine, const std::string& algorithm, uint32_t formIndex,
                                       uint32_t slots);
  // Poisons and discards every connector attached so far (a registration that fails).
  void failConnectors(uint32_t status);
  // This rank's end of the connector to (Sender) or from `peer` on `channel` for one form; checks
  // the peer's registration signature when the peer has registered already.
  // `written`: the bytes of the largest message it carries.
  Result<FifoHandle> attachConnector(const CollectiveSetup& setup, const occlCollDesc_t& desc, int peer, int channel,
                                     uint32_t formIndex, transport::ConnectorEnd end, uint32_t slots,
                                     uint64_t written);
  Result<void*> allocDaemon(size_t bytes);
  template <typename T>
  Result<T*> copyToDaemon(const std::vector<T>& items) {
    const size_t bytes = std::max<size_t>(items.size(), 1) * sizeof(T);
    Result<void*> mem = allocDaemon(bytes);
    if (!mem.ok()) return mem.status();
    if (Status s = backend_->copyToDaemon(mem.value(), items.data(), items.size() * sizeof(T)); !s.ok()) return s;
    return static_cast<T*>(mem.value());
  }

  occlCollDesc_t user_{};
  std::string requestedAlgorithm_;
  uint64_t requestedAlgorithmHash_ = 0;
  CollDesc desc_{};
  backend::Backend* backend_ = nullptr;
  std::vector<void*> daemonAllocations_;
  std::unique_ptr<VecTables> vecTables_;  // desc.vectorCounts
  std::vector<BlockPeers> peersOf_[kForms];  // [form][block]: failurePlace() names a connector's peer
  std::vector<BlockPlan> outOfPlacePlans_;   // the out-of-place form's plans (daemon pointers), for the small form
  SharedConnectors shared_;                  // smallFormNeeds, while the out-of-place form attaches
  std::string smallAlgorithm_;
  std::vector<std::shared_ptr<transport::ConnectorMemory>> connectors_;
  // What registration cost (occlCollStats_t): FIFO bytes of this rank's connector ends, the most
  // slots one of them has, scratch bytes.
  uint64_t connectorBytes_ = 0;
  uint32_t connectorSlots_ = 0;
  uint64_t scratchBytes_ = 0;
  int rank_ = 0;
  std::array<std::string, 2> algorithmNames_;
  mutable BuffersSeen buffersSeen_{false, nullptr, nullptr, 0};
  BufferExtents computeExtents(uint64_t count) const;
  SubmitLine line_;
  // The completion side's line, apart from the submission's: a completion that read the
  // submission's line took it from the core that submits next (measured: 32 AllReduces of 8 B as
  // one group, the daemon and the poller on their own threads, 46-50 ns an entry against 102-108 while
  // the poller read nextSeq and the window there).
  struct alignas(64) CompletionLine {
    std::atomic<uint64_t> completedSeq{0};
    uint32_t window = 0;  // copies of the registration's (fillSubmitLine)
    uint32_t tasks = 1;
  };
  CompletionLine done_;
  alignas(64) std::array<CallbackSlot, kMaxInflightPerColl> callbacks_{};
};

}  // namespace occl::host
