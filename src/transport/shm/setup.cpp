#include "transport/shm/setup.hpp"

#if OCCL_HAVE_CUDA
#include "transport/cuda/connectors.hpp"
#endif

namespace occl::transport::shm {

Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup) {
#if OCCL_HAVE_CUDA
  if (setup.device >= 0) return makeCudaShmFactory(setup.nonce, setup.timeoutMs, setup.device);
#endif
  return makeShmFactory(setup.nonce, setup.timeoutMs, rangesFor(setup.ranks, setup.rank));
}

ShmRanges rangesFor(const std::vector<RankInfo>& ranks, int rank) {
  const PeerInfo& self = ranks.at(static_cast<size_t>(rank)).place;
  for (const RankInfo& r : ranks)
    if (r.daemon.kind == DaemonKind::Cuda && sharesDevShm(self, r.place)) return ShmRanges::WholePages;
  return ShmRanges::Packed;
}

}  // namespace occl::transport::shm
