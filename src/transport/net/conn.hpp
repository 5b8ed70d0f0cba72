// One generation of one NET connector on this rank: its local FIFO and what the proxy knows about
// mirroring it. Created by whichever comes first, this rank's attach or the peer's first message
// for (key, generation); kept by the proxy's table until this rank attached and released it and
// nothing in flight still uses its memory, and by each ConnectorMemory and UCX operation that
// uses it (shared_ptr), so the memory outlives every reader and writer.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/connector.hpp"
#include "transport/host_allocator.hpp"

namespace occl::transport::net {

struct Conn {
  Conn(const ConnectorKey& k, uint64_t g, ConnectorEnd e, int p, uint64_t geom,
       std::shared_ptr<const HostAllocator> a)
      : key(k), generation(g), end(e), peer(p), geometry(geom), nSlots(static_cast<uint32_t>(geom >> 40)),
        slotBytes(geom & ((uint64_t{1} << 40) - 1)), allocator(std::move(a)) {}
  ~Conn() {
    if (base != nullptr) allocator->release(base, fifoBytes(nSlots, slotBytes));
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  FifoHeader* header() const { return static_cast<FifoHeader*>(base); }
  // The local FIFO as the daemon sees it (queues/fifo.hpp).
  FifoHandle fifo() const { return FifoHandle{header(), static_cast<char*>(base) + kFifoDataOffset, nSlots, 0, slotBytes}; }
  char* slot(uint64_t step) const { return fifo().slot(step); }
  // The slot's length word: bytes the sender filled in the slot holding `step`.
  uint64_t* length(uint64_t step) const { return fifo().slotLength(step); }
  uint64_t* stamp(uint64_t step) const { return fifo().slotStamp(step); }
  bool isSender() const { return end == ConnectorEnd::Sender; }

  // Fixed at creation.
  const ConnectorKey key;
  const uint64_t generation;
  const ConnectorEnd end;  // this rank's end
  const int peer;
  const uint64_t geometry;  // of the FIFO below: this rank's attach, or the peer's first message
  const uint32_t nSlots;
  const uint64_t slotBytes;
  const std::shared_ptr<const HostAllocator> allocator;
  void* base = nullptr;  // fifoBytes(nSlots, slotBytes); nullptr when allocation failed

  // Set once by the local ConnectorMemory's destructor, on any thread.
  std::atomic<bool> released{false};

  // Everything below belongs to the proxy (read and written under Proxy::mu_ only).
  bool attached = false;       // this rank attached this generation (else only the peer spoke)
  uint64_t localGeometry = 0;  // what this rank attached with (differs from geometry: it failed)
  bool attachSent = false;
  uint64_t signatureSent = 0;
  bool poisonSent = false;      // the peer knows this connector is poisoned (or cannot be told)
  uint32_t opsInFlight = 0;     // UCX operations that read or write `base`
  // Sender end: steps shipped (posted to UCX), sent (send completed, in order) and credited.
  uint64_t shipped = 0, sent = 0, credited = 0;
  std::vector<uint8_t> sendDone;  // per slot: the send of the step it holds completed
  // Receiver end: steps published to the local tail, and the head last credited to the peer.
  uint64_t tail = 0, creditSent = 0;
  std::vector<uint8_t> arrived;  // per slot: the step it awaits has landed
};

}  // namespace occl::transport::net
