// Gated and stream-ordered submission (device/gate.hpp): the host's side of the gate protocol.
#include <mutex>

#include "absl/strings/str_format.h"
#include "device/compat.hpp"
#include "device/gate.hpp"
#include "host/comm.hpp"

namespace occl::host {

Status Comm::submitGated(uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback, void* arg,
                         occlGate_t* gate) {
  if (gate == nullptr) return Status::error(occlInvalidArgument, "gate is NULL: occlSubmitGated returns the gate there");
  uint64_t seq = 0;
  if (Status s = submitEntry(collId, OCCL_COUNT_REGISTERED, sendbuf, recvbuf, callback, arg, Start::AtGate, nullptr, &seq); !s.ok()) return s;
  *gate = occlGate_t{collId, seq};
  return Status::success();
}

Status Comm::submitOnStream(uint64_t collId, const void* sendbuf, void* recvbuf, void* stream, occlCallback_t callback,
                            void* arg) {
  // Before anything is queued: a stream the backend refuses leaves nothing behind.
  if (Status s = backend_->checkStream(stream); !s.ok()) return s;
  return submitEntry(collId, OCCL_COUNT_REGISTERED, sendbuf, recvbuf, callback, arg, Start::OnStream, stream, nullptr);
}

Status Comm::openGate(const occlGate_t& gate) {
  if (stopped_) return stoppedError();
  {
    std::lock_guard<std::mutex> lock(submitMu_);
    Collective* found = registry_.find(gate.collId);
    if (found == nullptr)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("gate.collId 0x%x is not registered on rank %d", gate.collId, rank_));
    Collective& c = *found;
    // A gated submission cannot complete before its gate opens: one that completed had it opened.
    if (gate.seq >= c.nextSeq() || gate.seq < c.completedSeq())
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("gate {collId 0x%x, seq %d} names no outstanding submission (collId 0x%x "
                                           "has submissions %d..%d outstanding)",
                                           gate.collId, gate.seq, gate.collId, c.completedSeq(), c.nextSeq()));
    CallbackSlot& slot = c.slotFor(gate.seq);
    if (slot.gate != kGateClosed)
      return Status::error(occlInvalidUsage,
                           absl::StrFormat("gate {collId 0x%x, seq %d} is %s", gate.collId, gate.seq,
                                           slot.gate == kGateNone ? "not a gate: the submission was made with "
                                                                    "occlSubmit"
                                                                  : "open already (by occlGateOpen or its stream)"));
    // Marked open before the word is written: once written, the submission may complete and the
    // thread that fires its callback frees the slot (Comm::fireInOrder), ordered after this store
    // by the word's release and the CQE.
    slot.gate = kGateOpen;
    atomics::storeRelease(c.gateOpenWord(gate.seq), gateValue(gate.seq));
  }
  backend_->notifySubmission();  // a parked or departed daemon has a task to run now
  return Status::success();
}

void Comm::releaseGateWaiters() {
  std::lock_guard<std::mutex> lock(submitMu_);
  for (const auto& [collId, coll] : registry_) {
    for (uint64_t seq = coll->completedSeq(); seq < coll->nextSeq(); ++seq) {
      if (coll->slotFor(seq).gate == kGateNone) continue;
      atomics::storeRelease(coll->gateDoneWord(seq), gateValue(seq));
    }
  }
}

}  // namespace occl::host
