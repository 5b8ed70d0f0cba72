// Small TCP helpers for the bootstrap (and anything else on the host that needs a socket):
// an address type covering IPv4 and IPv6, an RAII non-blocking socket whose blocking-style
// calls are all bounded by a deadline, interface selection, and length-prefixed frames.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "util/status.hpp"

namespace occl::bootstrap {

using SteadyClock = std::chrono::steady_clock;
using Deadline = SteadyClock::time_point;

Deadline deadlineAfterMs(int64_t ms);
// Milliseconds left for poll(): 0 once the deadline passed, rounded up so callers never spin.
int pollTimeoutMs(Deadline deadline);

class SockAddr {
 public:
  SockAddr() = default;
  SockAddr(const sockaddr* sa, socklen_t len);

  // A numeric address ("10.0.0.1", "::1") or a host name; the first address getaddrinfo gives.
  static Result<SockAddr> resolve(const std::string& host, int port);
  // The wildcard address of `family` (0.0.0.0 or ::) at `port`.
  static SockAddr any(int family, int port);

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage_); }
  socklen_t len() const { return len_; }
  int family() const { return storage_.ss_family; }
  bool valid() const { return len_ != 0; }
  int port() const;
  void setPort(int port);
  bool isLoopback() const;
  // "10.0.0.1:5000" or "[fe80::1%2]:5000".
  std::string toString() const;

 private:
  sockaddr_storage storage_{};
  socklen_t len_ = 0;
};

// Owns one non-blocking, close-on-exec TCP socket. Blocking-style calls wait with poll() until
// their deadline, so nothing here can hang.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

  static Result<Socket> listen(const SockAddr& addr);
  // Retries refused or unreachable attempts with backoff until `deadline`: ranks start at
  // different times, so the listener may not exist yet. Fails with occlTimeout at the deadline.
  static Result<Socket> connect(const SockAddr& addr, Deadline deadline);
  Result<Socket> accept(Deadline deadline) const;

  Status sendAll(const void* data, size_t bytes, Deadline deadline) const;
  // An orderly close by the peer before `bytes` arrived is occlRemoteError.
  Status recvAll(void* data, size_t bytes, Deadline deadline) const;
  // Sends FIN after everything queued: the peer reads our last message, then EOF.
  void shutdownWrite() const;

  Result<SockAddr> localAddress() const;
  Result<SockAddr> peerAddress() const;

 private:
  int fd_ = -1;
};

// Where the root of a rendezvous should listen, best first: the interfaces named by
// OCCL_SOCKET_IFNAME if set (an error if none matches); else the non-loopback addresses of this
// host's name, or if it has none (127.0.1.1 style /etc/hosts) those of its interfaces other than
// lo/docker/virbr/veth (no IPv6 link-local); then the loopback ones, then 127.0.0.1.
Result<std::vector<SockAddr>> listenAddressCandidates();
// Addresses of the interfaces matching `spec`: comma-separated name prefixes ("eth,ib"), a
// leading '=' for exact names ("=eth0"), a leading '^' to exclude ("^docker,lo"). IPv4 first;
// IPv6 link-local addresses last.
Result<std::vector<SockAddr>> interfaceAddresses(const std::string& spec);

// Length-prefixed messages: {type, seq, payload bytes} then the payload.
struct Frame {
  uint32_t type = 0;
  uint32_t seq = 0;
  std::vector<char> payload;
};

inline constexpr size_t kMaxFrameBytes = size_t{1} << 30;

Status sendFrame(const Socket& socket, uint32_t type, uint32_t seq, const void* payload, size_t bytes,
                 Deadline deadline);

// Incremental reader for one socket: never blocks, keeps partial frames between calls, so one
// thread can serve many sockets and a stalled peer cannot stall the others.
class FrameReader {
 public:
  // Reads what the socket has and appends the complete frames to `out`. Returns true while the
  // connection is open, false once the peer closed it, an error if it broke (reset, garbage).
  Result<bool> pump(const Socket& socket, std::vector<Frame>& out);

 private:
  Status parse(std::vector<Frame>& out);
  std::vector<char> buf_;
};

}  // namespace occl::bootstrap
