// Cross-rank agreement for the benchmark itself (max time over ranks, sum of #wrong, whether a
// row registered everywhere, who the ranks are), done through occl's own AllReduce on collIds
// of its own. It works the same for ranks as threads and ranks as processes, with no MPI.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "occl/occl.h"
#include "submit.hpp"

namespace occl::bench {

class SideChannel {
 public:
  static constexpr size_t kSlots = 4;
  using Maxes = std::array<double, kSlots>;
  using Sums = std::array<int64_t, kSlots>;

  SideChannel(occlComm_t comm, std::chrono::milliseconds bound) : comm_(comm), bound_(bound) {}
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
  occlComm_t comm_;
  std::chrono::milliseconds bound_;
  bool open_ = false;
  Completion done_;
};

}  // namespace occl::bench
