// ProcessGroupOccl: torch.distributed's backend "occl". One occl communicator per process group,
// whose rendezvous goes through the group's c10d Store (rank 0 publishes occl's unique id there),
// or which occlCommSplit or occlCommShrink made from another group's (process_group_children.cpp).
// Every call maps to a collective id (coll_key.hpp), registered on first use and cached, and is
// submitted at once; occl's callback completes the returned Work.
//
// Tensors: one dense CPU tensor per call (per process), of a dtype occl has; reductions SUM,
// PRODUCT, MIN, MAX and AVG. Anything else raises RuntimeError naming it, never a wrong result.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "occl/occl.h"
#include "torch_backend/coll_key.hpp"
#include "torch_backend/compat.hpp"
#include "torch_backend/work.hpp"

namespace occl::torch_backend {

class ProcessGroupOccl : public BackendBase {
 public:
  ProcessGroupOccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  // How a group's communicator was made: by a rendezvous through the store, or from a parent.
  enum class Origin { Rendezvous, Split, Shrink };
  // A group over a communicator made from a parent (split, shrink), which it then owns.
  struct AdoptComm {};
  ProcessGroupOccl(AdoptComm, occlComm_t comm, Origin origin, std::chrono::milliseconds timeout);
  ~ProcessGroupOccl() override;

  const std::string getBackendName() const override { return "occl"; }
  Origin origin() const { return origin_; }

#if OCCL_TORCH_SPLITS
  bool supportsSplitting() const override { return true; }
  // What splitGroup hands a child when its caller gave no options: this group's timeout.
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // dist.split_group: splitGroup() calls it on every rank of this group, `ranks` the group ranks
  // of the caller's new group (or of another one, where the caller is in none).
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
#endif
  // occlCommSplit of this group's communicator, which every rank of the group calls: the ranks
  // `ranks` (group ranks, distinct) become a new group ranked in that order; a caller not among
  // them takes part and gets null (OCCL_SPLIT_NOCOLOR). The new group's collectives wait up to
  // `timeout` (zero: this group's). Registrations are not carried: the new group registers its
  // calls on first use, as a new group does.
  c10::intrusive_ptr<BackendBase> splitRanks(const std::vector<int>& ranks, std::chrono::milliseconds timeout);

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  // occl's Gather and Scatter: the root's list of tensors goes through one staging tensor.
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  // all_to_all's list form: tensor q of `inputs` goes to rank q, tensor q of `outputs` comes from
  // rank q, of any sizes (an AllToAllv through staging tensors).
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  // occl's view of this group: "shm", "in-process", ... to `peer`.
  std::string peerTransport(int peer) const;
  // Collectives registered so far (one per distinct signature).
  size_t registeredCount() const;
  // The connector and scratch bytes of those registrations (occlCollStats_t), on this rank.
  uint64_t registeredBytes() const;
  // Finalizes and frees the communicator (idempotent; the destructor calls it).
  void close();
  // occlCommShrink of this group's communicator without the group ranks `exclude` (after one died
  // or hangs): a group of the survivors, ranked in order, that keeps the collectives the new
  // communicator carried (its AllReduces, asked of it), so the same calls go on without a new
  // registration. `abortPending`: OCCL_SHRINK_ABORT (this group's pending calls fail first).
  c10::intrusive_ptr<BackendBase> shrink(const std::vector<int>& exclude, bool abortPending);

 private:
  // Registers `sig` under its id on first use; returns the id.
  uint64_t registered(const Signature& sig);
  c10::intrusive_ptr<c10d::Work> allGatherInto(at::Tensor& in, const std::vector<at::Tensor>& outs,
                                               const Signature& sig, c10d::OpType op);
  // allgather into output tensors of different sizes: an AllGatherv.
  c10::intrusive_ptr<c10d::Work> unevenAllGather(at::Tensor& in, const std::vector<at::Tensor>& outs);
  // alltoall_base with uneven splits: an AllToAllv.
  c10::intrusive_ptr<c10d::Work> unevenAllToAll(at::Tensor& output, at::Tensor& input,
                                                const std::vector<int64_t>& outputSplits,
                                                const std::vector<int64_t>& inputSplits);
  c10::intrusive_ptr<c10d::Work> pointToPoint(std::vector<at::Tensor>& tensors, int peer, int tag, bool sending);
  // `vectors`: a v-collective's blocks (sig.vector), else nullptr.
  c10::intrusive_ptr<c10d::Work> submit(const Signature& sig, const void* send, void* recv,
                                        c10::intrusive_ptr<WorkOccl> work, const occlVectors_t* vectors = nullptr);
  void shutdown();

  occlComm_t comm_ = nullptr;
  Origin origin_ = Origin::Rendezvous;
  std::chrono::milliseconds timeout_;  // how long a call waits for room to submit
  mutable std::mutex mu_;  // guards registered_
  std::unordered_map<uint64_t, Signature> registered_;
};

// Closes every group still open: occl.torch's atexit hook, before the interpreter tears down.
void shutdownAll();

}  // namespace occl::torch_backend
