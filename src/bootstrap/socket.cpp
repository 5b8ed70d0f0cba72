#include "bootstrap/socket.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace occl::bootstrap {
namespace {

// Waits for `events` on fd until the deadline; false on timeout. EINTR restarts the wait.
Result<bool> waitFor(int fd, short events, Deadline deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, pollTimeoutMs(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return Status::systemError("poll", errno);
  }
}

// Options every bootstrap connection gets. Keepalive lets a vanished host (not just a dead
// process, which the kernel reports at once) surface as a broken connection in ~25 s.
void configureConnection(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
  int idle = 10, interval = 5, count = 3;
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof(interval));
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
}

// Errors that mean "not there yet": the peer may still be starting, so connect() retries them.
bool isTransientConnectError(int err) {
  switch (err) {
    case ECONNREFUSED: case ETIMEDOUT: case ECONNRESET: case ECONNABORTED: case EHOSTUNREACH:
    case ENETUNREACH: case ENETDOWN: case EHOSTDOWN: case EAGAIN: case EADDRNOTAVAIL:
      return true;
    default:
      return false;
  }
}

bool sameEndpoint(const SockAddr& a, const SockAddr& b) {
  return a.len() == b.len() && std::memcmp(a.get(), b.get(), a.len()) == 0;
}

// One attempt: 0 and the connected socket in `out`, or the errno that stopped it.
int connectOnce(const SockAddr& addr, Deadline deadline, Socket& out) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return errno;
  if (::connect(s.fd(), addr.get(), addr.len()) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    pollfd p{s.fd(), POLLOUT, 0};
    int rc;
    while ((rc = ::poll(&p, 1, pollTimeoutMs(deadline))) < 0 && errno == EINTR) {
    }
    if (rc < 0) return errno;
    if (rc == 0) return ETIMEDOUT;
    int soErr = 0;
    socklen_t len = sizeof(soErr);
    if (::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &soErr, &len) != 0) return errno;
    if (soErr != 0) return soErr;
  }
  // Retrying a local port in the ephemeral range can connect the socket to itself (TCP
  // simultaneous open); that is "nobody listening yet", not a peer.
  auto local = s.localAddress();
  auto peer = s.peerAddress();
  if (local.ok() && peer.ok() && sameEndpoint(*local, *peer)) return ECONNREFUSED;
  configureConnection(s.fd());
  out = std::move(s);
  return 0;
}

void appendAddress(const sockaddr* sa, std::vector<SockAddr>& v4, std::vector<SockAddr>& v6,
                   std::vector<SockAddr>& linkLocal) {
  if (sa->sa_family == AF_INET) {
    v4.emplace_back(sa, sizeof(sockaddr_in));
  } else if (sa->sa_family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    auto& list = IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr) ? linkLocal : v6;
    list.emplace_back(sa, sizeof(sockaddr_in6));
  }
}

bool interfaceMatches(const std::string& name, const std::vector<std::string>& patterns, bool exact) {
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) {
    return exact ? name == p : name.rfind(p, 0) == 0;
  });
}

}  // namespace

Deadline deadlineAfterMs(int64_t ms) {
  // Clamped so that "practically never" (INT64_MAX) cannot overflow the clock into the past.
  return SteadyClock::now() + std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, int64_t{1} << 40));
}

int pollTimeoutMs(Deadline deadline) {
  auto left = deadline - SteadyClock::now();
  if (left <= SteadyClock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<int64_t>(ms, 1 << 30));
}

// ---- SockAddr ----

SockAddr::SockAddr(const sockaddr* sa, socklen_t len) : len_(std::min<socklen_t>(len, sizeof(storage_))) {
  std::memcpy(&storage_, sa, len_);
}

Result<SockAddr> SockAddr::resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  std::string service = std::to_string(port);
  int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res);
  if (rc != 0 || res == nullptr) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("cannot resolve host '%s': %s", host, ::gai_strerror(rc)));
  }
  SockAddr addr(res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  return addr;
}

SockAddr SockAddr::any(int family, int port) {
  SockAddr a;
  a.storage_.ss_family = static_cast<sa_family_t>(family);
  a.len_ = family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  a.setPort(port);
  return a;
}

int SockAddr::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
  return 0;
}

void SockAddr::setPort(int port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage_)->sin_port = htons(static_cast<uint16_t>(port));
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage_)->sin6_port = htons(static_cast<uint16_t>(port));
}

bool SockAddr::isLoopback() const {
  if (family() == AF_INET) {
    return (ntohl(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_addr.s_addr) >> 24) == 127;
  }
  if (family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_addr);
  return false;
}

std::string SockAddr::toString() const {
  char host[NI_MAXHOST] = "?";
  if (!valid() || ::getnameinfo(get(), len_, host, sizeof(host), nullptr, 0, NI_NUMERICHOST) != 0) {
    return "<invalid address>";
  }
  if (family() == AF_INET6) return absl::StrFormat("[%s]:%d", host, port());
  return absl::StrFormat("%s:%d", host, port());
}

// ---- Socket ----

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> Socket::listen(const SockAddr& addr) {
  Socket s(::socket(addr.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.valid()) return Status::systemError("socket", errno);
  int one = 1, zero = 0;
  ::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  // The IPv6 wildcard should also accept IPv4 peers, whatever the system default is.
  if (addr.family() == AF_INET6) ::setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
  if (::bind(s.fd(), addr.get(), addr.len()) != 0) {
    return Status::systemError(absl::StrFormat("bind %s", addr.toString()), errno);
  }
  if (::listen(s.fd(), SOMAXCONN) != 0) {
    return Status::systemError(absl::StrFormat("listen on %s", addr.toString()), errno);
  }
  return s;
}

Result<Socket> Socket::connect(const SockAddr& addr, Deadline deadline) {
  auto start = SteadyClock::now();
  auto backoff = std::chrono::milliseconds(10);
  while (true) {
    Socket s;
    int err = connectOnce(addr, deadline, s);
    if (err == 0) return s;
    if (!isTransientConnectError(err)) return Status::systemError("connect to " + addr.toString(), err);
    auto now = SteadyClock::now();
    if (now >= deadline) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start);
      return Status::error(occlTimeout,
                           absl::StrFormat("connect to %s did not succeed within %d ms (last error: %s)",
                                           addr.toString(), waited.count(),
                                           std::generic_category().message(err)));
    }
    // The last attempt happens at the deadline, so a peer that comes up late is still found.
    std::this_thread::sleep_for(std::min<SteadyClock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(500));
  }
}

Result<Socket> Socket::accept(Deadline deadline) const {
  while (true) {
    auto ready = waitFor(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return Status::error(occlTimeout, "no connection arrived before the deadline");
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      configureConnection(fd);
      return Socket(fd);
    }
    // The connection may have gone between poll and accept; wait for the next one.
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != ECONNABORTED && errno != EINTR) {
      return Status::systemError("accept", errno);
    }
  }
}

Status Socket::sendAll(const void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd_, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::systemError("send", errno);
    auto ready = waitFor(fd_, POLLOUT, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return Status::error(occlTimeout, "send did not complete before the deadline");
  }
  return Status::success();
}

Status Socket::recvAll(void* data, size_t bytes, Deadline deadline) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd_, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return Status::error(occlRemoteError, "connection closed by the peer");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::systemError("recv", errno);
    auto ready = waitFor(fd_, POLLIN, deadline);
    if (!ready.ok()) return ready.status();
    if (!*ready) return Status::error(occlTimeout, "nothing received before the deadline");
  }
  return Status::success();
}

void Socket::shutdownWrite() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

Result<SockAddr> Socket::localAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Status::systemError("getsockname", errno);
  }
  return SockAddr(reinterpret_cast<sockaddr*>(&ss), len);
}

Result<SockAddr> Socket::peerAddress() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    return Status::systemError("getpeername", errno);
  }
  return SockAddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// ---- interface selection ----

Result<std::vector<SockAddr>> interfaceAddresses(const std::string& spec) {
  std::string patterns = spec;
  bool exclude = !patterns.empty() && patterns[0] == '^';
  if (exclude) patterns.erase(0, 1);
  bool exact = !patterns.empty() && patterns[0] == '=';
  if (exact) patterns.erase(0, 1);
  std::vector<std::string> names = absl::StrSplit(patterns, ',', absl::SkipWhitespace());

  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return Status::systemError("getifaddrs", errno);
  std::vector<SockAddr> v4, v6, linkLocal;
  std::vector<std::string> seen;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) continue;
    std::string name = ifa->ifa_name;
    if (std::find(seen.begin(), seen.end(), name) == seen.end()) seen.push_back(name);
    if (interfaceMatches(name, names, exact) == exclude) continue;
    appendAddress(ifa->ifa_addr, v4, v6, linkLocal);
  }
  ::freeifaddrs(list);
  v4.insert(v4.end(), v6.begin(), v6.end());
  v4.insert(v4.end(), linkLocal.begin(), linkLocal.end());
  if (v4.empty()) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("OCCL_SOCKET_IFNAME='%s' matches no interface with an IP address "
                                         "(interfaces up: %s)", spec, absl::StrJoin(seen, ", ")));
  }
  return v4;
}

Result<std::vector<SockAddr>> listenAddressCandidates() {
  if (const char* ifname = std::getenv("OCCL_SOCKET_IFNAME"); ifname != nullptr && *ifname != '\0') {
    return interfaceAddresses(ifname);
  }
  std::vector<SockAddr> external, loopback;
  char hostname[256] = {};
  if (::gethostname(hostname, sizeof(hostname) - 1) == 0) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(hostname, nullptr, &hints, &res) == 0) {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        SockAddr a(ai->ai_addr, ai->ai_addrlen);
        (a.isLoopback() ? loopback : external).push_back(a);
      }
      ::freeaddrinfo(res);
    }
  }
  // Debian-style hosts map their name to 127.0.1.1: then an interface of the host is a better
  // guess than loopback, which only works on one node.
  if (external.empty()) {
    if (auto ifs = interfaceAddresses("^lo,docker,virbr,veth"); ifs.ok()) {
      for (const SockAddr& a : *ifs) {
        auto* in6 = reinterpret_cast<const sockaddr_in6*>(a.get());
        if (a.family() == AF_INET || !IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) external.push_back(a);
      }
    }
  }
  external.insert(external.end(), loopback.begin(), loopback.end());
  sockaddr_in lo{};
  lo.sin_family = AF_INET;
  lo.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  external.emplace_back(reinterpret_cast<sockaddr*>(&lo), sizeof(lo));
  return external;
}

// ---- frames ----

namespace {
struct FrameHeader {
  uint32_t type;
  uint32_t seq;
  uint64_t bytes;
};
static_assert(sizeof(FrameHeader) == 16);
}  // namespace

Status sendFrame(const Socket& socket, uint32_t type, uint32_t seq, const void* payload, size_t bytes,
                 Deadline deadline) {
  FrameHeader h{type, seq, bytes};
  if (auto st = socket.sendAll(&h, sizeof(h), deadline); !st.ok()) return st;
  return bytes == 0 ? Status::success() : socket.sendAll(payload, bytes, deadline);
}

Result<bool> FrameReader::pump(const Socket& socket, std::vector<Frame>& out) {
  char chunk[64 * 1024];
  while (true) {
    ssize_t n = ::recv(socket.fd(), chunk, sizeof(chunk), 0);
    if (n > 0) {
      buf_.insert(buf_.end(), chunk, chunk + n);
      if (auto st = parse(out); !st.ok()) return st;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
    return Status::systemError("recv", errno);
  }
}

Status FrameReader::parse(std::vector<Frame>& out) {
  size_t pos = 0;
  while (buf_.size() - pos >= sizeof(FrameHeader)) {
    FrameHeader h;
    std::memcpy(&h, buf_.data() + pos, sizeof(h));
    if (h.bytes > kMaxFrameBytes) {
      return Status::error(occlRemoteError,
                           absl::StrFormat("peer sent a %d-byte frame (limit %d): corrupt stream", h.bytes,
                                           kMaxFrameBytes));
    }
    if (buf_.size() - pos - sizeof(h) < h.bytes) break;
    auto* begin = buf_.data() + pos + sizeof(h);
    out.push_back(Frame{h.type, h.seq, std::vector<char>(begin, begin + h.bytes)});
    pos += sizeof(h) + h.bytes;
  }
  buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(pos));
  return Status::success();
}

}  // namespace occl::bootstrap
