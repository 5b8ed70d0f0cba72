// The C API of communicators: argument checks, error recording, and the translation to
// host::Comm (building one is comm_setup.hpp's and comm_split.hpp's); api_collectives.cpp has the
// calls on collectives.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/launcher_env.hpp"
#include "host/api_handle.hpp"
#include "host/comm_setup.hpp"
#include "host/comm_split.hpp"
#include "host/config.hpp"
#include "memory/shared_buffers.hpp"

namespace {

using namespace occl::host::api;
using occl::host::Comm;
using occl::Result;
using occl::Status;

Result<occlConfig_t> resolveConfig(const occlConfig_t* config) {
  occlConfig_t c{};
  if (config != nullptr) {
    c = *config;
  } else if (Status s = occl::host::initConfig(c); !s.ok()) {
    return s;
  }
  if (Status s = occl::host::validateConfig(c); !s.ok()) return s;
  return c;
}

// Wraps a built communicator in its handle.
occlResult_t wrap(occlComm_t* out, Result<std::unique_ptr<Comm>> comm) {
  if (!comm.ok()) return fail(nullptr, comm.status());
  *out = new occlComm{std::move(comm.value())};
  return occlSuccess;
}

// occlCommInitRank and occlCommInitFromEnv, once they have the unique id.
occlResult_t initRankFrom(occlComm_t* comm, int nranks, const occl::bootstrap::UniqueIdData& id, int rank,
                          const occlConfig_t* config) {
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  if (nranks < 1) return invalid("nranks must be >= 1");
  if (rank < 0 || rank >= nranks)
    return fail(nullptr, Status::error(occlInvalidArgument,
                                       absl::StrFormat("rank = %d: expected 0..%d (nranks = %d)", rank, nranks - 1, nranks)));
  return wrap(comm, occl::host::initRank(id, rank, nranks, cfg.value()));
}

}  // namespace

extern "C" {

const char* occlGetErrorString(occlResult_t result) {
  switch (result) {
    case occlSuccess: return "no error";
    case occlUnhandledCudaError: return "unhandled CUDA error";
    case occlSystemError: return "system error";
    case occlInternalError: return "internal error";
    case occlInvalidArgument: return "invalid argument";
    case occlInvalidUsage: return "invalid usage";
    case occlRemoteError: return "remote process error";
    case occlInProgress: return "operation in progress";
    case occlTimeout: return "timeout";
    case occlAborted: return "aborted";
    default: return "unknown result code";
  }
}

const char* occlGetLastError(occlComm_t comm) {
  thread_local std::string copy;
  copy = (comm != nullptr && comm->impl) ? comm->impl->lastError() : tlsLastError;
  return copy.c_str();
}

occlResult_t occlGetVersion(int* version) {
  if (version == nullptr) return invalid("version is NULL");
  *version = OCCL_VERSION_CODE;
  return occlSuccess;
}

occlResult_t occlConfigInit(occlConfig_t* config) {
  if (config == nullptr) return invalid("config is NULL");
  return fail(nullptr, occl::host::initConfig(*config));
}

occlResult_t occlConfigSetField(occlConfig_t* config, const char* field, const char* value) {
  if (config == nullptr) return invalid("config is NULL");
  if (field == nullptr) return invalid("field is NULL");
  return fail(nullptr, occl::host::setConfigField(*config, field, value));
}

occlResult_t occlCollDescInit(occlCollDesc_t* desc) {
  if (desc == nullptr) return invalid("desc is NULL");
  *desc = occlCollDesc_t{occlCollAllReduce, 0, occlFloat32, occlSum, 0, 0, nullptr, 0, 0, 0, 0};
  return occlSuccess;
}

occlResult_t occlGetUniqueId(occlUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid("uniqueId is NULL");
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::createUniqueId();
  if (!id.ok()) return fail(nullptr, id.status());
  occl::bootstrap::packUniqueId(id.value(), uniqueId);
  return occlSuccess;
}

occlResult_t occlCommInitRank(occlComm_t* comm, int nranks, occlUniqueId commId, int rank, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::unpackUniqueId(commId);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, nranks, id.value(), rank, config);
}

occlResult_t occlCommInitFromEnv(occlComm_t* comm, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::bootstrap::LauncherEnv> env = occl::bootstrap::detectLauncherEnv();
  if (!env.ok()) return fail(nullptr, env.status());
  Result<occl::bootstrap::UniqueIdData> id = occl::bootstrap::uniqueIdFromAddress(env.value().addr, env.value().port, 0);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, env.value().size, id.value(), env.value().rank, config);
}

occlResult_t occlCommInitAll(occlComm_t* comms, int ndev, const int* devlist, const occlConfig_t* config) {
  if (comms == nullptr) return invalid("comms is NULL");
  if (ndev < 1) return fail(nullptr, Status::error(occlInvalidArgument, absl::StrFormat("ndev = %d: expected >= 1", ndev)));
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  for (int r = 0; r < ndev; ++r) comms[r] = nullptr;
  Result<std::vector<std::unique_ptr<Comm>>> built = occl::host::initAll(ndev, devlist, cfg.value());
  if (!built.ok()) return fail(nullptr, built.status());
  for (int r = 0; r < ndev; ++r) comms[r] = new occlComm{std::move(built.value()[static_cast<size_t>(r)])};
  return occlSuccess;
}

occlResult_t occlCommSplit(occlComm_t comm, int color, int key, occlComm_t* newcomm, const occlConfig_t* config) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (newcomm == nullptr) return fail(comm, Status::error(occlInvalidArgument, "newcomm is NULL"));
  *newcomm = nullptr;
  if (comm->impl->inCallback()) return refuseInCallback(comm, "occlCommSplit");
  Result<std::unique_ptr<Comm>> child = occl::host::split(*comm->impl, color, key, config);
  if (!child.ok()) return fail(comm, child.status());
  if (child.value() != nullptr) *newcomm = new occlComm{std::move(child.value())};
  return occlSuccess;
}

occlResult_t occlCommRevoke(occlComm_t comm, int revokeFlags) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (revokeFlags != OCCL_REVOKE_DEFAULT)
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("revokeFlags = %d: expected OCCL_REVOKE_DEFAULT (0)", revokeFlags)));
  if (comm->impl->inCallback()) return refuseInCallback(comm, "occlCommRevoke");
  return fail(comm, comm->impl->revoke());
}

occlResult_t occlCommShrink(occlComm_t comm, const int* excludeRanksList, int excludeRanksCount, occlComm_t* newcomm,
                            const occlConfig_t* config, int shrinkFlags) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (newcomm == nullptr) return fail(comm, Status::error(occlInvalidArgument, "newcomm is NULL"));
  *newcomm = nullptr;
  if (comm->impl->inCallback()) return refuseInCallback(comm, "occlCommShrink");
  Result<std::unique_ptr<Comm>> child =
      occl::host::shrink(*comm->impl, excludeRanksList, excludeRanksCount, config, shrinkFlags);
  if (!child.ok()) return fail(comm, child.status().withContext("occlCommShrink"));
  *newcomm = new occlComm{std::move(child.value())};
  return occlSuccess;
}

occlResult_t occlCommFinalize(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->finalize());
}

occlResult_t occlCommDestroy(occlComm_t comm) {
  if (comm == nullptr) return invalid("comm is NULL");
  if (comm->impl && comm->impl->inCallback()) return refuseInCallback(comm, "occlCommDestroy");
  delete comm;
  return occlSuccess;
}

occlResult_t occlCommAbort(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (comm->impl->inCallback()) return refuseInCallback(comm, "occlCommAbort");
  (void)comm->impl->abort(occlAborted);
  delete comm;
  return occlSuccess;
}

occlResult_t occlCommGetAsyncError(occlComm_t comm, occlResult_t* asyncError) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (asyncError == nullptr) return fail(comm, Status::error(occlInvalidArgument, "asyncError is NULL"));
  *asyncError = comm->impl->asyncError();
  return occlSuccess;
}

occlResult_t occlCommCount(occlComm_t comm, int* count) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (count == nullptr) return fail(comm, Status::error(occlInvalidArgument, "count is NULL"));
  *count = comm->impl->size();
  return occlSuccess;
}

occlResult_t occlCommUserRank(occlComm_t comm, int* rank) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (rank == nullptr) return fail(comm, Status::error(occlInvalidArgument, "rank is NULL"));
  *rank = comm->impl->rank();
  return occlSuccess;
}

occlResult_t occlCommPeerTransport(occlComm_t comm, int peer, const char** transport) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (transport == nullptr) return fail(comm, Status::error(occlInvalidArgument, "transport is NULL"));
  const int n = comm->impl->size();
  if (peer < 0 || peer >= n) {
    return fail(comm, Status::error(occlInvalidArgument,
                                    absl::StrFormat("peer %d is not a rank of this %d-rank communicator (0..%d)", peer,
                                                    n, n - 1)));
  }
  *transport = comm->impl->transportTo(peer);
  return occlSuccess;
}

occlResult_t occlCommGetConfig(occlComm_t comm, occlConfig_t* config) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (config == nullptr) return fail(comm, Status::error(occlInvalidArgument, "config is NULL"));
  *config = comm->impl->config();
  return occlSuccess;
}

occlResult_t occlMemAlloc(void** ptr, size_t size) {
  if (ptr == nullptr) return invalid("ptr is NULL");
  Result<void*> p = occl::memory::allocate(size);
  if (!p.ok()) return fail(nullptr, p.status());
  *ptr = p.value();
  return occlSuccess;
}

occlResult_t occlMemFree(void* ptr) {
  if (ptr == nullptr) return occlSuccess;  // as free(NULL)
  return fail(nullptr, occl::memory::release(ptr));
}

}  // extern "C"
