// NCCL timing and copy bandwidth for occl-bench's --compare nccl; see nccl_compare.hpp.
#include "nccl_compare.hpp"

#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "util/cuda_util.hpp"

namespace occl::host {

// One GPU's rank. Buffers only grow: `capacity` bytes each for send and receive.
struct NcclRank {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  size_t capacity = 0;
};

namespace {

Status ncclStatus(ncclResult_t r, const char* api) {
  if (r == ncclSuccess) return Status::success();
  occlResult_t code = occlSystemError;
  if (r == ncclUnhandledCudaError) code = occlUnhandledCudaError;
  if (r == ncclInvalidArgument) code = occlInvalidArgument;
  if (r == ncclInvalidUsage) code = occlInvalidUsage;
  return Status::error(code, absl::StrFormat("%s failed: %s (%s)", api, ncclGetErrorString(r), ncclGetLastError(nullptr)));
}

// Elements of each rank's send and receive buffers, and the count argument NCCL takes, for
// nccl-tests' meaning of `bytes` (see NcclRunSpec).
struct Geometry {
  size_t sendElems;
  size_t recvElems;
  size_t count;
};

// Every rank allocates both buffers, as the root would (device/coll_types.hpp).
Geometry geometryOf(const NcclRunSpec& s, size_t nRanks) {
  const size_t count = countForElems(s.coll, s.bytes / dtypeSize(s.datatype), static_cast<int>(nRanks));
  const auto [send, recv] = userElems(s.coll, count, static_cast<int>(nRanks), /*isRoot=*/true);
  return {send, recv, count};
}

// occl's dtypes and ops are numbered as NCCL's, so they pass through as they are. NCCL before
// 2.24 stops at bfloat16 (validate refuses the 8-bit types there).
static_assert(static_cast<int>(ncclBfloat16) == occlBfloat16, "occlDataType_t follows ncclDataType_t");
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 24, 0)
static_assert(static_cast<int>(ncclFloat8e4m3) == occlFloat8e4m3 && static_cast<int>(ncclFloat8e5m2) == occlFloat8e5m2,
              "occlDataType_t follows ncclDataType_t");
#endif
static_assert(static_cast<int>(ncclAvg) == occlAvg, "occlRedOp_t follows ncclRedOp_t");

Status validate(const NcclRunSpec& s, size_t nRanks) {
  if (!isCollType(s.coll) || collInfo(s.coll).pointToPoint)
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("NCCL comparison: collective %d is not one of allreduce..alltoall, gather, scatter", s.coll));
  if (s.datatype < 0 || s.datatype >= occlNumTypes)
    return Status::error(occlInvalidArgument, absl::StrFormat("NCCL comparison: datatype %d", s.datatype));
  if (s.datatype >= static_cast<int>(ncclNumTypes))
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("NCCL comparison: this NCCL (%d) has no datatype %s", NCCL_VERSION_CODE, dtypeName(s.datatype)));
  if (s.op < 0 || s.op >= occlNumOps) return Status::error(occlInvalidArgument, absl::StrFormat("NCCL comparison: op %d", s.op));
  if (s.root < 0 || s.root >= static_cast<int>(nRanks))
    return Status::error(occlInvalidArgument, absl::StrFormat("NCCL comparison: root %d", s.root));
  if (s.iters < 1 || s.warmupIters < 0)
    return Status::error(occlInvalidArgument, "NCCL comparison: iters must be >= 1 and warmupIters >= 0");
  return Status::success();
}

// Makes room for `bytes` in both buffers of `r`, zeroed on its own stream: the collectives run
// on that stream, so they are ordered after the memsets without a device-wide synchronisation.
Status reserve(NcclRank& r, size_t bytes) {
  if (bytes <= r.capacity) return Status::success();
  DeviceGuard guard(r.device);
  if (Status s = guard.status(); !s.ok()) return s;
  if (Status s = cudaStatus(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize", r.device); !s.ok()) return s;
  cudaFree(r.send);
  cudaFree(r.recv);
  r.send = r.recv = nullptr;
  r.capacity = 0;
  if (Status s = cudaStatus(cudaMalloc(&r.send, bytes), "cudaMalloc", r.device); !s.ok()) return s;
  if (Status s = cudaStatus(cudaMalloc(&r.recv, bytes), "cudaMalloc", r.device); !s.ok()) return s;
  r.capacity = bytes;
  if (Status s = cudaStatus(cudaMemsetAsync(r.send, 0, bytes, r.stream), "cudaMemsetAsync", r.device); !s.ok()) return s;
  return cudaStatus(cudaMemsetAsync(r.recv, 0, bytes, r.stream), "cudaMemsetAsync", r.device);
}

}  // namespace

NcclSession::NcclSession() = default;

NcclSession::~NcclSession() {
  for (NcclRank& r : ranks_) {
    DeviceGuard guard(r.device);
    if (r.comm != nullptr) ncclCommDestroy(r.comm);
    if (r.stream != nullptr) cudaStreamDestroy(r.stream);
    cudaFree(r.send);
    cudaFree(r.recv);
  }
}

Result<std::unique_ptr<NcclSession>> NcclSession::open(const std::vector<int>& devices) {
  if (devices.empty()) return Status::error(occlInvalidArgument, "NCCL comparison: no devices");
  if (std::set<int>(devices.begin(), devices.end()).size() != devices.size())
    return Status::error(occlInvalidArgument,
                         "NCCL comparison: NCCL runs at most one rank per GPU; the device list repeats a device");
  std::unique_ptr<NcclSession> session(new NcclSession());
  if (Status s = ncclStatus(ncclGetVersion(&session->version_), "ncclGetVersion"); !s.ok()) return s;
  std::vector<ncclComm_t> comms(devices.size());
  if (Status s = ncclStatus(ncclCommInitAll(comms.data(), static_cast<int>(comms.size()), devices.data()),
                            "ncclCommInitAll");
      !s.ok())
    return s;
  session->ranks_.resize(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    NcclRank& r = session->ranks_[i];
    r.device = devices[i];
    r.comm = comms[i];
    DeviceGuard guard(r.device);
    if (Status s = guard.status(); !s.ok()) return s;
    if (Status s = cudaStatus(cudaStreamCreateWithFlags(&r.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags",
                              r.device);
        !s.ok())
      return s;
  }
  return session;
}

Status NcclSession::launchOnce(const NcclRunSpec& spec, size_t count) {
  const auto type = static_cast<ncclDataType_t>(spec.datatype);
  const auto op = static_cast<ncclRedOp_t>(spec.op);
  if (Status s = ncclStatus(ncclGroupStart(), "ncclGroupStart"); !s.ok()) return s;
  for (const NcclRank& r : ranks_) {
    ncclResult_t res = ncclSuccess;
    switch (spec.coll) {
      case occlCollAllReduce: res = ncclAllReduce(r.send, r.recv, count, type, op, r.comm, r.stream); break;
      case occlCollAllGather: res = ncclAllGather(r.send, r.recv, count, type, r.comm, r.stream); break;
      case occlCollReduceScatter: res = ncclReduceScatter(r.send, r.recv, count, type, op, r.comm, r.stream); break;
      case occlCollReduce: res = ncclReduce(r.send, r.recv, count, type, op, spec.root, r.comm, r.stream); break;
      case occlCollBroadcast: res = ncclBroadcast(r.send, r.recv, count, type, spec.root, r.comm, r.stream); break;
      case occlCollGather: res = ncclGather(r.send, r.recv, count, type, spec.root, r.comm, r.stream); break;
      case occlCollScatter: res = ncclScatter(r.send, r.recv, count, type, spec.root, r.comm, r.stream); break;
      default: res = ncclAlltoAll(r.send, r.recv, count, type, r.comm, r.stream); break;
    }
    if (res != ncclSuccess) {
      ncclGroupEnd();
      return ncclStatus(res, "NCCL collective launch");
    }
  }
  return ncclStatus(ncclGroupEnd(), "ncclGroupEnd");
}

Status NcclSession::waitAll() {
  for (const NcclRank& r : ranks_)
    if (Status s = cudaStatus(cudaStreamSynchronize(r.stream), "cudaStreamSynchronize", r.device); !s.ok()) return s;
  return Status::success();
}

Result<double> NcclSession::timeUs(const NcclRunSpec& spec) {
  if (Status s = validate(spec, ranks_.size()); !s.ok()) return s;
  const Geometry g = geometryOf(spec, ranks_.size());
  const size_t bytes = std::max<size_t>(std::max(g.sendElems, g.recvElems) * dtypeSize(spec.datatype), 1);
  for (NcclRank& r : ranks_)
    if (Status s = reserve(r, bytes); !s.ok()) return s;
  using Clock = std::chrono::steady_clock;
  for (int i = 0; i < spec.warmupIters; ++i)
    if (Status s = launchOnce(spec, g.count); !s.ok()) return s;
  if (Status s = waitAll(); !s.ok()) return s;
  double totalUs = 0;
  auto start = Clock::now();
  for (int i = 0; i < spec.iters; ++i) {
    if (!spec.pipelined) start = Clock::now();
    if (Status s = launchOnce(spec, g.count); !s.ok()) return s;
    if (spec.pipelined) continue;
    if (Status s = waitAll(); !s.ok()) return s;
    totalUs += std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  if (spec.pipelined) {
    if (Status s = waitAll(); !s.ok()) return s;
    totalUs = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  return totalUs / spec.iters;
}

Result<double> deviceCopyBandwidthGBs(int device, size_t bytes, int iters) {
  if (bytes == 0 || iters < 1)
    return Status::error(occlInvalidArgument, "copy bandwidth: bytes must be > 0 and iters >= 1");
  DeviceGuard guard(device);
  if (Status s = guard.status(); !s.ok()) return s;
  void* src = nullptr;
  void* dst = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t begin = nullptr, end = nullptr;
  auto release = [&] {
    if (begin != nullptr) cudaEventDestroy(begin);
    if (end != nullptr) cudaEventDestroy(end);
    if (stream != nullptr) cudaStreamDestroy(stream);
    cudaFree(src);
    cudaFree(dst);
  };
  auto check = [&](cudaError_t e, const char* api) { return cudaStatus(e, api, device); };
  Status s = check(cudaMalloc(&src, bytes), "cudaMalloc");
  if (s.ok()) s = check(cudaMalloc(&dst, bytes), "cudaMalloc");
  if (s.ok()) s = check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  if (s.ok()) s = check(cudaEventCreate(&begin), "cudaEventCreate");
  if (s.ok()) s = check(cudaEventCreate(&end), "cudaEventCreate");
  if (s.ok()) s = check(cudaMemsetAsync(src, 1, bytes, stream), "cudaMemsetAsync");
  for (int i = 0; s.ok() && i < 2; ++i) s = check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  if (s.ok()) s = check(cudaEventRecord(begin, stream), "cudaEventRecord");
  for (int i = 0; s.ok() && i < iters; ++i)
    s = check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
  if (s.ok()) s = check(cudaEventRecord(end, stream), "cudaEventRecord");
  if (s.ok()) s = check(cudaEventSynchronize(end), "cudaEventSynchronize");
  float ms = 0;
  if (s.ok()) s = check(cudaEventElapsedTime(&ms, begin, end), "cudaEventElapsedTime");
  release();
  if (!s.ok()) return s;
  if (ms <= 0) return Status::error(occlInternalError, "copy bandwidth: the copies took no measurable time");
  return static_cast<double>(bytes) * iters / (static_cast<double>(ms) * 1e-3) / 1e9;
}

}  // namespace occl::host
