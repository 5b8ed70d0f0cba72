// Cross-rank agreement for the benchmark itself (max time over ranks, sum of #wrong, whether a
// row registered everywhere, who the ranks are), done through occl's own AllReduce on collIds
// of its own. It works the same for ranks as threads and ranks as processes, with no MPI. The
// values travel through a buffer of the rank's own kind (memory.hpp): device ranks' daemons
// cannot read host memory in general.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "memory.hpp"
#include "occl/occl.h"
#include "submit.hpp"

namespace occl::bench {

class SideChannel {
 public:
  static constexpr size_t kSlots = 4;
  using Maxes = std::array<double, kSlots>;
  using Sums = std::array<int64_t, kSlots>;

  // `buffer`: memory of the rank's kind, which the values are staged through.
  SideChannel(occlComm_t comm, std::chrono::milliseconds bound, std::unique_ptr<RunBuffer> buffer)
      : comm_(comm), bound_(bound), buffer_(std::move(buffer)) {}
  SideChannel(const SideChannel&) = delete;
  SideChannel& operator=(const SideChannel&) = delete;
  ~SideChannel();

  // Registers the two fixed-size reductions; returns "" or why it failed.
  std::string open();
  // In place: every slot of `maxes` becomes its maximum over ranks, of `sums` its sum.
  RunStatus combine(Maxes& maxes, Sums& sums);
  // In place sum over ranks of a vector of any length (each rank fills its own slots with
  // values and the rest with 0: an all-gather built on AllReduce).
  RunStatus sumVector(std::vector<int64_t>& values);
  // The communicator is about to be aborted: the destructor must not touch it.
  void detach() { open_ = false; }

 private:
  // Runs `parts` (which point into buffer_) on `bytes` of `values` staged through buffer_.
  RunStatus exchange(void* values, size_t bytes, std::span<const Submission> parts);

  occlComm_t comm_;
  std::chrono::milliseconds bound_;
  bool open_ = false;
  Completion done_;
  std::unique_ptr<RunBuffer> buffer_;
};

}  // namespace occl::bench
