#include "transport/ipc/setup.hpp"

#include <map>
#include <vector>

#include "absl/strings/str_format.h"
#include "transport/ipc/connectors.hpp"
#include "transport/ipc/fd_exchange.hpp"
#include "transport/ipc/ipc_device.hpp"

namespace occl::transport::ipc {
namespace {

// A simt rank's IPC arena (sparse: only the pages of its connectors are memory).
constexpr size_t kSimtIpcArenaBytes = size_t{1} << 30;

}  // namespace

Result<std::unique_ptr<ConnectorFactory>> makeConnectors(const TransportSetup& setup) {
  const int rank = setup.rank;
  std::vector<int> peers;
  for (size_t r = 0; r < setup.byPeer.size(); ++r)
    if (setup.byPeer[r] == Transport::DeviceIpc) peers.push_back(static_cast<int>(r));
  Result<std::shared_ptr<IpcDevice>> memory = std::shared_ptr<IpcDevice>();
  if (!peers.empty() && setup.self().daemon.kind == DaemonKind::Simt)
    memory = makeSimtIpcDevice(rank, kSimtIpcArenaBytes);
#if OCCL_HAVE_CUDA
  if (!peers.empty() && setup.device >= 0) {
    std::vector<uint64_t> gpus;
    for (const RankInfo& r : setup.ranks) gpus.push_back(r.daemon.gpu);
    memory = makeCudaIpcDevice(rank, setup.device, gpus);
  }
#endif
  // A rank whose device memory failed still joins the barrier; its peers then fail to reach it.
  std::shared_ptr<IpcDevice> made = memory.ok() ? memory.value() : nullptr;
  if (!peers.empty() && made == nullptr && memory.ok())
    memory = Status::error(occlInternalError, "an IPC peer, but no backend whose device memory can be shared");
  Result<std::map<int, std::vector<PoolFd>>> received = exchangeFds(
      setup.nonce, rank, made != nullptr ? peers : std::vector<int>{},
      [&](int peer) { return made->exportPools(peer); },
      [&]() -> Status {
        // Whether each rank has its device memory: one that has not fails them all now, not
        // after the exchange's timeout.
        std::vector<int32_t> ready(setup.ranks.size());
        ready[static_cast<size_t>(rank)] = memory.ok() ? 1 : 0;
        if (Status s = setup.allGather(ready.data(), sizeof(int32_t)); !s.ok()) return s;
        for (size_t r = 0; r < ready.size(); ++r)
          if (ready[r] == 0 && static_cast<int>(r) != rank)
            return Status::error(occlRemoteError, absl::StrFormat("rank %d could not set up its IPC device memory", r));
        return Status::success();
      },
      setup.timeoutMs);
  if (!memory.ok()) return memory.status().withContext("the IPC connector's device memory");
  if (!received.ok()) return received.status().withContext("exchanging the IPC connector's pools");
  Status imported = Status::success();
  for (auto& [peer, fds] : received.value()) {
    Status s = made->importPools(peer, fds);  // closes them either way
    if (imported.ok() && !s.ok()) imported = s.withContext(absl::StrFormat("importing rank %d's pools", peer));
  }
  if (!imported.ok()) return imported;
  if (made == nullptr) return std::unique_ptr<ConnectorFactory>();
  return makeIpcFactory(setup.nonce, setup.timeoutMs, rank, made);
}

}  // namespace occl::transport::ipc
