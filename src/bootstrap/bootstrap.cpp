#include "bootstrap/bootstrap.hpp"
#include "bootstrap/link.hpp"
#include "bootstrap/notices.hpp"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "util/log.hpp"
#include "util/thread_name.hpp"

namespace occl::bootstrap {

// The rendezvous messages, before the connection switches to frames.
namespace bootstrap_wire {
struct Hello {
  uint32_t magicVersion;
  int32_t rank;
  int32_t nranks;
  uint32_t reserved;
  uint64_t nonce;
};
struct Welcome {
  uint32_t magicVersion;
  int32_t code;  // occlResult_t; not occlSuccess: `messageBytes` of explanation follow
  int32_t nranks;
  uint32_t messageBytes;
  uint64_t nonce;  // the communicator's nonce
};
}  // namespace bootstrap_wire
using bootstrap_wire::Hello;
using bootstrap_wire::Welcome;

// A connection accepted during the rendezvous whose hello has not fully arrived yet.
struct Bootstrap::PendingHello {
  Socket socket;
  Hello hello{};
  size_t got = 0;

  // Reads what has arrived without blocking: true once the hello is complete, an error if the
  // peer went away first.
  Result<bool> read() {
    while (got < sizeof(hello)) {
      ssize_t n = ::recv(socket.fd(), reinterpret_cast<char*>(&hello) + got, sizeof(hello) - got, 0);
      if (n > 0) {
        got += static_cast<size_t>(n);
      } else if (n == 0) {
        return Status::error(occlRemoteError, "closed before saying hello");
      } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return false;
      } else if (errno != EINTR) {
        return Status::systemError("recv", errno);
      }
    }
    return true;
  }
};

namespace {

using namespace notices;

constexpr uint32_t kMaxWelcomeMessage = 64 * 1024;

// Why a hello does not come from a rank of this job (empty: it does). Such a connection is refused
// alone and the rendezvous goes on: a port scanner, another occl version, or a rank of another
// job that reached this address with a stale id must not take this job down.
std::string strangerReason(const Hello& h, uint64_t idNonce) {
  if (h.magicVersion != kBootstrapMagicVersion) {
    return absl::StrFormat("sent bad magic/version 0x%08x (expected 0x%08x): another occl version, or not an "
                           "occl rank",
                           h.magicVersion, kBootstrapMagicVersion);
  }
  if (h.nonce != idNonce) {
    return absl::StrFormat("claims rank %d with another unique id (nonce %016x, expected %016x): a stale id, or "
                           "two jobs on one address",
                           h.rank, h.nonce, idNonce);
  }
  return "";
}

// A hello of this job that cannot join it: the job fails, on every rank that connected.
Status checkHello(const Hello& h, int nranks, const std::string& from) {
  if (h.nranks != nranks) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("nranks mismatch: rank %d (%s) was started with nranks=%d, rank 0 "
                                         "with nranks=%d",
                                         h.rank, from, h.nranks, nranks));
  }
  if (h.rank < 1 || h.rank >= nranks) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("%s claims rank %d; expected 1..%d (rank 0 is the root)", from, h.rank,
                                         nranks - 1));
  }
  return Status::success();
}

void sendWelcomeError(const Socket& socket, int nranks, const Status& why) {
  auto text = why.message.substr(0, kMaxWelcomeMessage);
  Welcome w{kBootstrapMagicVersion, static_cast<int32_t>(why.code), nranks, static_cast<uint32_t>(text.size()), 0};
  Deadline d = deadlineAfterMs(kNoticeWaitMs);
  if (socket.sendAll(&w, sizeof(w), d).ok()) (void)socket.sendAll(text.data(), text.size(), d);
}

// The other end of an accepted connection, for messages.
std::string peerName(const Socket& socket) {
  auto peer = socket.peerAddress();
  return peer.ok() ? peer->toString() : "an unknown address";
}

}  // namespace

// ---- rendezvous ----

Bootstrap::Bootstrap(int rank, int nranks, int64_t timeoutMs)
    : rank_(rank),
      nranks_(nranks),
      timeoutMs_(timeoutMs),
      wakeFd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      board_(nranks) {}

Bootstrap::~Bootstrap() {
  (void)close();
  if (monitor_.joinable()) monitor_.join();  // close() ran on the monitor thread, from the callback
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::connect(const UniqueIdData& id, int rank, int nranks,
                                                      int64_t timeoutMs) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("bootstrap: rank %d is not in [0, nranks=%d)", rank, nranks));
  }
  if (timeoutMs <= 0) {
    return Status::error(occlInvalidArgument, absl::StrFormat("bootstrap: timeout %d ms must be > 0", timeoutMs));
  }
  if (id.magicVersion != kBootstrapMagicVersion) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("bootstrap: unique id has magic/version 0x%08x, expected 0x%08x",
                                         id.magicVersion, kBootstrapMagicVersion));
  }
  std::unique_ptr<Bootstrap> bs(new Bootstrap(rank, nranks, timeoutMs));
  if (bs->wakeFd_ < 0) return Status::systemError("bootstrap: eventfd", errno);
  Deadline deadline = deadlineAfterMs(timeoutMs);
  Status st = rank == 0 ? bs->rendezvousAsRoot(id, deadline) : bs->rendezvousAsLeaf(id, deadline);
  if (!st.ok()) return st.withContext(absl::StrFormat("bootstrap rank %d of %d", rank, nranks));
  if (logEnabled(LogLevel::Info, LogSubsys::Bootstrap))
    logInfo(LogSubsys::Bootstrap, absl::StrFormat("rank %d of %d met the others (nonce %016x, local address %s)", rank,
                                                  nranks, bs->nonce_, bs->localAddress_.toString()));
  if (nranks > 1) bs->monitor_ = std::thread([raw = bs.get()] {
    nameThisThread("occl-bootstrap");
    raw->monitorLoop();
  });
  return bs;
}

Link* Bootstrap::addLink(int peer, Socket socket, const std::string& address) {
  auto link = std::make_unique<Link>();
  link->peer = peer;
  link->socket = std::move(socket);
  link->name = absl::StrFormat("rank %d (%s)", peer, address);
  links_.push_back(std::move(link));
  return links_.back().get();
}

Status Bootstrap::rendezvousAsRoot(const UniqueIdData& id, Deadline deadline) {
  auto listener = detail::takeRootListener(id);
  if (!listener.ok()) return listener.status();
  nonce_ = (id.flags & UniqueIdData::kBindAny) ? detail::randomNonce() : id.nonce;
  if (auto addr = listener->localAddress(); addr.ok()) localAddress_ = *addr;  // for messages
  std::vector<Link*> byRank(nranks_, nullptr);
  if (auto st = acceptRanks(*listener, id.nonce, byRank, deadline); !st.ok()) {
    for (auto& link : links_) sendWelcomeError(link->socket, nranks_, st);
    return st;
  }
  std::sort(links_.begin(), links_.end(), [](auto& a, auto& b) { return a->peer < b->peer; });
  // The listener may be bound to the wildcard; a connection knows the interface really used.
  if (auto addr = links_.empty() ? listener->localAddress() : links_[0]->socket.localAddress(); addr.ok()) {
    localAddress_ = *addr;
  }
  Welcome w{kBootstrapMagicVersion, occlSuccess, nranks_, 0, nonce_};
  for (auto& link : links_) {
    if (auto st = link->socket.sendAll(&w, sizeof(w), deadline); !st.ok()) {
      return st.withContext("completing the rendezvous with " + link->name);
    }
  }
  return Status::success();
}

Status Bootstrap::acceptRanks(Socket& listener, uint64_t idNonce, std::vector<Link*>& byRank, Deadline deadline) {
  // Hellos are read as they trickle in, so a connection that never speaks (a port scanner, a
  // rank that died) holds up nobody; it is simply dropped at the end.
  std::vector<PendingHello> pending;
  std::vector<pollfd> fds;
  for (int joined = 1; joined < nranks_;) {
    if (SteadyClock::now() >= deadline) return missingRanksError(byRank, joined);
    fds.assign(1, pollfd{listener.fd(), POLLIN, 0});
    for (auto& p : pending) fds.push_back(pollfd{p.socket.fd(), POLLIN, 0});
    if (::poll(fds.data(), fds.size(), pollTimeoutMs(deadline)) <= 0) continue;  // EINTR or time's up
    for (size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 1].revents == 0) continue;
      auto complete = pending[i].read();
      if (complete.ok() && !*complete) continue;
      if (complete.ok()) {
        Result<bool> admitted = admit(pending[i], idNonce, byRank);
        if (!admitted.ok()) return admitted.status();
        if (*admitted) ++joined;
      } else {
        refuse(pending[i].socket, complete.status().message);
      }
      pending.erase(pending.begin() + static_cast<ptrdiff_t>(i));
    }
    if (fds[0].revents == 0) continue;
    for (auto conn = listener.accept(SteadyClock::now()); conn.ok(); conn = listener.accept(SteadyClock::now())) {
      pending.push_back(PendingHello{std::move(*conn)});
    }
  }
  for (PendingHello& p : pending) refuse(p.socket, "never said hello (dropped when the rendezvous completed)");
  return Status::success();
}

void Bootstrap::refuse(const Socket& socket, const std::string& why) {
  const std::string stranger = absl::StrCat(peerName(socket), " ", why);
  logWarning(absl::StrFormat("bootstrap root %s: refused the connection from %s", localAddress_.toString(), stranger));
  if (refused_.size() < kMaxRefusedNamed) refused_.push_back(stranger);
}

Result<bool> Bootstrap::admit(PendingHello& conn, uint64_t idNonce, std::vector<Link*>& byRank) {
  const Hello& hello = conn.hello;
  if (std::string why = strangerReason(hello, idNonce); !why.empty()) {
    sendWelcomeError(conn.socket, nranks_, Status::error(occlInvalidUsage, "refused by the root: this connection " + why));
    refuse(conn.socket, why);
    return false;
  }
  const std::string from = peerName(conn.socket);
  Status st = checkHello(hello, nranks_, from);
  if (st.ok() && byRank[hello.rank] != nullptr) {
    st = Status::error(occlInvalidUsage, absl::StrFormat("duplicate rank %d: claimed by %s and by %s", hello.rank,
                                                         byRank[hello.rank]->name, from));
  }
  if (!st.ok()) {
    sendWelcomeError(conn.socket, nranks_, st);
    return st;
  }
  byRank[hello.rank] = addLink(hello.rank, std::move(conn.socket), from);
  return true;
}

Status Bootstrap::missingRanksError(const std::vector<Link*>& byRank, int joined) const {
  std::vector<int> missing;
  for (int r = 1; r < nranks_ && missing.size() < 16; ++r) {
    if (byRank[r] == nullptr) missing.push_back(r);
  }
  // A missing rank may be among the refused connections (started with another job's id).
  const std::string refused =
      refused_.empty() ? "" : absl::StrCat("; refused meanwhile: ", absl::StrJoin(refused_, "; "));
  return Status::error(occlTimeout,
                       absl::StrFormat("timed out after %d ms waiting for ranks [%s%s] to connect to %s (%d of %d "
                                       "ranks joined)%s",
                                       timeoutMs_, absl::StrJoin(missing, ", "), nranks_ - joined > 16 ? ", ..." : "",
                                       localAddress_.toString(), joined, nranks_, refused));
}

Status Bootstrap::rendezvousAsLeaf(const UniqueIdData& id, Deadline deadline) {
  SockAddr rootAddr = id.rootAddress();
  std::string root = "the root (rank 0) at " + rootAddr.toString();
  auto conn = Socket::connect(rootAddr, deadline);
  if (!conn.ok()) return conn.status().withContext("cannot reach the root (rank 0)");
  Hello hello{kBootstrapMagicVersion, rank_, nranks_, 0, id.nonce};
  if (auto st = conn->sendAll(&hello, sizeof(hello), deadline); !st.ok()) return st.withContext("greeting " + root);
  Welcome w{};
  if (auto st = conn->recvAll(&w, sizeof(w), deadline); !st.ok()) {
    if (st.code == occlTimeout) {
      return Status::error(occlTimeout, absl::StrFormat("connected to %s, but the rendezvous did not complete "
                                                        "within %d ms (are all ranks started?)",
                                                        root, timeoutMs_));
    }
    return st.withContext("waiting for " + root + " to complete the rendezvous (it failed or rejected us)");
  }
  if (w.magicVersion != kBootstrapMagicVersion) {
    return Status::error(occlInvalidUsage, absl::StrFormat("%s answered with magic/version 0x%08x, expected 0x%08x",
                                                           root, w.magicVersion, kBootstrapMagicVersion));
  }
  if (w.code != occlSuccess) {
    std::string why(std::min(w.messageBytes, kMaxWelcomeMessage), '\0');
    (void)conn->recvAll(why.data(), why.size(), deadlineAfterMs(kNoticeWaitMs));
    return Status::error(resultFromWire(w.code), "the root rejected the rendezvous: " + why);
  }
  nonce_ = w.nonce;
  if (auto addr = conn->localAddress(); addr.ok()) localAddress_ = *addr;
  addLink(0, std::move(*conn), rootAddr.toString());
  return Status::success();
}

}  // namespace occl::bootstrap
