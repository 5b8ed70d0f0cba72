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
      if (outs[q].numel() > 0)
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

namespace {

// A list of per-rank tensors of one dtype as blocks packed in rank order, in elements.
struct Packed {
  std::vector<size_t> counts, displs;
  size_t total = 0;
};
Packed packedOf(const std::vector<at::Tensor>& tensors, const at::Tensor& like, int size, const char* what) {
  TORCH_CHECK(static_cast<int>(tensors.size()) == size, "occl: alltoall: ", tensors.size(), " ", what,
              " tensors, expected one per rank (", size, ")");
  Packed p;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, "alltoall", what);
    TORCH_CHECK(t.scalar_type() == like.scalar_type(), "occl: alltoall: ", what, " tensors of ", t.scalar_type(),
                " and ", like.scalar_type());
    TORCH_CHECK(static_cast<uint64_t>(t.numel()) <= kVectorBlockBound, "occl: alltoall: an ", what, " tensor of ",
                t.numel(), " elements; at most ", kVectorBlockBound);
    p.counts.push_back(static_cast<size_t>(t.numel()));
    p.displs.push_back(p.total);
    p.total += p.counts.back();
  }
  return p;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupOccl::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions&) {
  TORCH_CHECK(!inputs.empty(), "occl: alltoall: no input tensors");
  const Packed in = packedOf(inputs, inputs[0], size_, "input");
  const Packed out = packedOf(outputs, inputs[0], size_, "output");
  const Signature sig = vectorSignature(CallKind::AllToAll, occlCollAllToAll, inputs[0], "alltoall");
  at::Tensor flatIn = at::empty({static_cast<int64_t>(std::max<size_t>(in.total, 1))}, inputs[0].options());
  at::Tensor flatOut = at::empty({static_cast<int64_t>(std::max<size_t>(out.total, 1))}, inputs[0].options());
  const size_t elemBytes = static_cast<size_t>(inputs[0].element_size());
  auto* staged = static_cast<char*>(flatIn.data_ptr());
  for (size_t q = 0; q < inputs.size(); ++q)
    if (in.counts[q] > 0) std::memcpy(staged + in.displs[q] * elemBytes, inputs[q].data_ptr(), in.counts[q] * elemBytes);
  auto epilogue = [outputs, flatOut, out, elemBytes] {
    const auto* src = static_cast<const char*>(flatOut.data_ptr());
    for (size_t q = 0; q < outputs.size(); ++q)
      if (out.counts[q] > 0) std::memcpy(outputs[q].data_ptr(), src + out.displs[q] * elemBytes, out.counts[q] * elemBytes);
  };
  std::vector<at::Tensor> keep = outputs;
  keep.push_back(flatIn);
  keep.push_back(flatOut);
  const occlVectors_t v{in.counts.data(), in.displs.data(), out.counts.data(), out.displs.data()};
  return submit(sig, flatIn.data_ptr(), flatOut.data_ptr(),
                c10::make_intrusive<WorkOccl>(rank_, c10d::OpType::ALLTOALL, sig.describe(), outputs, std::move(keep),
                                              epilogue),
                &v);
}

}  // namespace occl::torch_backend
