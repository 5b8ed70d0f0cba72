// The bootstrap's failure detection and shutdown (bootstrap.hpp): the monitor thread watches every
// link, turns a peer's loss or its notice into the failure callback, and the root forwards the
// news; close and abort say goodbye.
#include <poll.h>
#include <unistd.h>

#include "absl/strings/str_format.h"
#include "bootstrap/bootstrap.hpp"
#include "bootstrap/link.hpp"
#include "bootstrap/notices.hpp"
#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace occl::bootstrap {

using namespace notices;

void Bootstrap::monitorLoop() {
  std::vector<pollfd> fds;
  std::vector<Link*> polled;
  while (!stopping_.load()) {
    fds.assign(1, pollfd{wakeFd_, POLLIN, 0});
    polled.clear();
    for (auto& link : links_) {
      if (!link->polled) continue;
      fds.push_back(pollfd{link->socket.fd(), POLLIN, 0});
      polled.push_back(link.get());
    }
    // Woken every board tick as well (bootstrap_board.cpp).
    if (::poll(fds.data(), fds.size(), static_cast<int>(kBoardTickMs)) < 0) {
      if (errno == EINTR) continue;
      reportFailure(-1, Status::systemError(absl::StrFormat("bootstrap monitor of rank %d: poll", rank_), errno).message);
      return;
    }
    if (fds[0].revents != 0) {
      uint64_t drained;
      (void)!::read(wakeFd_, &drained, sizeof(drained));
    }
    for (size_t i = 0; i < polled.size() && !stopping_.load(); ++i) {
      if (fds[i + 1].revents != 0) serviceLink(*polled[i]);
    }
    if (!stopping_.load()) boardTick();
  }
}

void Bootstrap::serviceLink(Link& link) {
  std::vector<Frame> frames;
  auto open = link.reader.pump(link.socket, frames);
  for (auto& f : frames) dispatch(link, std::move(f));
  if (!open.ok()) {
    onLinkClosed(link, open.status().message);
  } else if (!*open) {
    onLinkClosed(link, "connection closed");
  }
}

void Bootstrap::dispatch(Link& link, Frame frame) {
  if (isBoardFrame(frame.type)) {
    boardFrame(link, std::move(frame));
    return;
  }
  if (frame.type == kPeerFailed) {
    auto [rank, why] = decodeNote(frame.payload);
    reportFailure(rank, why);
    return;
  }
  if (frame.type == kAbort) {
    reportFailure(link.peer, absl::StrFormat("%s aborted: %s", link.name, decodeNote(frame.payload).second));
    return;
  }
  std::lock_guard lk(mu_);
  if (frame.type == kGoodbye) {
    link.saidGoodbye = true;
  } else {
    link.inbox.push_back(std::move(frame));
  }
  cv_.notify_all();
}

void Bootstrap::onLinkClosed(Link& link, const std::string& why) {
  link.polled = false;
  {
    std::lock_guard lk(mu_);
    link.closed = true;
    cv_.notify_all();
    if (link.saidGoodbye || closing_) return;
  }
  std::string msg = absl::StrFormat("rank %d lost %s: %s without an orderly close (process died?)", rank_,
                                    link.name, why);
  reportFailure(link.peer, msg);
}

void Bootstrap::reportFailure(int rank, const std::string& why) {
  FailureCallback callback;
  {
    std::lock_guard lk(mu_);
    if (failure_ || closing_) return;
    failure_ = Status::error(occlRemoteError, why);
    failedRank_ = rank;
    cv_.notify_all();
    if (callback_ && !callbackFired_) {
      callbackFired_ = true;
      callback = callback_;
    }
  }
  logInfo(LogSubsys::Bootstrap, absl::StrFormat("rank %d learnt that rank %d failed: %s", rank_, rank, why));
  // Tell the others first: the callback may close this bootstrap, and its goodbyes must not
  // overtake the notice.
  if (rank_ == 0) propagateFailure(rank, why);
  if (callback) callback(rank, why);
}

// The root is the only one connected to everybody: it forwards the news, then half-closes every
// connection so that a rank that misses the notice still sees its root go away.
void Bootstrap::propagateFailure(int rank, const std::string& why) {
  auto note = encodeNote(rank, why);
  for (auto& link : links_) {
    if (link->peer == rank) continue;
    (void)link->send(kPeerFailed, 0, note.data(), note.size(), deadlineAfterMs(kNoticeWaitMs));
    link->socket.shutdownWrite();
  }
}

void Bootstrap::setFailureCallback(FailureCallback callback) {
  FailureCallback now;
  int rank = -1;
  std::string why;
  {
    std::lock_guard lk(mu_);
    callback_ = std::move(callback);
    if (failure_ && callback_ && !callbackFired_) {
      callbackFired_ = true;
      now = callback_;
      rank = failedRank_;
      why = failure_->message;
    }
  }
  if (now) now(rank, why);
}

// ---- shutdown ----

Status Bootstrap::close() { return finish(kGoodbye, {}); }

Status Bootstrap::abort(const std::string& why) { return finish(kAbort, encodeNote(rank_, why)); }

Status Bootstrap::finish(uint32_t farewell, const std::vector<char>& note) {
  if (closed_.exchange(true)) return Status::success();
  {
    std::lock_guard lk(mu_);
    closing_ = true;
    cv_.notify_all();
  }
  // The monitor stops first, so that a failure notice it is sending goes out before our
  // farewell. Only an established bootstrap says farewell: after a failed rendezvous the peers
  // already have their answer. Sockets stay open until destruction, so no reset overtakes it.
  bool established = monitor_.joinable();
  stopping_.store(true);
  uint64_t one = 1;
  (void)!::write(wakeFd_, &one, sizeof(one));
  if (monitor_.joinable() && monitor_.get_id() != std::this_thread::get_id()) monitor_.join();
  if (!established) return Status::success();
  for (auto& link : links_) {
    (void)link->send(farewell, 0, note.data(), note.size(), deadlineAfterMs(kNoticeWaitMs));
    link->socket.shutdownWrite();
  }
  return Status::success();
}

}  // namespace occl::bootstrap
