// compare_nccl.hpp in builds without NCCL: the comparison is refused before anything runs.
#include "compare_nccl.hpp"

namespace occl::bench {

std::string ncclMissingFromBuild() {
  return "--compare nccl: this build has no NCCL (it needs the CUDA backend and nccl.h/libnccl in the CUDA "
         "toolkit when CMake configures; see its \"NCCL for --compare nccl\" line)";
}

std::string compareWithNccl(const Options&, const std::vector<int>&, Report&) { return ncclMissingFromBuild(); }

}  // namespace occl::bench
