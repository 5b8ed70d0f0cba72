// The pending tracker and the communicator set of torture.hpp.
#include "torture/torture.hpp"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace occl::torture {

PendingTracker::PendingTracker(int nRanks)
    : outstandingByRank_(static_cast<size_t>(nRanks), 0), completions_(static_cast<size_t>(nRanks)) {}

PendingTracker::Slot* PendingTracker::slot(int rank, uint64_t collId) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = index_.try_emplace({rank, collId}, nullptr);
  if (fresh) it->second = &slots_.emplace_back(Slot{this, rank, collId});
  return it->second;
}

occlResult_t PendingTracker::submit(occlComm_t comm, Slot* s, const void* sendbuf, void* recvbuf, occlGate_t* gate) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    s->outstanding += 1;
    outstandingByRank_[static_cast<size_t>(s->rank)] += 1;
  }
  occlResult_t r = gate != nullptr
                       ? occlSubmitGated(comm, s->collId, sendbuf, recvbuf, &PendingTracker::callback, s, gate)
                       : occlSubmit(comm, s->collId, sendbuf, recvbuf, &PendingTracker::callback, s);
  if (r != occlSuccess) {
    std::lock_guard<std::mutex> lock(mu_);
    s->outstanding -= 1;
    outstandingByRank_[static_cast<size_t>(s->rank)] -= 1;
  }
  return r;
}

void PendingTracker::callback(uint64_t collId, occlResult_t status, void* arg) {
  auto* s = static_cast<Slot*>(arg);
  s->owner->complete(*s, status);
}

void PendingTracker::complete(Slot& s, occlResult_t status) {
  std::lock_guard<std::mutex> lock(mu_);
  s.outstanding -= 1;
  outstandingByRank_[static_cast<size_t>(s.rank)] -= 1;
  completions_[static_cast<size_t>(s.rank)].push_back(s.collId);
  if (status != occlSuccess) {
    if (failed_++ == 0) {
      char buf[160];
      std::snprintf(buf, sizeof(buf), "rank %d collId 0x%llx: %s", s.rank, static_cast<unsigned long long>(s.collId),
                    occlGetErrorString(status));
      firstFailure_ = buf;
    }
  }
  cv_.notify_all();
}

bool PendingTracker::wait(int rank, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  auto drained = [&] {
    if (cancelled_) return true;
    if (rank >= 0) return outstandingByRank_[static_cast<size_t>(rank)] == 0;
    return std::all_of(outstandingByRank_.begin(), outstandingByRank_.end(), [](int n) { return n == 0; });
  };
  bool ok = cv_.wait_for(lock, timeout, drained);
  return ok && !cancelled_;
}

void PendingTracker::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
  cv_.notify_all();
}

bool PendingTracker::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

std::string PendingTracker::describePending() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream out;
  int lastRank = -1;
  for (const auto& [key, s] : index_) {
    if (s->outstanding == 0) continue;
    out << (lastRank == key.first ? " " : lastRank < 0 ? "rank " : "; rank ");
    if (lastRank != key.first) out << key.first << ": ";
    out << "0x" << std::hex << key.second << std::dec << " (" << s->outstanding << " pending)";
    lastRank = key.first;
  }
  return lastRank < 0 ? "nothing pending" : out.str();
}

uint64_t PendingTracker::failedCallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

std::string PendingTracker::firstFailure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return firstFailure_;
}

std::vector<uint64_t> PendingTracker::completionOrder(int rank) const {
  std::lock_guard<std::mutex> lock(mu_);
  return completions_[static_cast<size_t>(rank)];
}

CommSet::~CommSet() {
  for (occlComm_t c : comms_)
    if (c != nullptr) occlCommDestroy(c);
}

occlResult_t CommSet::initAll(int n, const occlConfig_t& config, size_t* first) {
  std::vector<occlComm_t> fresh(static_cast<size_t>(n), nullptr);
  occlResult_t r = occlCommInitAll(fresh.data(), n, nullptr, &config);
  if (r != occlSuccess) return r;
  if (first != nullptr) *first = comms_.size();
  comms_.insert(comms_.end(), fresh.begin(), fresh.end());
  return occlSuccess;
}

occlResult_t CommSet::initFromEnv(const occlConfig_t& config, size_t* first) {
  occlComm_t comm = nullptr;
  occlResult_t r = occlCommInitFromEnv(&comm, &config);
  if (r != occlSuccess) return r;
  if (first != nullptr) *first = comms_.size();
  comms_.push_back(comm);
  return occlSuccess;
}

size_t CommSet::adopt(occlComm_t comm) {
  comms_.push_back(comm);
  return comms_.size() - 1;
}

void CommSet::abortAll() {
  for (occlComm_t& c : comms_) {
    if (c != nullptr) occlCommAbort(c);
    c = nullptr;
  }
}

void reportHang(PendingTracker& tracker, const std::string& why) {
  if (tracker.cancelled()) return;  // another rank reported first
  std::fprintf(stderr, "[torture] %s; pending: %s\n", why.c_str(), tracker.describePending().c_str());
  tracker.cancel();
}

}  // namespace occl::torture
