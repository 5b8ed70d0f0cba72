// The C API: argument checks, error recording, and the translation to host::Comm.
#include <unistd.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "host/bootstrap.hpp"
#include "host/comm.hpp"
#include "host/config.hpp"
#include "host/launcher_env.hpp"
#include "occl/occl.h"
#if OCCL_HAVE_CUDA
#include "host/cuda_util.hpp"
#include "transport/cuda_connectors.hpp"
#endif

struct occlComm {
  std::unique_ptr<occl::host::Comm> impl;
};

namespace {

using occl::host::Comm;
using occl::host::Result;
using occl::host::Status;

thread_local std::string tlsLastError;

occlResult_t fail(occlComm_t comm, const Status& s) {
  if (s.ok()) return occlSuccess;
  if (comm != nullptr && comm->impl) return comm->impl->record(s);
  tlsLastError = s.message;
  return s.code;
}

occlResult_t invalid(const char* what) { return fail(nullptr, Status::error(occlInvalidArgument, what)); }

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

occlResult_t makeComm(occlComm_t* out, occl::host::CommOptions options) {
  Result<std::unique_ptr<Comm>> comm = Comm::create(std::move(options));
  if (!comm.ok()) return fail(nullptr, comm.status());
  *out = new occlComm{std::move(comm.value())};
  return occlSuccess;
}

// Where a rank's daemon runs: -1 for host threads, else a CUDA device (docs/configuration.md).
//   config.backend = host: host threads; a devlist is then an error.
//   a devlist: CUDA on devlist[index] (auto or cuda).
//   no devlist: CUDA on device localRank % device count when config.backend = cuda, or when it is
//   auto, `autoPrefersGpu` (occlCommInitRank; occlCommInitAll without a devlist means host ranks)
//   and a device is present. Auto without a device falls back to host threads; cuda without one,
//   or a devlist without one, fails with occlUnhandledCudaError "no CUDA device: ...".
Result<int> daemonDevice(const occlConfig_t& c, const int* devlist, int index, int localRank, bool autoPrefersGpu) {
  if (c.backend == occlBackendHost || c.backend == occlBackendSimt) {
    if (devlist == nullptr) return -1;
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("devlist names CUDA devices but config.backend = %s: pass NULL for its ranks",
                                         c.backend == occlBackendHost ? "host" : "simt"));
  }
  const bool wantsGpu = devlist != nullptr || c.backend == occlBackendCuda;
  if (!wantsGpu && !autoPrefersGpu) return -1;
#if OCCL_HAVE_CUDA
  Result<int> count = occl::host::cudaDeviceCount();
  if (!count.ok()) return wantsGpu ? Result<int>(count.status()) : Result<int>(-1);
  if (devlist == nullptr) return localRank % count.value();
  if (devlist[index] < 0 || devlist[index] >= count.value())
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("devlist[%d] = %d: this process sees %d CUDA device(s)", index, devlist[index],
                                         count.value()));
  return devlist[index];
#else
  if (!wantsGpu) return -1;
  return Status::error(occlInvalidArgument, devlist != nullptr
                                                ? "devlist given but this build has no CUDA backend: pass NULL for host "
                                                  "ranks"
                                                : "config.backend = cuda but this build has no CUDA backend (configure "
                                                  "with -DOCCL_ENABLE_CUDA=ON)");
#endif
}

Result<std::unique_ptr<occl::host::Backend>> backendFor(const occlConfig_t& c, int device) {
  if (c.backend == occlBackendSimt) return occl::host::makeSimtBackend(c);
  if (device < 0) return occl::host::makeHostBackend(c);
#if OCCL_HAVE_CUDA
  return occl::host::makeCudaBackend(c, device);
#else
  return Status::error(occlInternalError, "a CUDA device was chosen in a build without the CUDA backend");
#endif
}

// Ranks of one process share connector memory: host memory, or GPU memory for device ranks
// (all ranks of one occlCommInitAll are of one kind). Returns a factory per rank.
std::function<std::unique_ptr<occl::transport::ConnectorFactory>()> inProcessConnectors(const std::vector<int>& devices) {
#if OCCL_HAVE_CUDA
  if (devices.front() >= 0) {
    auto world = occl::transport::makeCudaWorld(devices);
    return [world] { return occl::transport::makeCudaInProcessFactory(world); };
  }
#endif
  auto world = occl::transport::makeInProcessWorld();
  return [world] { return occl::transport::makeInProcessFactory(world); };
}

// Connectors between processes of this host: shm, registered with CUDA for a device rank.
std::unique_ptr<occl::transport::ConnectorFactory> shmConnectorsFor(uint64_t nonce, int64_t timeoutMs, int device) {
#if OCCL_HAVE_CUDA
  if (device >= 0) return occl::transport::makeCudaShmFactory(nonce, timeoutMs, device);
#endif
  return occl::transport::makeShmFactory(nonce, timeoutMs);
}

occlResult_t checkComm(occlComm_t comm) {
  return comm == nullptr || !comm->impl ? invalid("comm is NULL") : occlSuccess;
}

// Stopping a communicator joins its poller, so a callback (which runs there) must not do it.
occlResult_t refuseInCallback(occlComm_t comm, const char* what) {
  return fail(comm, Status::error(occlInvalidUsage,
                                  absl::StrFormat("%s called from a callback: it would wait for itself", what)));
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

occlResult_t occlCollDescInit(occlCollDesc_t* desc) {
  if (desc == nullptr) return invalid("desc is NULL");
  *desc = occlCollDesc_t{occlCollAllReduce, 0, occlFloat32, occlSum, 0, 0, nullptr, 0};
  return occlSuccess;
}

occlResult_t occlGetUniqueId(occlUniqueId* uniqueId) {
  if (uniqueId == nullptr) return invalid("uniqueId is NULL");
  Result<occl::host::UniqueIdData> id = occl::host::createUniqueId();
  if (!id.ok()) return fail(nullptr, id.status());
  occl::host::packUniqueId(id.value(), uniqueId);
  return occlSuccess;
}

static occlResult_t initRankFrom(occlComm_t* comm, int nranks, const occl::host::UniqueIdData& id, int rank,
                                 const occlConfig_t* config) {
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  if (nranks < 1) return invalid("nranks must be >= 1");
  if (rank < 0 || rank >= nranks)
    return fail(nullptr, Status::error(occlInvalidArgument,
                                       absl::StrFormat("rank = %d: expected 0..%d (nranks = %d)", rank, nranks - 1, nranks)));
  auto boot = occl::host::Bootstrap::connect(id, rank, nranks, cfg.value().initTimeoutMs);
  if (!boot.ok()) return fail(nullptr, boot.status());
  // Every rank must be on this host: the network transport is not there yet.
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::vector<char> hosts(static_cast<size_t>(nranks) * sizeof(host));
  std::memcpy(hosts.data() + static_cast<size_t>(rank) * sizeof(host), host, sizeof(host));
  if (Status s = boot.value()->allGather(hosts.data(), sizeof(host)); !s.ok()) return fail(nullptr, s);
  for (int r = 0; r < nranks; ++r) {
    const char* other = hosts.data() + static_cast<size_t>(r) * sizeof(host);
    if (std::strncmp(other, host, sizeof(host)) != 0)
      return fail(nullptr, Status::error(occlInvalidUsage,
                                         absl::StrFormat("rank %d runs on host \"%s\" and rank %d on \"%s\": ranks on "
                                                         "several hosts need the network transport, which this "
                                                         "build does not have yet",
                                                         rank, host, r, other)));
  }
  // Every rank is on this host (checked above), so the rank is also the local rank.
  Result<int> device = daemonDevice(cfg.value(), nullptr, rank, rank, /*autoPrefersGpu=*/true);
  if (!device.ok()) return fail(nullptr, device.status());
  Result<std::unique_ptr<occl::host::Backend>> backend = backendFor(cfg.value(), device.value());
  if (!backend.ok()) return fail(nullptr, backend.status());
  occl::host::CommOptions options;
  options.rank = rank;
  options.nRanks = nranks;
  options.config = cfg.value();
  options.backend = std::move(backend.value());
  options.connectors = shmConnectorsFor(boot.value()->nonce(), cfg.value().initTimeoutMs, device.value());
  occl::host::Bootstrap* bootstrap = boot.value().get();
  options.bootstrap = std::move(boot.value());
  occlResult_t r = makeComm(comm, std::move(options));
  if (r != occlSuccess) return r;
  occlComm_t created = *comm;
  bootstrap->setFailureCallback([created](int failedRank, const std::string& why) {
    created->impl->failFromPeer(absl::StrFormat("rank %d failed: %s", failedRank, why));
  });
  return occlSuccess;
}

occlResult_t occlCommInitRank(occlComm_t* comm, int nranks, occlUniqueId commId, int rank, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::host::UniqueIdData> id = occl::host::unpackUniqueId(commId);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, nranks, id.value(), rank, config);
}

occlResult_t occlCommInitFromEnv(occlComm_t* comm, const occlConfig_t* config) {
  if (comm == nullptr) return invalid("comm is NULL");
  *comm = nullptr;
  Result<occl::host::LauncherEnv> env = occl::host::detectLauncherEnv();
  if (!env.ok()) return fail(nullptr, env.status());
  Result<occl::host::UniqueIdData> id = occl::host::uniqueIdFromAddress(env.value().addr, env.value().port, 0);
  if (!id.ok()) return fail(nullptr, id.status());
  return initRankFrom(comm, env.value().size, id.value(), env.value().rank, config);
}

occlResult_t occlCommInitAll(occlComm_t* comms, int ndev, const int* devlist, const occlConfig_t* config) {
  if (comms == nullptr) return invalid("comms is NULL");
  if (ndev < 1) return fail(nullptr, Status::error(occlInvalidArgument, absl::StrFormat("ndev = %d: expected >= 1", ndev)));
  Result<occlConfig_t> cfg = resolveConfig(config);
  if (!cfg.ok()) return fail(nullptr, cfg.status());
  std::vector<int> devices(static_cast<size_t>(ndev));
  for (int r = 0; r < ndev; ++r) {
    Result<int> device = daemonDevice(cfg.value(), devlist, r, r, /*autoPrefersGpu=*/false);
    if (!device.ok()) return fail(nullptr, device.status());
    devices[static_cast<size_t>(r)] = device.value();
  }
  auto connectors = inProcessConnectors(devices);
  for (int r = 0; r < ndev; ++r) comms[r] = nullptr;
  auto destroyFirst = [&](int n) {
    for (int k = 0; k < n; ++k) {
      occlCommDestroy(comms[k]);
      comms[k] = nullptr;
    }
  };
  for (int r = 0; r < ndev; ++r) {
    Result<std::unique_ptr<occl::host::Backend>> backend = backendFor(cfg.value(), devices[static_cast<size_t>(r)]);
    if (!backend.ok()) {
      destroyFirst(r);
      return fail(nullptr, backend.status().withContext(absl::StrFormat("rank %d", r)));
    }
    occl::host::CommOptions options;
    options.rank = r;
    options.nRanks = ndev;
    options.config = cfg.value();
    options.backend = std::move(backend.value());
    options.connectors = connectors();
    if (occlResult_t res = makeComm(&comms[r], std::move(options)); res != occlSuccess) {
      destroyFirst(r);
      return res;
    }
  }
  return occlSuccess;
}

occlResult_t occlCommFinalize(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->finalize());
}

occlResult_t occlCommDestroy(occlComm_t comm) {
  if (comm == nullptr) return invalid("comm is NULL");
  if (comm->impl && comm->impl->onPollerThread()) return refuseInCallback(comm, "occlCommDestroy");
  delete comm;
  return occlSuccess;
}

occlResult_t occlCommAbort(occlComm_t comm) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (comm->impl->onPollerThread()) return refuseInCallback(comm, "occlCommAbort");
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

occlResult_t occlCollRegister(occlComm_t comm, uint64_t collId, const occlCollDesc_t* desc) {
  if (occlResult_t r = checkComm(comm)) return r;
  if (desc == nullptr) return fail(comm, Status::error(occlInvalidArgument, "desc is NULL"));
  return fail(comm, comm->impl->registerCollective(collId, *desc));
}

occlResult_t occlCollDeregister(occlComm_t comm, uint64_t collId) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->deregisterCollective(collId));
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

occlResult_t occlSubmit(occlComm_t comm, uint64_t collId, const void* sendbuf, void* recvbuf, occlCallback_t callback,
                        void* arg) {
  if (occlResult_t r = checkComm(comm)) return r;
  return fail(comm, comm->impl->submit(collId, sendbuf, recvbuf, callback, arg));
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

}  // extern "C"
