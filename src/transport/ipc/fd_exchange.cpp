#include "transport/ipc/fd_exchange.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_format.h"

namespace occl::transport::ipc {
namespace {

constexpr uint32_t kMagic = 0x6f636669;  // "ocfi"
constexpr uint32_t kMaxFds = 8;

// What a connection carries besides its descriptors (in SCM_RIGHTS, in `pools` order).
struct Message {
  uint32_t magic;
  int32_t rank;
  uint32_t nFds;
  uint32_t pools[kMaxFds];
};

sockaddr_un addressOf(uint64_t nonce, int rank, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract: sun_path[0] stays 0, the name follows, and no file is made.
  const std::string name = absl::StrFormat("occl-%016x-ipc-%d", nonce, rank);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Waits until `fd` has `events` or the deadline passes.
bool await(int fd, short events, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return false;
  }
}

Status send(uint64_t nonce, int rank, int peer, const std::vector<PoolFd>& fds) {
  if (fds.size() > kMaxFds)
    return Status::error(occlInternalError, absl::StrFormat("%d descriptors for rank %d: at most %d", fds.size(), peer, kMaxFds));
  Socket s(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) return Status::systemError("socket(AF_UNIX)", errno);
  socklen_t length = 0;
  const sockaddr_un to = addressOf(nonce, peer, &length);
  if (connect(s.get(), reinterpret_cast<const sockaddr*>(&to), length) != 0)
    return Status::systemError(absl::StrFormat("connecting to rank %d's IPC socket", peer), errno);
  Message m{kMagic, rank, static_cast<uint32_t>(fds.size()), {}};
  for (size_t i = 0; i < fds.size(); ++i) m.pools[i] = fds[i].pool;
  iovec io{&m, sizeof(m)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr h{};
  h.msg_iov = &io;
  h.msg_iovlen = 1;
  if (!fds.empty()) {
    h.msg_control = control;
    h.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&h);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    for (size_t i = 0; i < fds.size(); ++i) std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fds[i].fd, sizeof(int));
  }
  ssize_t n;
  do n = sendmsg(s.get(), &h, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof(m)))
    return Status::systemError(absl::StrFormat("sending descriptors to rank %d", peer), n < 0 ? errno : EPROTO);
  return Status::success();
}

// One connection's message: its sender's rank and descriptors, or an error for a connection to
// refuse (its descriptors closed).
Result<std::pair<int, std::vector<PoolFd>>> receive(int conn, std::chrono::steady_clock::time_point deadline) {
  ucred cred{};
  socklen_t credLength = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &credLength) != 0)
    return Status::systemError("SO_PEERCRED of an IPC connection", errno);
  if (!await(conn, POLLIN, deadline)) return Status::error(occlTimeout, "an IPC connection sent nothing");
  Message m{};
  iovec io{&m, sizeof(m)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr h{};
  h.msg_iov = &io;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof(control);
  ssize_t n;
  do n = recvmsg(conn, &h, MSG_CMSG_CLOEXEC | MSG_WAITALL);
  while (n < 0 && errno == EINTR);
  std::vector<int> fds;
  for (cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr; c = CMSG_NXTHDR(&h, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  auto refuse = [&](const std::string& why) -> Status {
    for (int fd : fds) close(fd);
    return Status::error(occlSystemError, why);
  };
  if (cred.uid != getuid()) return refuse(absl::StrFormat("an IPC connection from uid %d, not this user's", cred.uid));
  if (n != static_cast<ssize_t>(sizeof(m)) || m.magic != kMagic || (h.msg_flags & MSG_CTRUNC) != 0 ||
      m.nFds != fds.size())
    return refuse("an IPC connection sent no well-formed message");
  std::vector<PoolFd> out;
  for (size_t i = 0; i < fds.size(); ++i) out.push_back({m.pools[i], fds[i]});
  return std::pair<int, std::vector<PoolFd>>{m.rank, std::move(out)};
}

}  // namespace

Result<std::map<int, std::vector<PoolFd>>> exchangeFds(uint64_t nonce, int rank, const std::vector<int>& peers,
                                                       const std::function<Result<std::vector<PoolFd>>(int peer)>& fdsFor,
                                                       const std::function<Status()>& barrier, int64_t timeoutMs) {
  Socket listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  Status listening = listener.get() < 0 ? Status::systemError("socket(AF_UNIX)", errno) : Status::success();
  if (listening.ok()) {
    socklen_t length = 0;
    const sockaddr_un at = addressOf(nonce, rank, &length);
    if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&at), length) != 0 ||
        listen(listener.get(), static_cast<int>(peers.size()) + 1) != 0)
      listening = Status::systemError(absl::StrFormat("listening on rank %d's IPC socket", rank), errno);
  }
  // Every rank calls the barrier, also one that cannot listen: its peers then fail to connect
  // rather than wait in the barrier for it.
  if (Status s = barrier(); !s.ok()) return s;
  if (!listening.ok()) return listening;
  for (int peer : peers) {
    Result<std::vector<PoolFd>> fds = fdsFor(peer);
    if (!fds.ok()) return fds.status();
    Status sent = send(nonce, rank, peer, fds.value());
    for (const PoolFd& f : fds.value()) close(f.fd);
    if (!sent.ok()) return sent;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  std::map<int, std::vector<PoolFd>> got;
  const std::set<int> expected(peers.begin(), peers.end());
  auto closeAll = [&] {
    for (auto& [peer, fds] : got)
      for (const PoolFd& f : fds) close(f.fd);
  };
  while (got.size() < expected.size()) {
    if (!await(listener.get(), POLLIN, deadline)) {
      std::string missing;
      for (int peer : peers)
        if (!got.contains(peer)) missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      closeAll();
      return Status::error(occlTimeout,
                           absl::StrFormat("rank %d: rank(s) %s never sent their IPC pools within %d ms", rank, missing,
                                           timeoutMs));
    }
    Socket conn(accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (conn.get() < 0) continue;
    Result<std::pair<int, std::vector<PoolFd>>> message = receive(conn.get(), deadline);
    if (!message.ok()) continue;  // a stranger's, or a broken one: refused
    auto& [from, fds] = message.value();
    if (!expected.contains(from) || got.contains(from)) {
      for (const PoolFd& f : fds) close(f.fd);
      continue;
    }
    got[from] = std::move(fds);
  }
  return got;
}

}  // namespace occl::transport::ipc
