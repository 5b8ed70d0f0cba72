#include "backend/residency.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/str_format.h"

namespace occl::backend {
namespace {

std::mutex& registryMu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, int>& registry() {
  static std::map<std::string, int> reserved;
  return reserved;
}

}  // namespace

ResidencyReservation::ResidencyReservation(ResidencyReservation&& o) noexcept
    : device_(std::move(o.device_)), blocks_(std::exchange(o.blocks_, 0)) {}

ResidencyReservation& ResidencyReservation::operator=(ResidencyReservation&& o) noexcept {
  if (this != &o) {
    ResidencyReservation old(std::move(*this));
    device_ = std::move(o.device_);
    blocks_ = std::exchange(o.blocks_, 0);
  }
  return *this;
}

ResidencyReservation::~ResidencyReservation() {
  if (blocks_ == 0) return;
  std::lock_guard<std::mutex> lock(registryMu());
  auto it = registry().find(device_);
  if (it == registry().end()) return;
  it->second -= blocks_;
  if (it->second <= 0) registry().erase(it);
}

int autoDaemonBlocks(int capacity, int inUse) {
  const int share = std::min(kAutoDaemonBlocks, capacity / 8);
  return std::max(1, std::min(share, capacity - inUse));
}

Result<ResidencyReservation> reserveResidency(const std::string& device, int blocks, int capacity,
                                              const std::string& what) {
  std::lock_guard<std::mutex> lock(registryMu());
  int& used = registry()[device];
  const bool chosen = blocks == 0;
  if (chosen) blocks = autoDaemonBlocks(capacity, used);
  const std::string asked = chosen ? absl::StrFormat("0 (auto: %d)", blocks) : absl::StrFormat("%d", blocks);
  if (blocks > capacity - used) {
    const int inUse = used;
    if (used == 0) registry().erase(device);
    if (inUse == 0)
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("config.daemonBlocks = %s: %s holds at most %d %s at once", asked, device,
                                           capacity, what));
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("config.daemonBlocks = %s: %s holds at most %d %s at once and other ranks of "
                                         "this process already keep %d resident there; every daemon block must be "
                                         "resident, so use fewer daemon blocks or fewer ranks per device",
                                         asked, device, capacity, what, inUse));
  }
  used += blocks;
  return ResidencyReservation(device, blocks);
}

}  // namespace occl::backend
