#include "transport/rank_info.hpp"

#include <algorithm>
#include <cstring>

#include "util/fnv1a.hpp"

namespace occl::transport {

PeerInfo makePeerInfo(const std::string& host, const ProcessPlace& place) {
  PeerInfo info{};
  std::memcpy(info.host, host.data(), std::min(host.size(), PeerInfo::kHostBytes - 1));
  info.pidNamespace = place.pidNamespace;
  info.shmDevice = place.shmDevice;
  info.process = place.process;
  return info;
}

bool sameHost(const PeerInfo& a, const PeerInfo& b) { return std::strncmp(a.host, b.host, PeerInfo::kHostBytes) == 0; }

bool sharesDevShm(const PeerInfo& self, const PeerInfo& peer) {
  return sameHost(self, peer) && self.shmDevice == peer.shmDevice;
}

uint64_t gpuIdentity(const unsigned char (&uuid)[16]) {
  Fnv1a h;  // the same on every rank
  for (unsigned char c : uuid) h.add(c);
  return h.value() == 0 ? 1 : h.value();
}

}  // namespace occl::transport
