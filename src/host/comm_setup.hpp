// Building communicators (comm_setup.cpp says how): api.cpp checks the arguments of the init
// calls and wraps what these return in handles; comm_split.hpp builds children of a communicator
// with the two builders at the end.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "bootstrap/bootstrap.hpp"
#include "host/comm.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// occlCommInitRank / occlCommInitFromEnv: rank `rank` of `nranks`, meeting the others at `id`.
Result<std::unique_ptr<Comm>> initRank(const bootstrap::UniqueIdData& id, int rank, int nranks,
                                       const occlConfig_t& config);

// occlCommInitAll: `ndev` ranks as threads of this process, on devlist's CUDA devices or (NULL)
// host threads. On failure none is left.
Result<std::vector<std::unique_ptr<Comm>>> initAll(int ndev, const int* devlist, const occlConfig_t& config);

// One rank's communicator whose ranks meet through `boot` (a TCP bootstrap): its topology, its
// device (`fixedDevice` when it has one already: a split's child runs on its parent's), its
// peers' transports and connectors.
Result<std::unique_ptr<Comm>> buildOverBootstrap(std::unique_ptr<bootstrap::Bootstrap> boot, const occlConfig_t& config,
                                                 std::optional<int> fixedDevice);

// One rank of a group of threads of this process (occlCommInitAll, or a split of its ranks), with
// the connector factory made for it (transport/in_process/setup.hpp); `anyCuda`: some rank of
// the group is a CUDA rank.
Result<std::unique_ptr<Comm>> buildThreadRank(std::unique_ptr<bootstrap::Group> group, const occlConfig_t& config,
                                              int device, bool anyCuda,
                                              std::unique_ptr<transport::ConnectorFactory> connectors);

}  // namespace occl::host
