// What a transport's maker is given to make this rank's connector factory for it, once every
// rank's place and daemon are known (rank_info.hpp) and the table (select.hpp) has chosen the
// transport of every pair. Each transport's maker is in its folder's setup.cpp; the host layer
// fills this from its bootstrap and never names a transport's factory itself.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "transport/rank_info.hpp"
#include "util/status.hpp"

namespace occl::transport {

// The rows of the transport table (select.cpp), in the order of preference.
enum class Transport : uint8_t { InProcess, DeviceIpc, Shm, Net };
const char* transportName(Transport t);

struct TransportSetup {
  int rank = 0;
  std::vector<RankInfo> ranks;    // every rank's place and daemon
  std::vector<Transport> byPeer;  // this rank's transport to each rank (itself: InProcess)
  std::set<Transport> taken;      // the transports some pair of ranks takes, this rank's or not
  uint64_t nonce = 0;             // the job's: names its shm segments and Unix sockets
  int64_t timeoutMs = 0;          // config.initTimeoutMs: how long a maker waits for its peers
  int device = -1;                // this rank's CUDA device; -1 for host threads and simt
  // Gathers `bytes` from every rank into `data` (rank r's at r * bytes), through the bootstrap.
  // Every rank calls it the same number of times, in the same order.
  std::function<Status(void* data, size_t bytes)> allGather;

  int nRanks() const { return static_cast<int>(ranks.size()); }
  const RankInfo& self() const { return ranks.at(static_cast<size_t>(rank)); }
  // "ranks 0 and 3 run on host "a" with a /dev/shm each (...)" or "rank 0 runs on host "a" and
  // rank 3 on "b"": where this rank and its first peer over `t` (itself if none) run, for the
  // message of a transport that fails or is not in this build.
  std::string whereFirstPeer(Transport t) const;
};

}  // namespace occl::transport
