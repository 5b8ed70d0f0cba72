// --compare nccl: NCCL on the same rows as occl, over the GPUs occl's ranks ran on (one NCCL
// rank per GPU), once occl's communicators are gone so that no daemon kernel shares the GPUs.
// Two implementations with these declarations: compare_nccl_cuda.cpp where the build found NCCL
// (src/ then defines the target occl_nccl_compare), compare_nccl_host.cpp otherwise.
#pragma once

#include <string>
#include <vector>

#include "options.hpp"
#include "report.hpp"

namespace occl::bench {

// "" when this build can run NCCL, else the error that says it cannot.
std::string ncclMissingFromBuild();

// Times NCCL on every row of `report` (NCCL's launch-to-completion time of each iteration, as
// occl's is submit-to-callback) over `devices`, which must be distinct, and adds a "# nccl" line
// per row. Returns "" or why NCCL could not run.
std::string compareWithNccl(const Options& options, const std::vector<int>& devices, Report& report);

}  // namespace occl::bench
