// --compare nccl: run NCCL on the same sizes next to occl. Needs the CUDA backend, a GPU and
// NCCL; this is the one place that decides whether that is possible.
#pragma once

#include <string>

namespace occl::bench {

// Why the NCCL comparison cannot run here, or "" when it can.
std::string ncclComparisonUnavailable();

}  // namespace occl::bench
