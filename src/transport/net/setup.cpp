#include "transport/net/setup.hpp"

#include <algorithm>
#include <vector>

#include "transport/net/connectors.hpp"
#if OCCL_HAVE_CUDA
#include "transport/cuda/connectors.hpp"
#endif

namespace occl::transport::net {

Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup) {
  const int rank = setup.rank, nranks = setup.nRanks();
  const std::string where = setup.whereFirstPeer(Transport::Net) + ": starting the NET connector";
  NetOptions options;
  options.rank = rank;
  options.nRanks = nranks;
#if OCCL_HAVE_CUDA
  if (setup.device >= 0) {
    // The daemon kernel reads and writes the FIFOs at their host addresses, and its publishes
    // cannot wake the proxy: it scans at least every kCudaProxySleepUs.
    constexpr int64_t kCudaProxySleepUs = 50;
    Result<HostAllocator> pinned = makeCudaPinnedAllocator(setup.device);
    if (!pinned.ok()) return pinned.status().withContext(where);
    options.allocator = std::move(pinned.value());
    options.maxSleepUs = kCudaProxySleepUs;
  }
#endif
  Result<std::unique_ptr<NetFactory>> factory = makeNetFactory(options);
  if (!factory.ok()) return factory.status().withContext(where);
  const std::vector<uint8_t>& mine = factory.value()->localAddress();
  std::vector<uint64_t> sizes(static_cast<size_t>(nranks));
  sizes[static_cast<size_t>(rank)] = mine.size();
  if (Status s = setup.allGather(sizes.data(), sizeof(uint64_t)); !s.ok()) return s.withContext(where);
  const uint64_t stride = *std::max_element(sizes.begin(), sizes.end());
  std::vector<uint8_t> all(stride * static_cast<size_t>(nranks));
  std::copy(mine.begin(), mine.end(), all.begin() + static_cast<long>(stride * static_cast<size_t>(rank)));
  if (Status s = setup.allGather(all.data(), stride); !s.ok()) return s.withContext(where);
  std::vector<std::vector<uint8_t>> addresses(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) {
    if (r == rank || setup.byPeer[static_cast<size_t>(r)] != Transport::Net) continue;
    const auto* at = all.data() + stride * static_cast<size_t>(r);
    addresses[static_cast<size_t>(r)].assign(at, at + sizes[static_cast<size_t>(r)]);
  }
  if (Status s = factory.value()->connect(addresses); !s.ok()) return s.withContext(where);
  return std::unique_ptr<ConnectorFactory>(std::move(factory.value()));
}

}  // namespace occl::transport::net
