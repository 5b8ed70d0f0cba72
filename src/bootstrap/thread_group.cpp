#include "bootstrap/thread_group.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bootstrap/bootstrap.hpp"
#include "util/thread_name.hpp"

namespace occl::bootstrap {
namespace {

enum class Op { kAllGather, kBarrier };
const char* opName(Op op) { return op == Op::kAllGather ? "allGather" : "barrier"; }

class Shared {
 public:
  Shared(int n, int64_t timeoutMs)
      : n_(n), timeoutMs_(timeoutMs), nonce_(detail::randomNonce()), arrived_(n, false), board_(n), sources_(n) {}
  ~Shared() {
    {
      std::lock_guard<std::mutex> lock(tickMu_);
      stopTicker_ = true;
    }
    tickCv_.notify_all();
    if (ticker_.joinable()) ticker_.join();
  }

  uint64_t nonce() const { return nonce_; }

  // The group of `ranks`: made by the first of them to ask, forgotten once all have.
  std::shared_ptr<Shared> subgroup(const std::vector<int>& ranks, int64_t timeoutMs) {
    std::lock_guard<std::mutex> lock(subgroupsMu_);
    auto& [group, joined] = subgroups_[ranks];
    if (!group) group = std::make_shared<Shared>(static_cast<int>(ranks.size()), timeoutMs);
    std::shared_ptr<Shared> out = group;
    if (++joined == static_cast<int>(ranks.size())) subgroups_.erase(ranks);
    return out;
  }

  Status collective(int rank, Op op, void* data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mu_);
    if (failure_) return *failure_;
    if (count_ == 0) {
      op_ = op;
      bytes_ = bytes;
      buffers_[generation_ % 2].assign(bytes * static_cast<size_t>(n_), 0);
    } else if (op != op_ || bytes != bytes_) {
      return fail(Status::error(occlInvalidUsage,
                                absl::StrFormat("rank %d called %s with %d bytes per rank while another rank called %s "
                                                "with %d: every rank must make the same calls in the same order",
                                                rank, opName(op), bytes, opName(op_), bytes_)));
    }
    std::vector<char>& buffer = buffers_[generation_ % 2];
    if (bytes > 0) std::memcpy(buffer.data() + bytes * static_cast<size_t>(rank), static_cast<char*>(data) + bytes * static_cast<size_t>(rank), bytes);
    arrived_[static_cast<size_t>(rank)] = true;
    const uint64_t mine = generation_;
    if (++count_ == n_) {
      count_ = 0;
      std::fill(arrived_.begin(), arrived_.end(), false);
      ++generation_;
      cv_.notify_all();
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs_);
      while (generation_ == mine && !failure_) {
        if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == mine && !failure_) {
          std::vector<int> missing;
          for (int r = 0; r < n_; ++r)
            if (!arrived_[static_cast<size_t>(r)]) missing.push_back(r);
          return fail(Status::error(occlTimeout, absl::StrFormat("rank %d waited %d ms in %s for rank(s) %s of this "
                                                                 "process's %d-rank group",
                                                                 rank, timeoutMs_, opName(op),
                                                                 absl::StrJoin(missing, ", "), n_)));
        }
      }
      if (generation_ == mine) return *failure_;
    }
    if (bytes > 0) std::memcpy(data, buffers_[mine % 2].data(), bytes * static_cast<size_t>(n_));
    return Status::success();
  }

 // The status board (status_board.hpp): one thread reads every member's source each tick into
  // the one table that queries read; thread ranks are never silent while their process lives.
  void setBoardSource(int rank, BoardSource source) {
    std::lock_guard<std::mutex> lock(sourcesMu_);
    sources_[static_cast<size_t>(rank)] = std::move(source);
    std::lock_guard<std::mutex> tick(tickMu_);
    if (!ticker_.joinable()) ticker_ = std::thread([this] { tickerLoop(); });
  }

  BoardView queryBoard(int rank, std::span<const uint64_t> keys) {
    std::lock_guard<std::mutex> lock(boardMu_);
    return board_.query(keys, boardNowMs(), /*tracked=*/false, rank);
  }

 private:
  void tickerLoop() {
    nameThisThread("occl-board");
    std::vector<BoardEntry> entries;
    std::unique_lock<std::mutex> tick(tickMu_);
    while (!stopTicker_) {
      tick.unlock();
      {
        std::lock_guard<std::mutex> lock(sourcesMu_);
        for (int r = 0; r < n_; ++r) {
          const BoardSource& source = sources_[static_cast<size_t>(r)];
          entries.clear();
          if (!source || !source(entries)) continue;
          std::lock_guard<std::mutex> board(boardMu_);
          board_.replace(r, entries, boardNowMs());
        }
      }
      tick.lock();
      tickCv_.wait_for(tick, std::chrono::milliseconds(kBoardTickMs), [this] { return stopTicker_; });
    }
  }

  Status fail(Status s) {
    if (!failure_) failure_ = s;
    cv_.notify_all();
    return s;
  }

  const int n_;
  const int64_t timeoutMs_;
  const uint64_t nonce_;
  // threadSubgroup's groups being joined: the list of ranks -> (its group, how many have joined).
  std::mutex subgroupsMu_;
  std::map<std::vector<int>, std::pair<std::shared_ptr<Shared>, int>> subgroups_;
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t generation_ = 0;
  int count_ = 0;
  Op op_ = Op::kBarrier;
  size_t bytes_ = 0;
  std::vector<bool> arrived_;
  std::array<std::vector<char>, 2> buffers_;
  std::optional<Status> failure_;

  std::mutex boardMu_;  // guards board_
  BoardTable board_;
  std::mutex sourcesMu_;  // held while a source runs, so that setBoardSource waits for it
  std::vector<BoardSource> sources_;
  std::mutex tickMu_;  // guards stopTicker_ and the ticker's start
  std::condition_variable tickCv_;
  bool stopTicker_ = false;
  std::thread ticker_;  // declared last: it uses everything above
};

class Member final : public Group {
 public:
  Member(std::shared_ptr<Shared> shared, int rank, int n) : shared_(std::move(shared)), rank_(rank), n_(n) {}
  int rank() const override { return rank_; }
  int size() const override { return n_; }
  uint64_t nonce() const override { return shared_->nonce(); }
  Status allGather(void* data, size_t bytesPerRank) override {
    return shared_->collective(rank_, Op::kAllGather, data, bytesPerRank);
  }
  Status barrier() override { return shared_->collective(rank_, Op::kBarrier, nullptr, 0); }
  void setBoardSource(BoardSource source) override { shared_->setBoardSource(rank_, std::move(source)); }
  BoardView queryBoard(std::span<const uint64_t> keys, int64_t) override { return shared_->queryBoard(rank_, keys); }
  Shared& shared() const { return *shared_; }

 private:
  std::shared_ptr<Shared> shared_;
  const int rank_;
  const int n_;
};

}  // namespace

Result<std::unique_ptr<Group>> threadSubgroup(Group& member, const std::vector<int>& ranks, int64_t timeoutMs) {
  auto* mine = dynamic_cast<Member*>(&member);
  if (mine == nullptr) return Status::error(occlInternalError, "threadSubgroup of a group that is not of threads");
  const auto at = std::find(ranks.begin(), ranks.end(), mine->rank());
  if (at == ranks.end())
    return Status::error(occlInternalError, absl::StrFormat("threadSubgroup: rank %d is not in its list", mine->rank()));
  const int n = static_cast<int>(ranks.size());
  return std::unique_ptr<Group>(
      std::make_unique<Member>(mine->shared().subgroup(ranks, timeoutMs), static_cast<int>(at - ranks.begin()), n));
}

std::vector<std::unique_ptr<Group>> makeThreadGroup(int n, int64_t timeoutMs) {
  auto shared = std::make_shared<Shared>(n, timeoutMs);
  std::vector<std::unique_ptr<Group>> members;
  for (int r = 0; r < n; ++r) members.push_back(std::make_unique<Member>(shared, r, n));
  return members;
}

}  // namespace occl::bootstrap
