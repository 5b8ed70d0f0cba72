#include "transport/setup.hpp"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace occl::transport {

const char* transportName(Transport t) {
  switch (t) {
    case Transport::InProcess: return "in-process";
    case Transport::DeviceIpc: return "device-ipc";
    case Transport::Shm: return "shm";
    case Transport::Net: return "net";
  }
  return "unknown";
}

std::string TransportSetup::whereFirstPeer(Transport t) const {
  const auto peer = std::find(byPeer.begin(), byPeer.end(), t);
  const int other = peer == byPeer.end() ? rank : static_cast<int>(peer - byPeer.begin());
  const PeerInfo &mine = self().place, &theirs = ranks.at(static_cast<size_t>(other)).place;
  if (sameHost(mine, theirs) && mine.shmDevice != theirs.shmDevice)
    return absl::StrFormat("ranks %d and %d run on host \"%s\" with a /dev/shm each (devices 0x%x and 0x%x)", rank,
                           other, mine.host, mine.shmDevice, theirs.shmDevice);
  return absl::StrFormat("rank %d runs on host \"%s\" and rank %d on \"%s\"", rank, mine.host, other, theirs.host);
}

}  // namespace occl::transport
