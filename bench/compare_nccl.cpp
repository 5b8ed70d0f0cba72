#include "compare_nccl.hpp"

namespace occl::bench {

std::string ncclComparisonUnavailable() {
  // occl-bench drives host buffers only so far (memory.hpp), and this build links no NCCL: the
  // comparison lands together with device buffers for the CUDA backend.
  return "--compare nccl: NCCL comparison needs the CUDA backend and a GPU (with NCCL); not available in this "
         "build, measuring occl only";
}

}  // namespace occl::bench
