// Transports decide where a connector's FIFO memory lives; the daemon only ever sees a
// FifoHandle. A registered collective attaches one connector per (sender, receiver, channel);
// both ends name it by the same ConnectorKey, in any order and at any time, and the memory stays
// until both ends have released it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "host/status.hpp"
#include "queues/fifo.hpp"

namespace occl::transport {

struct ConnectorKey {
  uint64_t collId;
  int32_t sender;
  int32_t receiver;
  int32_t channel;

  bool operator==(const ConnectorKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const ConnectorKey& k) {
    return H::combine(std::move(h), k.collId, k.sender, k.receiver, k.channel);
  }
  std::string describe() const;
};

// One mapping of connector memory; unmapped when the last user releases it.
class ConnectorMemory {
 public:
  virtual ~ConnectorMemory() = default;
  FifoHeader* header() const { return static_cast<FifoHeader*>(base_); }
  char* data() const { return static_cast<char*>(base_) + kFifoDataOffset; }

 protected:
  void* base_ = nullptr;
};

class ConnectorFactory {
 public:
  virtual ~ConnectorFactory() = default;
  // Maps the connector `key` with `nSlots` slots of `slotBytes`. Fails with occlInvalidUsage when
  // the other end mapped it with another geometry.
  virtual host::Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, uint32_t nSlots,
                                                                uint64_t slotBytes) = 0;
  virtual const char* name() const = 0;
};

// Ranks that are threads of one process share anonymous memory through this.
class InProcessWorld;
std::shared_ptr<InProcessWorld> makeInProcessWorld();
std::unique_ptr<ConnectorFactory> makeInProcessFactory(std::shared_ptr<InProcessWorld> world);

// Ranks that are processes of one host share POSIX shared memory named after the job's nonce.
std::unique_ptr<ConnectorFactory> makeShmFactory(uint64_t jobNonce, int64_t attachTimeoutMs);

// Sets the geometry word on first mapping, or checks it matches what the other end set.
host::Status claimGeometry(FifoHeader* header, uint32_t nSlots, uint64_t slotBytes, const ConnectorKey& key);

}  // namespace occl::transport
