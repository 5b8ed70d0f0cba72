#include "torch_backend/process_group.hpp"

#include <pybind11/pybind11.h>

#include <cstring>
#include <set>
#include <thread>

#include "device/coll_types.hpp"
#include "primitives/reduce_ops.hpp"
#include "torch_backend/tensor_checks.hpp"

namespace occl::torch_backend {
namespace {

// Groups still open, so that occl.torch's atexit hook can shut them down while the poller may
// still take the GIL (interpreter teardown would destroy them after that is no longer possible).
std::mutex gOpenMu;
std::set<ProcessGroupOccl*> gOpen;

Signature signature(CallKind call, int collType, const at::Tensor& t, int op, uint64_t count, const char* name) {
  Signature s;
  s.call = call;
  s.collType = collType;
  s.datatype = dtypeOf(t, name);
  s.op = op;
  s.count = count;
  s.tag = currentTag();
  s.sizeClass = sizeClassesOn();
  return s;
}

// PREMUL_SUM's factor, converted to the call's dtype, enters its signature.
void setPreMulScalar(Signature& sig, const c10d::ReduceOp& op, const at::Tensor& t) {
  if (sig.op == ops::kOpPreMulSum) sig.preMulScalar = preMulScalarBits(op, t);
}

c10::intrusive_ptr<WorkOccl> makeWork(int rank, c10d::OpType op, const Signature& sig,
                                      std::vector<at::Tensor> outputs, std::vector<at::Tensor> keep,
                                      std::function<void()> epilogue = nullptr) {
  return c10::make_intrusive<WorkOccl>(rank, op, sig.describe(), std::move(outputs), std::move(keep),
                                       std::move(epilogue));
}

int commRank(occlComm_t comm) {
  int rank = -1;
  TORCH_CHECK(occlCommUserRank(comm, &rank) == occlSuccess, "occl: ", occlGetLastError(comm));
  return rank;
}

int commSize(occlComm_t comm) {
  int size = 0;
  TORCH_CHECK(occlCommCount(comm, &size) == occlSuccess, "occl: ", occlGetLastError(comm));
  return size;
}

}  // namespace

ProcessGroupOccl::ProcessGroupOccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  // Rank 0 publishes occl's unique id under a key of this generation of the group's store (a
  // store may see the group created again after a destroy: each creation counts its ranks in).
  const int64_t joined = store->add("occl/joined", 1);
  const std::string key = "occl/unique_id/" + std::to_string((joined - 1) / size);
  occlUniqueId id{};
  if (rank == 0) {
    occlResult_t r = occlGetUniqueId(&id);
    TORCH_CHECK(r == occlSuccess, "occl: creating the unique id: ", occlGetLastError(nullptr));
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    TORCH_CHECK(bytes.size() == sizeof(id.internal), "occl: the store's ", key, " holds ", bytes.size(),
                " bytes, expected ", sizeof(id.internal));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  occlConfig_t config;
  TORCH_CHECK(occlConfigInit(&config) == occlSuccess, "occl: ", occlGetLastError(nullptr));
  if (timeout.count() > 0) {
    config.collTimeoutMs = timeout.count();
    config.initTimeoutMs = timeout.count();
  }
  timeout_ = std::chrono::milliseconds(config.collTimeoutMs > 0 ? config.collTimeoutMs : OCCL_MAX_TIMEOUT_MS);
  occlResult_t r = occlCommInitRank(&comm_, size, id, rank, &config);
  TORCH_CHECK(r == occlSuccess, "occl: init of rank ", rank, " of ", size, ": ", occlGetErrorString(r), ": ",
              occlGetLastError(nullptr));
  std::lock_guard<std::mutex> lock(gOpenMu);
  gOpen.insert(this);
}

ProcessGroupOccl::ProcessGroupOccl(AdoptComm, occlComm_t comm, Origin origin, std::chrono::milliseconds timeout)
    : BackendBase(commRank(comm), commSize(comm)), comm_(comm), origin_(origin), timeout_(timeout) {
  std::lock_guard<std::mutex> lock(gOpenMu);
  gOpen.insert(this);
}

ProcessGroupOccl::~ProcessGroupOccl() {
  // finalize waits for callbacks, which may need the GIL (a tensor's last reference): never hold
  // it while waiting.
  if (Py_IsInitialized() && PyGILState_Check()) {
    pybind11::gil_scoped_release release;
    shutdown();
  } else {
    shutdown();
  }
}

void ProcessGroupOccl::shutdown() {
  {
    std::lock_guard<std::mutex> lock(gOpenMu);
    gOpen.erase(this);
  }
  occlComm_t comm = std::exchange(comm_, nullptr);
  if (comm == nullptr) return;
  occlCommFinalize(comm);  // a failure here (a dead peer) was already reported to the calls it failed
  occlCommDestroy(comm);
}

void shutdownAll() {
  std::set<ProcessGroupOccl*> open;
  {
    std::lock_guard<std::mutex> lock(gOpenMu);
    open = gOpen;
  }
  for (ProcessGroupOccl* pg : open) pg->close();
}

void ProcessGroupOccl::close() { shutdown(); }

std::string ProcessGroupOccl::peerTransport(int peer) const {
  const char* t = nullptr;
  TORCH_CHECK(comm_ != nullptr, "occl: the process group is shut down");
  TORCH_CHECK(occlCommPeerTransport(comm_, peer, &t) == occlSuccess, "occl: ", occlGetLastError(comm_));
  return t;
}

size_t ProcessGroupOccl::registeredCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  return registered_.size();
}

uint64_t ProcessGroupOccl::registeredBytes() const {
  TORCH_CHECK(comm_ != nullptr, "occl: the process group is shut down");
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t bytes = 0;
  for (const auto& [id, sig] : registered_) {
    occlCollStats_t s{};
    TORCH_CHECK(occlCollGetStats(comm_, id, &s) == occlSuccess, "occl: ", occlGetLastError(comm_));
    bytes += s.connectorBytes + s.scratchBytes;
  }
  return bytes;
}

uint64_t ProcessGroupOccl::registered(const Signature& sig) {
  TORCH_CHECK(comm_ != nullptr, "occl: the process group is shut down");
  const uint64_t id = sig.collId();
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = registered_.find(id); it != registered_.end()) {
    TORCH_CHECK(it->second.sameRegistration(sig), "occl: collective id 0x", std::hex, id, " of ", sig.describe(),
                " collides with ", it->second.describe(), "; wrap one in occl.torch.coll_id(tag)");
    return id;
  }
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = sig.collType;
  d.count = sig.registeredCount();
  d.variableCount = sig.sizeClass && !sig.vector ? 1 : 0;
  d.vectorCounts = sig.vector ? 1 : 0;
  d.datatype = sig.datatype;
  d.op = sig.op;
  d.root = sig.root;
  if (sig.op == ops::kOpPreMulSum) {  // the registration keeps the scalar: the op goes right after
    uint64_t scalar = sig.preMulScalar;
    occlRedOp_t op;
    occlResult_t made = occlRedOpCreatePreMulSum(&op, &scalar, static_cast<occlDataType_t>(sig.datatype),
                                                 occlScalarHostImmediate, comm_);
    TORCH_CHECK(made == occlSuccess, "occl: ", sig.describe(), ": ", occlGetLastError(comm_));
    d.op = op;
  }
  occlResult_t r = occlCollRegister(comm_, id, &d);
  if (sig.op == ops::kOpPreMulSum) occlRedOpDestroy(static_cast<occlRedOp_t>(d.op), comm_);
  TORCH_CHECK(r == occlSuccess, "occl: registering ", sig.describe(), ": ", occlGetErrorString(r), ": ",
              occlGetLastError(comm_));
  registered_.emplace(id, sig);
  return id;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::submit(const Signature& sig, const void* send, void* recv,
                                                        c10::intrusive_ptr<WorkOccl> work, const occlVectors_t* vectors) {
  if (sig.count == 0) {  // nothing moves; occl registers no empty collective
    work->complete(occlSuccess, "");
    return work;
  }
  const uint64_t id = registered(sig);
  work->comm_ = comm_;
  WorkOccl* raw = work.get();
  c10::raw::intrusive_ptr::incref(raw);  // the submission's reference, released by onComplete
  // occl takes config.maxInflightPerColl submissions of one id at once (occlInProgress beyond):
  // like a full NCCL queue, the call waits for an earlier one to complete, within the timeout.
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  occlResult_t r;
  for (int attempt = 0;; ++attempt) {
    r = vectors != nullptr ? occlSubmitV(comm_, id, send, recv, vectors, &WorkOccl::onComplete, raw)
                           : occlSubmitCount(comm_, id, sig.count, send, recv, &WorkOccl::onComplete, raw);
    if (r != occlInProgress || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(1000, 10 << std::min(attempt, 7))));
  }
  if (r != occlSuccess) {
    c10::raw::intrusive_ptr::decref(raw);
    TORCH_CHECK(false, "occl: ", sig.describe(), ": ", occlGetErrorString(r), ": ", occlGetLastError(comm_));
  }
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  at::Tensor& t = single(tensors, "allreduce");
  Signature sig = signature(CallKind::AllReduce, occlCollAllReduce, t, opOf(opts.reduceOp, "allreduce"),
                            static_cast<uint64_t>(t.numel()), "allreduce");
  setPreMulScalar(sig, opts.reduceOp, t);
  return submit(sig, t.data_ptr(), t.data_ptr(), makeWork(rank_, c10d::OpType::ALLREDUCE, sig, {t}, {t}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  at::Tensor& t = single(tensors, "broadcast");
  Signature sig = signature(CallKind::Broadcast, occlCollBroadcast, t, 0, static_cast<uint64_t>(t.numel()), "broadcast");
  sig.root = checkedRoot(opts.rootRank, opts.rootTensor, size_, "broadcast");
  return submit(sig, t.data_ptr(), t.data_ptr(), makeWork(rank_, c10d::OpType::BROADCAST, sig, {t}, {t}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  at::Tensor& t = single(tensors, "reduce");
  Signature sig = signature(CallKind::Reduce, occlCollReduce, t, opOf(opts.reduceOp, "reduce"),
                            static_cast<uint64_t>(t.numel()), "reduce");
  setPreMulScalar(sig, opts.reduceOp, t);
  sig.root = checkedRoot(opts.rootRank, opts.rootTensor, size_, "reduce");
  void* recv = rank_ == sig.root ? t.data_ptr() : nullptr;  // other ranks' tensors stay as they are
  return submit(sig, t.data_ptr(), recv, makeWork(rank_, c10d::OpType::REDUCE, sig, {t}, {t}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllgatherOptions&) {
  at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "occl: allgather takes one output list per process, got ", outputs.size());
  std::vector<at::Tensor>& outs = outputs[0];
  TORCH_CHECK(static_cast<int>(outs.size()) == size_, "occl: allgather: ", outs.size(),
              " output tensors, expected one per rank (", size_, ")");
  bool uneven = false;
  for (const at::Tensor& o : outs) uneven = uneven || o.numel() != in.numel();
  if (uneven) return unevenAllGather(in, outs);
  for (const at::Tensor& o : outs) checkSameShape(o, in, "allgather", "an output tensor");
  Signature sig = signature(CallKind::AllGather, occlCollAllGather, in, 0, static_cast<uint64_t>(in.numel()), "allgather");
  return allGatherInto(in, outs, sig, c10d::OpType::ALLGATHER);
}

// The list forms of allgather and gather: an AllGather into one staging tensor, copied out to
// `outs` (empty on a rank that keeps nothing) on completion.
c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::allGatherInto(at::Tensor& in, const std::vector<at::Tensor>& outs,
                                                               const Signature& sig, c10d::OpType op) {
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
  const size_t bytes = static_cast<size_t>(in.numel()) * in.element_size();
  auto epilogue = [outs, flat, bytes] {
    const auto* src = static_cast<const char*>(flat.data_ptr());
    for (size_t i = 0; i < outs.size(); ++i) std::memcpy(outs[i].data_ptr(), src + i * bytes, bytes);
  };
  std::vector<at::Tensor> keep = outs;
  keep.push_back(in);
  keep.push_back(flat);
  return submit(sig, in.data_ptr(), flat.data_ptr(), makeWork(rank_, op, sig, outs, std::move(keep), epilogue));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                        std::vector<at::Tensor>& inputs,
                                                        const c10d::GatherOptions& opts) {
  at::Tensor& in = single(inputs, "gather");
  const int root = checkedRoot(opts.rootRank, 0, size_, "gather");
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TORCH_CHECK(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_, "occl: gather: the root takes ",
                "one output list of ", size_, " tensors");
    outs = outputs[0];
    for (const at::Tensor& o : outs) checkSameShape(o, in, "gather", "an output tensor");
  } else {
    TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                "occl: gather: only the root takes output tensors");
  }
  Signature sig = signature(CallKind::Gather, occlCollGather, in, 0, static_cast<uint64_t>(in.numel()), "gather");
  sig.root = root;
  if (rank_ != root)  // sends its input; receives nothing
    return submit(sig, in.data_ptr(), nullptr, makeWork(rank_, c10d::OpType::GATHER, sig, {}, {in}));
  return allGatherInto(in, outs, sig, c10d::OpType::GATHER);  // into one staging tensor, copied out
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::scatter(std::vector<at::Tensor>& outputs,
                                                         std::vector<std::vector<at::Tensor>>& inputs,
                                                         const c10d::ScatterOptions& opts) {
  at::Tensor& out = single(outputs, "scatter");
  const int root = checkedRoot(opts.rootRank, 0, size_, "scatter");
  Signature sig = signature(CallKind::Scatter, occlCollScatter, out, 0, static_cast<uint64_t>(out.numel()), "scatter");
  sig.root = root;
  if (rank_ != root) {  // receives its share; sends nothing
    TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                "occl: scatter: only the root takes input tensors");
    return submit(sig, nullptr, out.data_ptr(), makeWork(rank_, c10d::OpType::SCATTER, sig, {out}, {out}));
  }
  TORCH_CHECK(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_, "occl: scatter: the root takes ",
              "one input list of ", size_, " tensors");
  for (const at::Tensor& i : inputs[0]) checkSameShape(i, out, "scatter", "an input tensor");
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * out.numel()}, out.options());
  fillFrom(flat, inputs[0]);
  return submit(sig, flat.data_ptr(), out.data_ptr(), makeWork(rank_, c10d::OpType::SCATTER, sig, {out}, {out, flat}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                 const c10d::AllgatherOptions&) {
  checkOneToAll(input, "the input", output, "the output", size_, "_allgather_base");
  Signature sig = signature(CallKind::AllGather, occlCollAllGather, input, 0, static_cast<uint64_t>(input.numel()),
                            "_allgather_base");
  return submit(sig, input.data_ptr(), output.data_ptr(),
                makeWork(rank_, c10d::OpType::_ALLGATHER_BASE, sig, {output}, {output, input}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                                const c10d::ReduceScatterOptions& opts) {
  at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "occl: reduce_scatter takes one input list per process, got ", inputs.size());
  std::vector<at::Tensor>& ins = inputs[0];
  TORCH_CHECK(static_cast<int>(ins.size()) == size_, "occl: reduce_scatter: ", ins.size(),
              " input tensors, expected one per rank (", size_, ")");
  for (const at::Tensor& i : ins) checkSameShape(i, out, "reduce_scatter", "an input tensor");
  at::Tensor flat = at::empty({static_cast<int64_t>(size_) * out.numel()}, out.options());
  fillFrom(flat, ins);
  Signature sig = signature(CallKind::ReduceScatter, occlCollReduceScatter, out, opOf(opts.reduceOp, "reduce_scatter"),
                            static_cast<uint64_t>(out.numel()), "reduce_scatter");
  setPreMulScalar(sig, opts.reduceOp, out);
  return submit(sig, flat.data_ptr(), out.data_ptr(),
                makeWork(rank_, c10d::OpType::REDUCE_SCATTER, sig, {out}, {out, flat}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                      const c10d::ReduceScatterOptions& opts) {
  checkOneToAll(output, "the output", input, "the input", size_, "_reduce_scatter_base");
  Signature sig = signature(CallKind::ReduceScatter, occlCollReduceScatter, output,
                            opOf(opts.reduceOp, "_reduce_scatter_base"), static_cast<uint64_t>(output.numel()),
                            "_reduce_scatter_base");
  setPreMulScalar(sig, opts.reduceOp, output);
  return submit(sig, input.data_ptr(), output.data_ptr(),
                makeWork(rank_, c10d::OpType::_REDUCE_SCATTER_BASE, sig, {output}, {output, input}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions&) {
  checkTensor(input, "alltoall_base", "the input");
  checkTensor(output, "alltoall_base", "the output");
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "occl: alltoall_base: the output (", output.scalar_type(),
              ") must have the input's type (", input.scalar_type(), ")");
  // Split sizes, even or not, make it an AllToAllv: whether a rank's splits happen to be even
  // (all of them 0, say) must not change which collective it joins, since the others may not be.
  if (!inputSplits.empty() || !outputSplits.empty()) return unevenAllToAll(output, input, outputSplits, inputSplits);
  TORCH_CHECK(output.numel() == input.numel(), "occl: alltoall_base: the output (", output.numel(),
              " elements) must match the input (", input.numel(), ")");
  TORCH_CHECK(input.numel() % size_ == 0, "occl: alltoall_base: ", input.numel(),
              " elements do not split evenly over ", size_, " ranks");
  Signature sig = signature(CallKind::AllToAll, occlCollAllToAll, input, 0,
                            static_cast<uint64_t>(input.numel() / size_), "alltoall_base");
  return submit(sig, input.data_ptr(), output.data_ptr(),
                makeWork(rank_, c10d::OpType::ALLTOALL_BASE, sig, {output}, {output, input}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  return pointToPoint(tensors, dstRank, tag, /*sending=*/true);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  return pointToPoint(tensors, srcRank, tag, /*sending=*/false);
}

// A send and its recv register Send and Recv under one key: (sender, receiver, torch's tag).
c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::pointToPoint(std::vector<at::Tensor>& tensors, int peer, int tag,
                                                              bool sending) {
  const char* call = sending ? "send" : "recv";
  at::Tensor& t = single(tensors, call);
  TORCH_CHECK(peer >= 0 && peer < size_ && peer != rank_, "occl: ", call, ": ", sending ? "destination " : "source ",
              peer, " must be another rank of this group of ", size_);
  Signature sig = signature(CallKind::PointToPoint, sending ? occlCollSend : occlCollRecv, t, 0,
                            static_cast<uint64_t>(t.numel()), call);
  sig.root = peer;
  sig.src = sending ? rank_ : peer;
  sig.dst = sending ? peer : rank_;
  sig.p2pTag = tag;
  return submit(sig, sending ? t.data_ptr() : nullptr, sending ? nullptr : t.data_ptr(),
                makeWork(rank_, sending ? c10d::OpType::SEND : c10d::OpType::RECV, sig, {t}, {t}));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::barrier(const c10d::BarrierOptions&) {
  // Every rank contributes to one int32 sum: it completes once all ranks have entered.
  at::Tensor token = at::zeros({1}, at::kInt);
  Signature sig = signature(CallKind::Barrier, occlCollAllReduce, token, occlSum, 1, "barrier");
  return submit(sig, token.data_ptr(), token.data_ptr(),
                makeWork(rank_, c10d::OpType::BARRIER, sig, {token}, {token}));
}

}  // namespace occl::torch_backend
