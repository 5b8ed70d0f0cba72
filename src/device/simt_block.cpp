#include "device/simt_block.hpp"

#include "device/simt_crossings.hpp"
#include "device/simt_memory.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace occl::exec::simt {

thread_local LaneId tLane;
std::atomic<bool> gLanesStarted{false};

void barrier(Block& block, SyncSite site) { block.barrier(tLane.index, site); }
int* broadcastSlot(Block& block) { return block.slot(); }

namespace {

bool sameSite(SyncSite a, SyncSite b) {
  return a.line == b.line && (a.file == b.file || std::strcmp(a.file, b.file) == 0);
}

}  // namespace

Block::Block(int lanes, uint32_t jitterSeed)
    : lanes_(lanes), jitterSeed_(jitterSeed), sites_(static_cast<size_t>(lanes), SyncSite{"", 0}) {}

void Block::run(const std::function<void()>& body) {
  gLanesStarted.store(true, std::memory_order_relaxed);  // before any lane: they start after it
  {
    std::lock_guard<std::mutex> lock(mu_);
    arrived_ = 0;
    returned_ = 0;
  }
  std::vector<std::thread> others;
  others.reserve(static_cast<size_t>(lanes_ - 1));
  for (int l = 1; l < lanes_; ++l) others.emplace_back([this, l, &body] { runLane(l, body); });
  runLane(0, body);
  for (auto& t : others) t.join();
}

void Block::runLane(int lane, const std::function<void()>& body) {
  const LaneId outer = tLane;
  tLane = LaneId{this, lane, lanes_, countingCrossings()};
  {
    DeviceAccess device;  // a lane is device code: emulated device memory is its own
    body();
  }
  tLane = outer;
  std::lock_guard<std::mutex> lock(mu_);
  returned_ += 1;
  if (arrived_ != 0) {
    for (int l = 0; l < lanes_; ++l)
      if (sites_[static_cast<size_t>(l)].line != 0) divergence("returned", lane, {"the kernel's end", 0}, l, sites_[static_cast<size_t>(l)]);
  }
}

void Block::barrier(int lane, SyncSite site) {
  std::unique_lock<std::mutex> lock(mu_);
  if (returned_ != 0) divergence("waits at a barrier", lane, site, -1, {"the kernel's end", 0});
  for (int l = 0; l < lanes_; ++l) {
    const SyncSite other = sites_[static_cast<size_t>(l)];
    if (other.line != 0 && !sameSite(other, site)) divergence("waits at a barrier", lane, site, l, other);
  }
  sites_[static_cast<size_t>(lane)] = site;
  const uint64_t generation = generation_;
  if (++arrived_ == lanes_) {
    arrived_ = 0;
    generation_ += 1;
    for (SyncSite& s : sites_) s = SyncSite{"", 0};
    cv_.notify_all();
  } else {
    cv_.wait(lock, [&] { return generation_ != generation; });
  }
  lock.unlock();
  maybeDelay(lane);
}

void Block::divergence(const char* what, int lane, SyncSite site, int other, SyncSite otherSite) const {
  if (other < 0) {
    std::fprintf(stderr, "occl simt: divergent barrier: lane %d %s %s:%d while another lane has returned\n", lane,
                 what, site.file, site.line);
  } else {
    std::fprintf(stderr, "occl simt: divergent barrier: lane %d %s %s:%d while lane %d waits at %s:%d\n", lane, what,
                 site.file, site.line, other, otherSite.file, otherSite.line);
  }
  std::fflush(stderr);
  std::abort();
}

// A non-leader lane leaves one barrier in eight 20..80 us late (xorshift per lane, seeded so a
// run can be repeated).
void Block::maybeDelay(int lane) {
  if (jitterSeed_ == 0 || lane == 0) return;
  thread_local uint32_t state = 0;
  if (state == 0) state = jitterSeed_ * 2654435761u + static_cast<uint32_t>(lane) * 40503u + 1u;
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  if ((state & 7u) != 0) return;
  std::this_thread::sleep_for(std::chrono::microseconds(20 + (state >> 8) % 61));
}

}  // namespace occl::exec::simt
