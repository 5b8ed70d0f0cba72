// What a NET connector factory is made with (net/connectors.hpp), apart so that its proxy
// (proxy.hpp) and connections (conn.hpp) read it without the factory's header.
#pragma once

#include <cstdint>
#include <string>

#include "transport/host_allocator.hpp"

namespace occl::transport::net {

struct NetOptions {
  int rank = -1;
  int nRanks = 0;
  // UCX transports (UCX_TLS syntax); empty: UCX_TLS from the environment, else UCX's choice.
  // Tests force "tcp", which works on any machine.
  std::string tls;
  // Where the local FIFOs live: anonymous memory, or for a CUDA daemon pinned memory mapped into
  // its device, recycled (transport/host_allocator.hpp).
  HostAllocator allocator = defaultHostAllocator();
  // The longest the idle proxy sleeps between scans (proxy.cpp). A host daemon's publish wakes it
  // at once; a GPU daemon's cannot, so a CUDA rank's proxy wakes more often.
  int64_t maxSleepUs = 1000;
  // On destruction, how long the proxy keeps shipping what daemons already published and lets
  // UCX flush, before it closes endpoints regardless.
  int drainMs = 1000;
};

}  // namespace occl::transport::net
