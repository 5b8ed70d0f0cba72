// Transports decide where a connector's FIFO memory lives; the daemon only ever sees a
// FifoHandle. A registered collective attaches one connector per (sender, receiver, channel);
// both ends name it by the same ConnectorKey, in any order and at any time.
//
// Pairing rule: the k-th attach of a key by its sender meets the k-th attach by its receiver.
// The memory lives from the first end's attach until both ends have attached and released it,
// so an end that finishes, deregisters and even registers the collId again before its peer has
// registered loses nothing it sent: its new registration pairs with the peer's next one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "queues/fifo.hpp"
#include "queues/yield_board.hpp"
#include "util/status.hpp"

namespace occl::transport {

struct ConnectorKey {
  uint64_t collId;
  int32_t sender;
  int32_t receiver;
  int32_t channel;
  int32_t form = 0;  // a collective's in-place form may run another program than its out-of-place one

  bool operator==(const ConnectorKey&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const ConnectorKey& k) {
    return H::combine(std::move(h), k.collId, k.sender, k.receiver, k.channel, k.form);
  }
  std::string describe() const;
};

enum class ConnectorEnd : uint8_t { Sender, Receiver };

// One mapping of connector memory; unmapped when the last user releases it.
class ConnectorMemory {
 public:
  virtual ~ConnectorMemory() = default;
  // As the daemon addresses it: host memory, or device memory for the CUDA daemon.
  FifoHeader* header() const { return static_cast<FifoHeader*>(base_); }
  char* data() const { return static_cast<char*>(base_) + kFifoDataOffset; }

  // The host's half of the registration handshake (FifoHeader): publishes this end's signature
  // and returns the other end's, 0 while it has not registered. Memory the host cannot address
  // (a FIFO in device memory) overrides this.
  virtual Result<uint64_t> exchangeSignature(bool isSender, uint64_t signature) {
    FifoHeader* h = header();
    atomics::storeRelease(isSender ? &h->senderSig : &h->receiverSig, signature);
    return atomics::loadAcquire(isSender ? &h->receiverSig : &h->senderSig);
  }

  // Fails every user of this connector with `status` (FifoHeader::poison) from submission
  // `fromSeq` on (0: every one); a connector already poisoned keeps its first status. The host's
  // way in after an abort, while the daemon poisons through its FifoHandle. Memory the host cannot
  // address (a FIFO in device memory) overrides this: a host CAS on device memory is a segfault
  // (defect D2).
  virtual Status poison(uint32_t status, uint64_t fromSeq) {
    (void)poisonHeader(header(), status, fromSeq);
    return Status::success();
  }
  // Called by `end` at registration: maps in, for this process, the pages its collective will
  // touch (the header, the first `bytesPerSlot` of each of the `nSlots` slots of `slotBytes`, the
  // slot lengths). Otherwise the collective's first round through the slots takes a fault per page
  // in each process that maps them: a small AllReduce's first 4 runs on 4 thread-ranks cost ~4x a
  // warm one. Memory that needs nothing (device, pinned) keeps this default. Fails (occlSystemError)
  // where the memory behind those pages cannot be had: /dev/shm full, for the shm connector.
  virtual Status populate(ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot) {
    return Status::success();
  }

  // Called on a connector whose registration failed, after poisoning it: gives back the memory
  // behind its slots where that memory outlives this mapping (a shm segment stays in /dev/shm
  // until its peer attaches or the job ends). The header stays, and with it the poison.
  virtual void discard() {}

 protected:
  void* base_ = nullptr;
};

class ConnectorFactory {
 public:
  virtual ~ConnectorFactory() = default;
  // Maps this rank's `end` of connector `key` with `nSlots` slots of `slotBytes`. Fails with
  // occlInvalidUsage when the other end mapped it with another geometry.
  virtual Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end,
                                                          uint32_t nSlots, uint64_t slotBytes) = 0;
  virtual const char* name() const = 0;
  // The yield board (queues/yield_board.hpp) this rank shares with every peer, in memory they all
  // map; nullptr where there is none (a peer behind NET, device memory).
  virtual YieldBoard* yieldBoard() { return nullptr; }
  // The transport this rank's connectors to rank `peer` take (occlCommPeerTransport).
  virtual const char* transportTo(int peer) const { return name(); }
};

// ConnectorMemory::populate for pageable host memory at `base`, by touching each page from this
// thread: the kernel maps it, and so does a hypervisor that shadows the guest's page tables (on
// such a VM, MADV_POPULATE_WRITE left most of the cost). The touches are atomic and change
// nothing, so a peer may already be using the memory: `writer` adds 0 to a word of each page (the
// end that fills the slots; it runs before its own daemon can), a reader only loads one. Either
// adds 0 to the header's `attached` word, which every end writes.
void populateHostSlots(void* base, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot, bool writer);

// Calls fn(from, bytes) for each range of a connector at `base` that a collective writing
// `bytesPerSlot` of each slot uses besides the header: each slot's first bytesPerSlot, the slot
// lengths and stamps, the slots' lines (queues/fifo.hpp).
template <typename Fn>
void forEachUsedRange(void* base, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot, Fn&& fn) {
  char* data = static_cast<char*>(base) + kFifoDataOffset;
  const uint64_t used = bytesPerSlot < slotBytes ? bytesPerSlot : slotBytes;
  for (uint32_t s = 0; s < nSlots; ++s) fn(data + s * slotBytes, used);
  fn(data + fifoLengthsOffset(nSlots, slotBytes), 2 * nSlots * sizeof(uint64_t));  // the lengths, then the stamps
  fn(data + fifoLinesOffset(nSlots, slotBytes), nSlots * sizeof(FifoLine));
}

// Sets the geometry word on first mapping, or checks it matches what the other end set. On a
// mismatch (occlInvalidUsage) it poisons the header with occlInvalidUsage: the other end, which
// may already be waiting on the connector, fails as for a signature mismatch.
Status claimGeometry(FifoHeader* header, uint32_t nSlots, uint64_t slotBytes, const ConnectorKey& key);

}  // namespace occl::transport
