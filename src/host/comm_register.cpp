// Registration: a communicator's collectives registered and deregistered (in its CollRegistry,
// under the submit lock), and what a caller may ask of one registered: its registration, the
// algorithm it runs.
#include <mutex>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "host/comm.hpp"
#include "util/log.hpp"

namespace occl::host {

Status Comm::registerCollective(uint64_t collId, const occlCollDesc_t& desc) {
  if (stopped_) return stoppedError();
  std::lock_guard<std::mutex> lock(submitMu_);
  // Again under the lock (as submit): a registration that lands after shutdown() has its
  // connectors poisoned by nobody, and a peer would wait on them until its timeout.
  if (stopped_) return stoppedError();
  if (registry_.contains(collId))
    return Status::error(occlInvalidUsage, absl::StrFormat("collId 0x%x is already registered on rank %d", collId, rank_));
  Result<ResolvedOp> resolved = preMulSumOps_.resolve(desc);
  if (!resolved.ok()) return resolved.status();
  // An occlScalarDevice scalar is read by the daemon at every run: it must be memory it can reach.
  if (Status s = backend_->checkUserBuffer(resolved->scalar.address, "the PreMulSum op's scalar (occlScalarDevice)");
      !s.ok())
    return s;
  Result<uint32_t> index = registry_.allocateIndex();
  if (!index.ok()) return index.status();
  CollectiveSetup setup{rank_,     nRanks_,    &config_,   backend_.get(), connectors_.get(),
                        &library_, peerReads_, peerShared_, yieldBoard_};
  Result<std::unique_ptr<Collective>> coll = Collective::create(setup, collId, index.value(), desc, resolved.value());
  Status published = coll.ok() ? Status::success() : coll.status();
  if (published.ok()) {
    Result<CollDesc*> entry = registry_.tableEntry(index.value(), *backend_, env_->colls.pages);
    published = entry.ok() ? coll.value()->publish(entry.value()) : entry.status();
  }
  if (!published.ok()) {
    registry_.freeIndex(index.value());
    return published;
  }
  if (logEnabled(LogLevel::Trace, LogSubsys::Coll))
    logTrace(LogSubsys::Coll, absl::StrFormat("rank %d registered collId 0x%x: %s, count %d, datatype %s, algorithm %s",
                                              rank_, collId, collTypeName(desc.type), desc.count,
                                              dtypeName(desc.datatype), coll.value()->algorithmName(kFormOutOfPlace)));
  registry_.add(collId, index.value(), std::move(coll.value()));
  return Status::success();
}

Status Comm::deregisterCollective(uint64_t collId) {
  std::lock_guard<std::mutex> lock(submitMu_);
  Collective* c = registry_.find(collId);
  if (c == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  if (uint64_t n = c->inFlight(); n != 0)
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("collId 0x%x has %d submissions in flight; wait for their callbacks", collId, n));
  registry_.remove(collId);
  return Status::success();
}

std::vector<Comm::Registration> Comm::registrations() {
  std::lock_guard<std::mutex> lock(submitMu_);
  return registry_.registrations();
}

Result<const std::string*> Comm::algorithmOf(uint64_t collId, bool inPlace) {
  std::lock_guard<std::mutex> lock(submitMu_);
  Collective* c = registry_.find(collId);
  if (c == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  return &c->algorithmName(inPlace ? kFormInPlace : kFormOutOfPlace);
}

Result<Comm::SmallForm> Comm::smallFormOf(uint64_t collId) {
  std::lock_guard<std::mutex> lock(submitMu_);
  Collective* c = registry_.find(collId);
  if (c == nullptr)
    return Status::error(occlInvalidArgument, absl::StrFormat("collId 0x%x is not registered on rank %d", collId, rank_));
  if (c->smallCount() == 0) return SmallForm{0, nullptr};
  return SmallForm{c->smallCount(), c->smallAlgorithm().c_str()};
}

}  // namespace occl::host
