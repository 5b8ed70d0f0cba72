// The groups made from a group: occlCommSplit (dist.new_group and dist.split_group, where torch
// splits) and occlCommShrink (occl.torch.shrink). No rendezvous: the ranks meet through the parent.
#include <algorithm>
#include <set>

#include "torch_backend/process_group.hpp"
#include "torch_backend/tensor_checks.hpp"

namespace occl::torch_backend {

c10::intrusive_ptr<BackendBase> ProcessGroupOccl::splitRanks(const std::vector<int>& ranks,
                                                            std::chrono::milliseconds timeout) {
  TORCH_CHECK(comm_ != nullptr, "occl: the process group is shut down");
  const std::vector<int64_t> asked(ranks.begin(), ranks.end());
  std::set<int> seen;
  for (int r : ranks) {
    TORCH_CHECK(r >= 0 && r < size_, "occl: split into ranks ", join(asked), ": rank ", r,
                " is not a rank of this group of ", size_);
    TORCH_CHECK(seen.insert(r).second, "occl: split into ranks ", join(asked), ": rank ", r, " is listed twice");
  }
  const auto mine = std::find(ranks.begin(), ranks.end(), rank_);
  const bool member = mine != ranks.end();
  // Groups of one split are disjoint, so their smallest ranks tell them apart; the order asked for
  // is the new group's.
  const int color = member ? *std::min_element(ranks.begin(), ranks.end()) : OCCL_SPLIT_NOCOLOR;
  const int key = member ? static_cast<int>(mine - ranks.begin()) : 0;
  occlConfig_t config;
  const occlConfig_t* inherit = nullptr;  // the parent's
  if (timeout.count() > 0 && timeout != timeout_) {
    TORCH_CHECK(occlCommGetConfig(comm_, &config) == occlSuccess, "occl: ", occlGetLastError(comm_));
    config.collTimeoutMs = timeout.count();
    config.initTimeoutMs = timeout.count();
    inherit = &config;
  }
  occlComm_t child = nullptr;
  const occlResult_t r = occlCommSplit(comm_, color, key, &child, inherit);
  TORCH_CHECK(r == occlSuccess, "occl: split into ranks ", join(asked), ": ", occlGetErrorString(r), ": ",
              occlGetLastError(comm_));
  if (!member) return {};
  auto pg = c10::make_intrusive<ProcessGroupOccl>(AdoptComm{}, child, Origin::Split, inherit ? timeout : timeout_);
  TORCH_CHECK(pg->getRank() == key && pg->getSize() == static_cast<int>(ranks.size()), "occl: split into ranks ",
              join(asked), " made rank ", pg->getRank(), " of ", pg->getSize(), ", expected rank ", key, " of ",
              ranks.size());
  return pg;
}

#if OCCL_TORCH_SPLITS
c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupOccl::getBackendOptions() {
  return c10::make_intrusive<Options>(getBackendName(), timeout_);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupOccl::split(const c10::intrusive_ptr<c10d::Store>& /*store*/,
                                                          const std::vector<int>& ranks,
                                                          const c10::intrusive_ptr<Options>& opts) {
  return splitRanks(ranks, opts ? std::chrono::duration_cast<std::chrono::milliseconds>(opts->timeout)
                                : std::chrono::milliseconds(0));
}
#endif

c10::intrusive_ptr<BackendBase> ProcessGroupOccl::shrink(const std::vector<int>& exclude, bool abortPending) {
  TORCH_CHECK(comm_ != nullptr, "occl: the process group is shut down");
  occlComm_t child = nullptr;
  const occlResult_t r = occlCommShrink(comm_, exclude.data(), static_cast<int>(exclude.size()), &child, nullptr,
                                        abortPending ? OCCL_SHRINK_ABORT : OCCL_SHRINK_DEFAULT);
  TORCH_CHECK(r == occlSuccess, "occl: shrink without ", join(std::vector<int64_t>(exclude.begin(), exclude.end())),
              ": ", occlGetErrorString(r), ": ", occlGetLastError(comm_));
  auto pg = c10::make_intrusive<ProcessGroupOccl>(AdoptComm{}, child, Origin::Shrink, timeout_);
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, sig] : registered_) {
    const char* algorithm = nullptr;  // registered on the child: carried by the shrink
    if (occlCollGetAlgorithm(child, id, 0, &algorithm) == occlSuccess) pg->registered_.emplace(id, sig);
  }
  return pg;
}

}  // namespace occl::torch_backend
