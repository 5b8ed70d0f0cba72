// The status board over the TCP bootstrap (status_board.hpp): the root keeps every rank's table;
// each leaf's monitor sends what changed in its own every tick (or an empty delta as a keepalive),
// the root's sends a keepalive to every leaf; a leaf's query is a round trip to the root.
#include <poll.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/link.hpp"
#include "util/log.hpp"

namespace occl::bootstrap {
namespace {

bool hasRoom(const Socket& socket) {
  pollfd p{socket.fd(), POLLOUT, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0;
}

// Board frames from the monitor wait at most this long for a socket that had room.
constexpr int64_t kBoardSendWaitMs = 1000;

}  // namespace

void Bootstrap::setBoardSource(BoardSource source) {
  std::lock_guard<std::mutex> lock(sourceMu_);
  source_ = std::move(source);
}

void Bootstrap::sendBoardFrame(Link& link, uint32_t type, const std::vector<char>& payload) {
  std::unique_lock<std::mutex> send(link.sendMu, std::try_to_lock);
  if (!send.owns_lock() || !hasRoom(link.socket)) return;
  (void)sendFrame(link.socket, type, 0, payload.data(), payload.size(), deadlineAfterMs(kBoardSendWaitMs));
}

bool Bootstrap::readSource(std::vector<BoardEntry>& entries) {
  std::lock_guard<std::mutex> lock(sourceMu_);
  return source_ && source_(entries);
}

void Bootstrap::refreshOwnTable(int64_t now) {
  std::vector<BoardEntry> entries;
  if (!readSource(entries)) return;
  std::lock_guard<std::mutex> lock(boardMu_);
  board_.replace(rank_, entries, now);
}

void Bootstrap::boardTick() {
  const int64_t now = boardNowMs();
  const bool keepalive = now - lastBoardSendMs_ >= kBoardKeepaliveMs;
  if (rank_ == 0) {
    refreshOwnTable(now);
    if (!keepalive) return;
    lastBoardSendMs_ = now;
    for (auto& link : links_) sendBoardFrame(*link, kBoardAlive, {});
    return;
  }
  Link& root = *links_[0];
  // The table is read and its delta taken only once it can go: a delta taken and dropped would
  // be lost for good, and a read whose delta cannot go is wasted.
  std::unique_lock<std::mutex> send(root.sendMu, std::try_to_lock);
  if (!send.owns_lock() || !hasRoom(root.socket)) return;
  std::vector<BoardEntry> entries;
  const BoardDelta delta = readSource(entries) ? sender_.diff(entries) : BoardDelta{};
  if (delta.empty() && !keepalive) return;
  lastBoardSendMs_ = now;
  const std::vector<char> payload = encodeDelta(delta);
  (void)sendFrame(root.socket, kBoardDelta, 0, payload.data(), payload.size(), deadlineAfterMs(kBoardSendWaitMs));
}

void Bootstrap::boardFrame(Link& link, Frame frame) {
  const int64_t now = boardNowMs();
  if (rank_ != 0) {
    rootHeardMs_.store(now, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(boardMu_);
    lastQueryUnanswered_ = false;
    if (frame.type == kBoardAnswer && frame.payload.size() >= sizeof(uint64_t)) {
      uint64_t id = 0;
      std::memcpy(&id, frame.payload.data(), sizeof(id));
      answers_[id] = std::move(frame.payload);
      answerCv_.notify_all();
    }
    return;
  }
  if (frame.type == kBoardDelta) {
    Result<BoardDelta> delta = decodeDelta(frame.payload);
    std::lock_guard<std::mutex> lock(boardMu_);
    if (delta.ok()) {
      board_.apply(link.peer, *delta, now);
    } else {
      board_.heard(link.peer, now);
      logWarning(absl::StrFormat("bootstrap root: %s from %s", delta.status().message, link.name));
    }
    return;
  }
  if (frame.type != kBoardQuery) return;
  auto query = decodeQuery(frame.payload);
  if (!query.ok()) {
    logWarning(absl::StrFormat("bootstrap root: %s from %s", query.status().message, link.name));
    return;
  }
  std::vector<char> answer;
  {
    std::lock_guard<std::mutex> lock(boardMu_);
    board_.heard(link.peer, now);
    answer = encodeView(query->first, board_.query(query->second, now, /*tracked=*/true, /*self=*/0));
  }
  // The asker waits for it: sent even if the link's lock is taken (a collective's result).
  (void)link.send(kBoardAnswer, 0, answer.data(), answer.size(), deadlineAfterMs(kBoardSendWaitMs));
}

BoardView Bootstrap::queryBoard(std::span<const uint64_t> keys, int64_t timeoutMs) {
  const int64_t now = boardNowMs();
  if (rank_ == 0 || nranks_ == 1) {
    if (nranks_ == 1) refreshOwnTable(now);  // no monitor: the table is read now
    std::lock_guard<std::mutex> lock(boardMu_);
    return board_.query(keys, now, /*tracked=*/true, rank_);
  }
  auto unanswered = [&] {
    BoardView v;
    v.ranks.resize(static_cast<size_t>(nranks_));
    const int64_t heard = rootHeardMs_.load(std::memory_order_relaxed);
    v.ranks[0].silentMs = heard == 0 ? -1 : boardNowMs() - heard;
    v.ranks[static_cast<size_t>(rank_)].silentMs = 0;
    return v;
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (failure_ || closing_) return unanswered();
  }
  const uint64_t id = nextQueryId_.fetch_add(1, std::memory_order_relaxed) + 1;
  {
    std::lock_guard<std::mutex> lock(boardMu_);
    if (lastQueryUnanswered_) return unanswered();  // until the root is heard from again
  }
  const Deadline deadline = deadlineAfterMs(timeoutMs);
  const std::vector<char> ask = encodeQuery(id, keys);
  Status sent = links_[0]->send(kBoardQuery, 0, ask.data(), ask.size(), deadline);
  std::unique_lock<std::mutex> lock(boardMu_);
  const bool got = sent.ok() && answerCv_.wait_until(lock, deadline, [&] { return answers_.contains(id); });
  if (!got) {
    lastQueryUnanswered_ = true;
    return unanswered();
  }
  std::vector<char> bytes = std::move(answers_[id]);
  absl::erase_if(answers_, [&](const auto& kv) { return kv.first <= id; });  // late answers of earlier asks
  lock.unlock();
  auto view = decodeView(bytes, keys.size(), nranks_);
  if (!view.ok()) {
    logWarning(absl::StrFormat("bootstrap rank %d: %s from the root", rank_, view.status().message));
    return unanswered();
  }
  view->second.ranks[static_cast<size_t>(rank_)].silentMs = 0;
  return std::move(view->second);
}

}  // namespace occl::bootstrap
