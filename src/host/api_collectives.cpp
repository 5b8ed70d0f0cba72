// The C API of collectives: registration, submission, waiting and what a communicator reports
// about them (statistics, the timeline, who is missing).
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "host/api_handle.hpp"

namespace {

using namespace occl::host::api;
using occl::Result;
using occl::Status;

// The arguments of a call that lists (occlCommGetTimeline, occlCommGetPending): `items` may be
// NULL with capacity 0 to count.
occlResult_t checkList(occlComm_t comm, const char* name, const void* items, int capacity, const int* count) {
  if (count == nullptr) return fail(comm, Status::error(occlInvalidArgument, "count is NULL"));
  if (capacity < 0)
    return fail(comm, Status::error(occlInvalidArgument, absl::StrFormat("capacity = %d: expected >= 0", capacity)));
  if (items == nullptr && capacity != 0)
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("%s is NULL with capacity = %d: pass 0 to count", name, capacity)));
  return occlSuccess;
}

// Copies the first `capacity` of `all` (or counts them, with items NULL).
template <typename T>
occlResult_t copyList(occlComm_t comm, const occl::Result<std::vector<T>>& all, T* items, int capacity, int* count) {
  if (!all.ok()) return fail(comm, all.status());
  const size_t n = items == nullptr ? all->size() : std::min(all->size(), static_cast<size_t>(capacity));
  if (items != nullptr) std::copy(all->begin(), all->begin() + static_cast<std::ptrdiff_t>(n), items);
  *count = static_cast<int>(n);
  return occlSuccess;
}

}  // namespace

extern "C" {

occlResult_t occlCollRegister(occlComm_t comm, uint64_t collId, const occlCollDesc_t* desc) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (desc == nullptr) return fail(comm, Status::error(occlInvalidArgument, "desc is NULL"));
  return fail(comm, comm->impl->registerCollective(collId, *desc));
}

occlResult_t occlCollDeregister(occlComm_t comm, uint64_t collId) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->deregisterCollective(collId));
}

occlResult_t occlRedOpCreatePreMulSum(occlRedOp_t* op, void* scalar, occlDataType_t datatype,
                                      occlScalarResidence_t residence, occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (op == nullptr) return fail(comm, Status::error(occlInvalidArgument, "op is NULL"));
  occl::Result<int> created = comm->impl->preMulSumOps().create(scalar, datatype, residence);
  if (!created.ok()) return fail(comm, created.status());
  *op = static_cast<occlRedOp_t>(created.value());
  return occlSuccess;
}

occlResult_t occlRedOpDestroy(occlRedOp_t op, occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->preMulSumOps().destroy(op));
}

occlResult_t occlAlgorithmLoad(occlComm_t comm, const char* name, const char* path) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (name == nullptr) return fail(comm, Status::error(occlInvalidArgument, "name is NULL"));
  if (path == nullptr) return fail(comm, Status::error(occlInvalidArgument, "path is NULL"));
  return fail(comm, comm->impl->loadAlgorithm(name, path));
}

occlResult_t occlCollGetAlgorithm(occlComm_t comm, uint64_t collId, int inPlace, const char** algorithm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (algorithm == nullptr) return fail(comm, Status::error(occlInvalidArgument, "algorithm is NULL"));
  Result<const std::string*> name = comm->impl->algorithmOf(collId, inPlace != 0);
  if (!name.ok()) return fail(comm, name.status());
  *algorithm = name.value()->c_str();
  return occlSuccess;
}

occlResult_t occlCollGetSmallForm(occlComm_t comm, uint64_t collId, uint64_t* maxCount, const char** algorithm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (maxCount == nullptr) return fail(comm, Status::error(occlInvalidArgument, "maxCount is NULL"));
  if (algorithm == nullptr) return fail(comm, Status::error(occlInvalidArgument, "algorithm is NULL"));
  Result<occl::host::Comm::SmallForm> small = comm->impl->smallFormOf(collId);
  if (!small.ok()) return fail(comm, small.status());
  *maxCount = small.value().maxCount;
  *algorithm = small.value().algorithm;
  return occlSuccess;
}

occlResult_t occlSubmit(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback,
                        void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submit(collId, sendbuf, recvbuf, callback, arg));
}

occlResult_t occlSubmitCount(occlComm_t comm, uint64_t collId, size_t count, const void* sendbuf, void* recvbuf,
                             occlCallback_t callback, void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submit(collId, sendbuf, recvbuf, callback, arg, count));
}

occlResult_t occlSubmitV(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                         const occlVectors_t* vectors, occlCallback_t callback, void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (vectors == nullptr)
    return fail(comm, Status::error(occlInvalidArgument, "vectors is NULL: occlSubmitV needs the blocks' counts and "
                                                         "displacements"));
  return fail(comm, comm->impl->submitVector(collId, sendbuf, recvbuf, *vectors, callback, arg));
}

occlResult_t occlSubmitGroup(occlComm_t comm, const occlSubmission_t* subs, int count, int* submitted) {
  if (submitted != nullptr) *submitted = 0;
  if (occlResult_t r = checkComm(comm)) return r;
  if (count < 0)
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("count is %d: expected the number of entries of subs", count)));
  if (subs == nullptr && count > 0)
    return fail(comm, Status::error(occlInvalidArgument, absl::StrFormat("subs is NULL with count %d", count)));
  return fail(comm, comm->impl->submitGroup(std::span<const occlSubmission_t>(subs, static_cast<size_t>(count)),
                                            submitted));
}

occlResult_t occlSubmitGated(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                             occlCallback_t callback, void* arg, occlGate_t* gate) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submitGated(collId, sendbuf, recvbuf, callback, arg, gate));
}

occlResult_t occlGateOpen(occlComm_t comm, occlGate_t gate) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->openGate(gate));
}

occlResult_t occlSubmitOnStream(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf,
                                struct CUstream_st* stream, occlCallback_t callback, void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submitOnStream(collId, sendbuf, recvbuf, stream, callback, arg));
}

occlResult_t occlCommWaitAll(occlComm_t comm, int64_t timeoutMs) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->waitAll(timeoutMs));
}

occlResult_t occlCollGetStats(occlComm_t comm, uint64_t collId, occlCollStats_t* stats) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (stats == nullptr) return fail(comm, Status::error(occlInvalidArgument, "stats is NULL"));
  Result<occlCollStats_t> s = comm->impl->collectiveStats(collId);
  if (!s.ok()) return fail(comm, s.status());
  *stats = s.value();
  return occlSuccess;
}

occlResult_t occlCommGetTimeline(occlComm_t comm, occlTimelineEntry_t* entries, int capacity, int* count) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (occlResult_t r = checkList(comm, "entries", entries, capacity, count)) return r;
  return copyList(comm, comm->impl->timeline(), entries, capacity, count);
}

occlResult_t occlCommGetPending(occlComm_t comm, occlPendingWait_t* waits, int capacity, int* count) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (occlResult_t r = checkList(comm, "waits", waits, capacity, count)) return r;
  return copyList(comm, comm->impl->pendingWaits(), waits, capacity, count);
}

const char* occlWaitReasonString(int reason) {
  switch (reason) {
    case occlWaitNotSubmitted: return "not submitted";
    case occlWaitNotRegistered: return "not registered";
    case occlWaitMismatch: return "registered differently";
    case occlWaitSilent: return "silent";
    case occlWaitInFlight: return "in flight";
    case occlWaitUnknown: return "unknown";
    default: return "unknown reason";
  }
}

}  // extern "C"
