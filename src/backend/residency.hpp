// Daemon blocks that must be resident at once, counted per device across this process (defect D3
// of the CUDA daemon). A daemon block waits on the others' progress, so a block that never
// becomes resident stalls its SQ cursor and every submission times out. One communicator's
// kernel fitting the GPU is not enough: several ranks of a process may share a device, and their
// persistent kernels run side by side. Each backend reserves its blocks here at creation and
// gives them back at destruction; a reservation past the device's capacity fails with a message
// naming the numbers. Processes cannot see each other's reservations: several processes on one
// GPU must leave room for one another (and need MPS to run side by side; docs/design.md).
#pragma once

#include <string>

#include "util/status.hpp"

namespace occl::backend {

class ResidencyReservation {
 public:
  ResidencyReservation() = default;
  ResidencyReservation(std::string device, int blocks) : device_(std::move(device)), blocks_(blocks) {}
  ResidencyReservation(ResidencyReservation&& o) noexcept;
  ResidencyReservation& operator=(ResidencyReservation&& o) noexcept;
  ~ResidencyReservation();

  int blocks() const { return blocks_; }

 private:
  std::string device_;
  int blocks_ = 0;
};

// Reserves `blocks` of the `capacity` daemon blocks that `device` (a name such as "CUDA device
// 0") holds at once; `blocks` = 0 reserves autoDaemonBlocks() of them, chosen under the same
// lock as the reservation. `what` describes one block in the error ("daemon blocks of 512 threads").
Result<ResidencyReservation> reserveResidency(const std::string& device, int blocks, int capacity,
                                              const std::string& what);

// config.daemonBlocks = 0 (auto) on a device that holds `capacity` daemon blocks at once, of
// which `inUse` are reserved: kAutoDaemonBlocks (a large collective's most parts,
// host/algorithms.hpp), or an eighth of the device where that is less (eight ranks of a process
// share one GPU), or what is left where that is less, but at least 1 (the reservation then
// fails with its message). A collective's parts do not depend on it: a block runs several.
inline constexpr int kAutoDaemonBlocks = 16;
int autoDaemonBlocks(int capacity, int inUse);

}  // namespace occl::backend
