// Unique ids: what occlGetUniqueId hands out, and the root listener it leaves behind.
#include "bootstrap/bootstrap.hpp"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>
#include <random>

#include "absl/strings/str_format.h"

namespace occl::bootstrap {
namespace {

// Listeners of the ids created in this process, until rank 0's Bootstrap takes them over.
class ListenerTable {
 public:
  static ListenerTable& instance() {
    static auto* table = new ListenerTable;  // leaked: must outlive other static destructors
    return *table;
  }
  void put(uint64_t nonce, Socket listener) {
    std::lock_guard lk(mu_);
    listeners_[nonce] = std::move(listener);
  }
  std::optional<Socket> take(uint64_t nonce) {
    std::lock_guard lk(mu_);
    auto it = listeners_.find(nonce);
    if (it == listeners_.end()) return std::nullopt;
    Socket s = std::move(it->second);
    listeners_.erase(it);
    return s;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, Socket> listeners_;
};

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

namespace detail {

uint64_t randomNonce() {
  std::random_device rd;
  uint64_t v = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  v ^= splitmix64(static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count()) ^
                  (static_cast<uint64_t>(::getpid()) << 40));
  return v == 0 ? 1 : v;
}

Result<Socket> takeRootListener(const UniqueIdData& id) {
  if (auto listener = ListenerTable::instance().take(id.nonce)) return std::move(*listener);
  SockAddr addr = id.rootAddress();
  if (id.flags & UniqueIdData::kBindAny) addr = SockAddr::any(addr.family(), addr.port());
  auto listener = Socket::listen(addr);
  if (!listener.ok()) {
    return listener.status().withContext(
        "rank 0 cannot listen for the other ranks (rank 0 must run in the process that created the "
        "unique id, and a launcher-given port must be free)");
  }
  return listener;
}

}  // namespace detail

SockAddr UniqueIdData::rootAddress() const {
  if (family == AF_INET6) {
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(port);
    a.sin6_scope_id = scopeId;
    std::memcpy(&a.sin6_addr, addr, sizeof(a.sin6_addr));
    return SockAddr(reinterpret_cast<sockaddr*>(&a), sizeof(a));
  }
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  std::memcpy(&a.sin_addr, addr, sizeof(a.sin_addr));
  return SockAddr(reinterpret_cast<sockaddr*>(&a), sizeof(a));
}

void UniqueIdData::setRootAddress(const SockAddr& address) {
  family = static_cast<uint16_t>(address.family());
  port = static_cast<uint16_t>(address.port());
  std::memset(addr, 0, sizeof(addr));
  if (family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(address.get());
    std::memcpy(addr, &in6->sin6_addr, sizeof(in6->sin6_addr));
    scopeId = in6->sin6_scope_id;
  } else {
    std::memcpy(addr, &reinterpret_cast<const sockaddr_in*>(address.get())->sin_addr, 4);
    scopeId = 0;
  }
}

void packUniqueId(const UniqueIdData& data, occlUniqueId* id) {
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, &data, sizeof(data));
}

Result<UniqueIdData> unpackUniqueId(const occlUniqueId& id) {
  UniqueIdData data;
  std::memcpy(&data, id.internal, sizeof(data));
  if (data.magicVersion != kBootstrapMagicVersion) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("unique id has magic/version 0x%08x, expected 0x%08x: not made by "
                                         "occlGetUniqueId of this occl version, or corrupted in transit",
                                         data.magicVersion, kBootstrapMagicVersion));
  }
  return data;
}

Result<UniqueIdData> createUniqueId() {
  auto candidates = listenAddressCandidates();
  if (!candidates.ok()) return candidates.status();
  Status lastError = Status::error(occlSystemError, "no candidate address");
  for (SockAddr addr : *candidates) {
    addr.setPort(0);
    auto listener = Socket::listen(addr);
    auto bound = listener.ok() ? listener->localAddress() : Result<SockAddr>(listener.status());
    if (!bound.ok()) {
      lastError = bound.status();
      continue;
    }
    UniqueIdData id;
    id.magicVersion = kBootstrapMagicVersion;
    id.nonce = detail::randomNonce();
    id.setRootAddress(*bound);
    ListenerTable::instance().put(id.nonce, std::move(*listener));
    return id;
  }
  return lastError.withContext("createUniqueId: cannot listen on any address of this host");
}

void discardUniqueId(const UniqueIdData& id) { (void)ListenerTable::instance().take(id.nonce); }

Result<UniqueIdData> uniqueIdFromAddress(const std::string& host, int port, uint64_t nonceSeed) {
  if (port < 1 || port > 65535) {
    return Status::error(occlInvalidArgument, absl::StrFormat("port %d is outside 1..65535", port));
  }
  auto addr = SockAddr::resolve(host, port);
  if (!addr.ok()) return addr.status();
  UniqueIdData id;
  id.magicVersion = kBootstrapMagicVersion;
  id.flags = UniqueIdData::kBindAny;
  id.nonce = splitmix64(nonceSeed ^ (static_cast<uint64_t>(port) << 48));
  id.setRootAddress(*addr);
  return id;
}

}  // namespace occl::bootstrap
