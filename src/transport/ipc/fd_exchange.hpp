// Passing file descriptors between the processes of one host at communicator set-up: how the IPC
// connectors' pools (ipc_device.hpp) reach their peers. A descriptor can only travel over a Unix
// socket (SCM_RIGHTS): a CUDA pool's cannot be reopened through /proc/<pid>/fd.
//
// Every rank that takes part listens on an abstract Unix socket named after the job's nonce and
// its rank (no file to clean up; the name goes with the socket), then the job's barrier, then
// each connects to every peer of its list and sends its descriptors with its rank, and then
// accepts one connection from each such peer. A connect completes in the listener's backlog,
// which holds every peer, so no rank waits for another to accept. A connection whose sender is
// another user, or names a rank that is not an expected peer or came already, is refused.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "transport/ipc/ipc_device.hpp"
#include "util/status.hpp"

namespace occl::transport::ipc {

// Sends fdsFor(peer) to each of `peers` and returns what each of them sent to this rank. The
// descriptors fdsFor returns are closed once sent (or not); those received are the caller's to
// close. `barrier` runs
// once every rank listens: the job's bootstrap all-gather, called on every rank of the job, also
// those with no peer here (they listen and connect to nobody). Fails within `timeoutMs` when a
// peer never sends.
Result<std::map<int, std::vector<PoolFd>>> exchangeFds(uint64_t nonce, int rank, const std::vector<int>& peers,
                                                       const std::function<Result<std::vector<PoolFd>>(int peer)>& fdsFor,
                                                       const std::function<Status()>& barrier, int64_t timeoutMs);

}  // namespace occl::transport::ipc
