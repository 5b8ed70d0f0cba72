// occl-torture's context-switch probe: times the daemon's own tryTask on a one-block collective
// whose next receive is not ready, with a threshold of 0 rounds, so each try is exactly one
// switch: load the context, run the executor to the unready wait, give up, preempt, save lazily.
// Timing whole runs (forced preemption vs normal) cannot isolate this on a shared host: a forced
// run also skips every spin wait, and is often faster than a normal one.
#include <algorithm>
#include <chrono>
#include <vector>

#include "daemon/daemon.hpp"
#include "occl_torture.hpp"

namespace occl::tools {
namespace {

constexpr uint64_t kSlotBytes = 64;
constexpr uint64_t kTileElems = kSlotBytes / sizeof(float);

// One collective of `nTiles` tiles whose block receives one slot per tile from a peer that the
// probe plays itself (feeding the connector or not).
class SwitchProbe {
 public:
  explicit SwitchProbe(uint32_t nTiles)
      : slots_(2 * kSlotBytes), input_(nTiles * kTileElems), output_(nTiles * kTileElems),
        pages_(CollTable::kMaxPages, nullptr), page_(CollTable::kPageSize) {
    step_ = DeviceStep{StepOp::Recv, BufKind::Output, BufKind::Output, 0, 0, 0, 1, -1, 0, kNoConnector, 0};
    recv_ = FifoHandle{&header_, slots_.data(), 2, 0, kSlotBytes};
    plan_.steps = &step_;
    plan_.nSteps = 1;
    plan_.recvs = &recv_;
    plan_.nRecvs = 1;
    CollDesc& d = page_[0];
    d.collId = 1;
    d.signature = 1;
    d.dtype = occlFloat32;
    d.redOp = occlSum;
    d.collType = occlCollAllReduce;
    d.nBlocks = 1;
    d.nRanks = 2;
    d.totalElems = nTiles * kTileElems;
    d.tileElems = kTileElems;
    d.elemBytes = sizeof(float);
    ProgramForm& form = d.forms[kFormOutOfPlace];
    form.blocks = &plan_;
    form.chunkElems = d.totalElems;
    form.nChunks = 1;
    form.nTiles = nTiles;
    d.forms[kFormInPlace] = form;
    d.shared = &shared_;
    d.contexts = &context_;
    d.stats = &stats_;
    d.inflightWindow = 1;
    pages_[0] = page_.data();
    task_ = TaskEntry{0, 0, 0, reinterpret_cast<uint64_t>(input_.data()), reinterpret_cast<uint64_t>(output_.data()), 0,
                      kFormOutOfPlace, kGateNone, 0, 0, 0, 0};
    block_.tasks = &task_;
    block_.capacity = 1;
    block_.nTasks = 1;
    env_.colls = CollTable{pages_.data()};
    env_.blocks = &block_;
    env_.nBlocks = 1;
    // Fixed spin policy with a threshold of 0: every wait gives up on its first unready check.
    env_.policy = SchedPolicy{occlOrderFifo, occlSpinPolicyFixed, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0, 1, 0};
    env_.abortFlag = &abortFlag_;
    env_.hostAbortFlag = &abortFlag_;
  }

  // Nanoseconds per try; `feed` puts one slot in the connector before each try, so each try
  // receives one tile and its context moves (a save), else nothing moves (no save).
  double timeTries(int tries, bool feed) {
    bool progressed = false, yielded = false;
    auto started = std::chrono::steady_clock::now();
    for (int i = 0; i < tries; ++i) {
      if (feed) atomics::storeRelease(&header_.tail, header_.tail + 1);
      PassClock clock;  // one per try, as a pass of one task has
      tryTask(env_, block_, 0, 0, progressed, yielded, clock);
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - started).count() / tries;
  }
  const BlockStats& stats() const { return stats_; }

 private:
  DeviceStep step_{};
  FifoHandle recv_{};
  BlockPlan plan_{};
  FifoHeader header_{};
  std::vector<char> slots_;
  std::vector<float> input_, output_;
  CollShared shared_{};
  BlockContext context_{};
  BlockStats stats_{};
  std::vector<CollDesc*> pages_;
  std::vector<CollDesc> page_;
  TaskEntry task_{};
  BlockState block_{};
  DaemonEnv env_{};
  uint32_t abortFlag_ = 0;
};

}  // namespace

// The minimum over batches: on a shared machine a batch that another process interrupted says
// nothing about the switch itself.
SwitchCost measureSwitchCost(int tries) {
  constexpr int kBatches = 10;
  const int batch = std::max(tries / kBatches, 1);
  SwitchCost out;
  SwitchProbe idle(4);
  idle.timeTries(batch, false);  // warm up
  SwitchProbe moving(static_cast<uint32_t>(batch) * kBatches + 2);
  out.noSaveNs = out.withSaveNs = 1e18;
  for (int b = 0; b < kBatches; ++b) {
    out.noSaveNs = std::min(out.noSaveNs, idle.timeTries(batch, false));
    out.withSaveNs = std::min(out.withSaveNs, moving.timeTries(batch, true));
  }
  out.savesSeen = moving.stats().contextSaves;
  return out;
}

}  // namespace occl::tools
