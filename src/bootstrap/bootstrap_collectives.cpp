// The bootstrap's collectives (bootstrap.hpp): allGather and barrier through the root, one at a
// time per rank, every contribution checked against the root's own call.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/link.hpp"
#include "bootstrap/notices.hpp"

namespace occl::bootstrap {

// The op of a collective is also the frame type of its contribution, so that the root can
// tell "rank 2 called barrier() while I called allGather()" from a size mismatch.
enum class Bootstrap::Op : uint32_t { kAllGather = 1, kBarrier = 2 };

namespace {

using namespace notices;

const char* opName(uint32_t op) { return op == 2 ? "barrier" : "allGather"; }

Status checkPiece(const Frame& f, uint32_t op, uint32_t seq, size_t bytes, int peer) {
  if (f.type != 1 && f.type != 2) {
    return Status::error(occlInternalError, absl::StrFormat("unexpected frame type %d from rank %d", f.type, peer));
  }
  if (f.seq != seq) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("rank %d is at bootstrap collective #%d, rank 0 at #%d: the ranks "
                                         "called allGather/barrier a different number of times",
                                         peer, f.seq, seq));
  }
  if (f.type != op) {
    return Status::error(occlInvalidUsage, absl::StrFormat("rank %d called %s while rank 0 called %s", peer,
                                                           opName(f.type), opName(op)));
  }
  if (f.payload.size() != bytes) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("rank %d contributes %d bytes per rank, rank 0 %d bytes", peer,
                                         f.payload.size(), bytes));
  }
  return Status::success();
}

}  // namespace

Status Bootstrap::allGather(void* data, size_t bytesPerRank) {
  if (data == nullptr && bytesPerRank > 0) {
    return Status::error(occlInvalidArgument, "bootstrap allGather: data is NULL");
  }
  return collective(Op::kAllGather, data, bytesPerRank);
}

Status Bootstrap::barrier() { return collective(Op::kBarrier, nullptr, 0); }

Status Bootstrap::collective(Op op, void* data, size_t bytesPerRank) {
  std::lock_guard opLock(opMu_);
  if (opError_) return *opError_;
  {
    std::lock_guard lk(mu_);
    if (closing_) return Status::error(occlInvalidUsage, absl::StrFormat("bootstrap of rank %d is closed", rank_));
    if (failure_) return *failure_;
  }
  if (bytesPerRank > kMaxFrameBytes / static_cast<size_t>(nranks_)) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("bootstrap allGather of %d bytes per rank exceeds the %d-byte limit",
                                         bytesPerRank, kMaxFrameBytes / nranks_));
  }
  uint32_t seq = ++opSeq_;
  if (nranks_ == 1) return Status::success();
  Deadline deadline = deadlineAfterMs(timeoutMs_);
  auto* bytes = static_cast<char*>(data);
  Status st = rank_ == 0 ? rootCollective(op, seq, bytes, bytesPerRank, deadline)
                         : leafCollective(op, seq, bytes, bytesPerRank, deadline);
  if (st.ok()) return st;
  {
    // A send that broke because a peer died reads better as the peer's death.
    std::lock_guard lk(mu_);
    if (failure_) st = *failure_;
  }
  opError_ = st.withContext(absl::StrFormat("rank %d: bootstrap %s #%d", rank_, opName(uint32_t(op)), seq));
  return *opError_;
}

Status Bootstrap::rootCollective(Op op, uint32_t seq, char* data, size_t bytes, Deadline deadline) {
  for (auto& link : links_) {
    auto frame = waitFrame(*link, deadline);
    Status st = frame.ok() ? checkPiece(*frame, uint32_t(op), seq, bytes, link->peer) : frame.status();
    if (!st.ok()) {
      broadcastError(st);
      return st;
    }
    if (bytes > 0) std::memcpy(data + link->peer * bytes, frame->payload.data(), bytes);
  }
  for (auto& link : links_) {
    if (auto st = link->send(kResult, seq, data, bytes * nranks_, deadline); !st.ok()) return st;
  }
  return Status::success();
}

Status Bootstrap::leafCollective(Op op, uint32_t seq, char* data, size_t bytes, Deadline deadline) {
  Link& root = *links_[0];
  char* mine = bytes > 0 ? data + rank_ * bytes : nullptr;
  if (auto st = root.send(uint32_t(op), seq, mine, bytes, deadline); !st.ok()) {
    std::lock_guard lk(mu_);
    // A root that closed or died breaks the send; waitFrame says which, more clearly.
    if (!root.closed && !root.saidGoodbye && !failure_) return st;
  }
  auto frame = waitFrame(root, deadline);
  if (!frame.ok()) return frame.status();
  if (frame->type == kError) {
    auto [code, why] = decodeNote(frame->payload);
    return Status::error(resultFromWire(code), "rank 0 reports: " + why);
  }
  if (frame->type != kResult || frame->seq != seq || frame->payload.size() != bytes * nranks_) {
    return Status::error(occlInternalError,
                         absl::StrFormat("unexpected reply from rank 0 (type %d, #%d, %d bytes; expected #%d, %d bytes)",
                                         frame->type, frame->seq, frame->payload.size(), seq, bytes * nranks_));
  }
  if (bytes > 0) std::memcpy(data, frame->payload.data(), frame->payload.size());
  return Status::success();
}

Result<Frame> Bootstrap::waitFrame(Link& link, Deadline deadline) {
  std::unique_lock lk(mu_);
  cv_.wait_until(lk, deadline, [&] {
    return failure_ || closing_ || !link.inbox.empty() || link.closed || link.saidGoodbye;
  });
  // What arrived before a failure is still good: a collective that completed everywhere
  // should not fail because a peer died right after it.
  if (!link.inbox.empty()) {
    Frame f = std::move(link.inbox.front());
    link.inbox.pop_front();
    return f;
  }
  if (failure_) return *failure_;
  if (closing_) return Status::error(occlInvalidUsage, "the bootstrap was closed during the collective");
  if (link.closed || link.saidGoodbye) {
    return Status::error(occlRemoteError, absl::StrFormat("%s has closed its bootstrap", link.name));
  }
  return Status::error(occlTimeout, absl::StrFormat("timed out after %d ms waiting for %s", timeoutMs_, link.name));
}

void Bootstrap::broadcastError(const Status& status) {
  auto note = encodeNote(status.code, status.message);
  for (auto& link : links_) {
    (void)link->send(kError, 0, note.data(), note.size(), deadlineAfterMs(kNoticeWaitMs));
  }
}

}  // namespace occl::bootstrap
