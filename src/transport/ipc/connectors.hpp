// Connectors between device ranks (CUDA or simt) of different processes of one host, in device
// memory (ipc_device.hpp): the `cuda-ipc` and `simt-ipc` transports of select.hpp.
//
// Pairing (the rule of connector.hpp) goes through the job's shm pool (shm/pool.hpp), whose range
// for a connector holds a small record instead of the FIFO: whichever end attaches first
// allocates the FIFO on the receiver's GPU and publishes its Export there; the other end imports
// it. No end waits for its peer to register (registration in any order stays deadlock-free);
// the second end waits only for the first to finish publishing, which needs nothing of it.
// The record also holds the hosts' copies of the handshake: the geometry claim and both
// signatures (the daemons read their own copies in the FIFO's device header).
//
// Lifetime: the importer closes its import, marks the record, and releases the range. The
// allocator frees the FIFO once the importer has let go. One whose importer has not when the
// allocator's factory and connectors are gone (the importer died, never attached, or still runs
// after this rank's abort) is left as it is, never freed under a live importer, which must still
// see its poison: it goes with the pool's memory (simt: the memfd, once no process maps it; CUDA:
// the pool, which the driver releases with its last user). Pools imported at set-up go with the
// IpcDevice.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/connector.hpp"
#include "transport/ipc/ipc_device.hpp"

namespace occl::transport::ipc {

// `rank`'s connectors in `device`'s memory, paired in the pool of job `nonce`; the second end
// waits up to `attachTimeoutMs` for the first to publish.
std::unique_ptr<ConnectorFactory> makeIpcFactory(uint64_t nonce, int64_t attachTimeoutMs, int rank,
                                                 std::shared_ptr<IpcDevice> device);

}  // namespace occl::transport::ipc
