// The backend's calls with per-rank sizes: all_to_all_single with split sizes and all_gather into
// tensors of different sizes, as occl's v-collectives (desc.vectorCounts, occlSubmitV). One
// registration per dtype (and coll_id tag) serves every split, since the registered count is the
// bound kVectorBlockBound, the same on every rank.
#include <algorithm>
#include <cstring>

#include "torch_backend/process_group.hpp"
#include "torch_backend/tensor_checks.hpp"

namespace occl::torch_backend {
namespace {

// A v-collective's signature: no op, the bound as its count, never a size class.
Signature vectorSignature(CallKind call, int collType, const at::Tensor& t, const char* name) {
  Signature s;
  s.call = call;
  s.collType = collType;
  s.datatype = dtypeOf(t, name);
  s.count = kVectorBlockBound;
  s.tag = currentTag();
  s.vector = true;
  return s;
}

}  // namespace

// all_gather into tensors of different sizes (rank q's output tensor holds rank q's input): an
// AllGatherv (desc.vectorCounts) into one staging tensor, copied out on completion.
c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::unevenAllGather(at::Tensor& in, const std::vector<at::Tensor>& outs) {
  std::vector<size_t> counts, displs;
  size_t total = 0;
  for (size_t q = 0; q < outs.size(); ++q) {
    checkTensor(outs[q], "allgather", "an output tensor");
    TORCH_CHECK(outs[q].scalar_type() == in.scalar_type(), "occl: allgather: output tensor ", q, " is ",
                outs[q].scalar_type(), ", the input ", in.scalar_type());
    TORCH_CHECK(static_cast<uint64_t>(outs[q].numel()) <= kVectorBlockBound, "occl: allgather: output tensor ", q,
                " has ", outs[q].numel(), " elements; at most ", kVectorBlockBound);
    counts.push_back(static_cast<size_t>(outs[q].numel()));
    displs.push_back(total);
    total += counts.back();
  }
  TORCH_CHECK(outs[static_cast<size_t>(rank_)].numel() == in.numel(), "occl: allgather: this rank's output tensor has ",
              outs[static_cast<size_t>(rank_)].numel(), " elements and its input ", in.numel(), "; they must match");
  const Signature sig = vectorSignature(CallKind::AllGather, occlCollAllGather, in, "allgather");
  at::Tensor flat = at::empty({static_cast<int64_t>(std::max<size_t>(total, 1))}, in.options());
  const size_t elemBytes = static_cast<size_t>(in.element_size());
  auto epilogue = [outs, flat, displs, elemBytes] {
    const auto* src = static_cast<const char*>(flat.data_ptr());
    for (size_t q = 0; q < outs.size(); ++q)
      std::memcpy(outs[q].data_ptr(), src + displs[q] * elemBytes, static_cast<size_t>(outs[q].numel()) * elemBytes);
  };
  std::vector<at::Tensor> keep = outs;
  keep.push_back(in);
  keep.push_back(flat);
  const occlVectors_t v{nullptr, nullptr, counts.data(), displs.data()};
  return submit(sig, in.data_ptr(), flat.data_ptr(),
                c10::make_intrusive<WorkOccl>(rank_, c10d::OpType::ALLGATHER, sig.describe(), outs, std::move(keep),
                                              epilogue),
                &v);
}

// all_to_all_single with split sizes: an AllToAllv (desc.vectorCounts) whose blocks are the splits'
// rows, packed in rank order as torch lays them out; one registration per dtype serves every split.
c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::unevenAllToAll(at::Tensor& output, at::Tensor& input,
                                                                const std::vector<int64_t>& outputSplits,
                                                                const std::vector<int64_t>& inputSplits) {
  Splits in = splitsOf(input, inputSplits, size_, "input");
  Splits out = splitsOf(output, outputSplits, size_, "output");
  TORCH_CHECK(in.rowElems == out.rowElems || input.numel() == 0 || output.numel() == 0,
              "occl: alltoall_base: a row of the input has ", in.rowElems, " elements and one of the output ",
              out.rowElems, "; they must match");
  for (const Splits* s : {&in, &out})
    for (size_t c : s->counts)
      TORCH_CHECK(c <= kVectorBlockBound, "occl: alltoall_base: a block of ", c, " elements; at most ",
                  kVectorBlockBound, " per rank's block");
  const Signature sig = vectorSignature(CallKind::AllToAll, occlCollAllToAll, input, "alltoall_base");
  auto work = c10::make_intrusive<WorkOccl>(rank_, c10d::OpType::ALLTOALL_BASE, sig.describe(),
                                            std::vector<at::Tensor>{output}, std::vector<at::Tensor>{output, input},
                                            nullptr);
  const occlVectors_t v{in.counts.data(), in.displs.data(), out.counts.data(), out.displs.data()};
  return submit(sig, input.data_ptr(), output.data_ptr(), std::move(work), &v);
}

}  // namespace occl::torch_backend
