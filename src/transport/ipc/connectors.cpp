#include "transport/ipc/connectors.hpp"

#include <algorithm>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "device/compat.hpp"
#include "transport/shm/pool_access.hpp"

namespace occl::transport::ipc {
namespace {

// A connector's range of the shm pool.
struct alignas(64) Record {
  FifoHeader shadow;      // the hosts' handshake: geometry, attached, signatures, poison
  uint32_t state;         // kEmpty until the first end has published `fifo` (or failed)
  int32_t owner;          // the rank that allocated it
  uint32_t importerDone;  // the importer has closed its import: the owner may free it
  uint32_t unused;
  Export fifo;
};
static_assert(sizeof(Record) <= 512, "a record takes a packed range of the pool");
constexpr uint32_t kEmpty = 0, kPublished = 1, kFailed = 2;

// What a factory's connectors share: the device, the pool, and the FIFOs this rank allocated
// whose importer has not let go yet.
class IpcWorld {
 public:
  IpcWorld(uint64_t nonce, int64_t timeoutMs, int rank, std::shared_ptr<IpcDevice> device)
      : nonce_(nonce), timeoutMs_(timeoutMs), rank_(rank), device_(std::move(device)) {}
  // What is still retained has an importer that never let go: it died, or still runs after this
  // rank's abort (or has not yet destroyed its communicator after finalize). Such a FIFO stays
  // as it is, not freed: freeing would zero it (simt) or unmap it under a live importer (CUDA),
  // and the importer must see the poison this rank left there. It goes with the memory behind
  // the pool: simt's memfd once no process maps it, CUDA's pool when the driver releases it.
  ~IpcWorld() {
    std::lock_guard<std::mutex> lock(mu_);
    sweep();
  }

  IpcDevice& device() { return *device_; }
  int rank() const { return rank_; }
  int64_t timeoutMs() const { return timeoutMs_; }

  PoolAccess& access() { return access_; }

  // The owner is done with its FIFO: kept until its importer has let go.
  void retire(const PoolKey& key, Record* record, void* fifo) {
    std::lock_guard<std::mutex> lock(mu_);
    retained_.push_back({key, record, fifo});
    sweepIfGrown();
  }
  // At each attach: what was retained goes back to the device once its importer let go.
  void sweepRetained() {
    std::lock_guard<std::mutex> lock(mu_);
    sweepIfGrown();
  }

 private:
  struct Retained {
    PoolKey key;
    Record* record;
    void* fifo;
  };
  // Under mu_. A sweep reads every retained record, so it runs once the list has doubled since the
  // last one (at least kMinSweep entries): a burst of deregistrations whose importers have not yet
  // let go costs linear time, not quadratic, and holds back at most twice what it must.
  static constexpr size_t kMinSweep = 16;
  void sweepIfGrown() {
    if (retained_.size() < sweepAt_) return;
    sweep();
    sweepAt_ = std::max(kMinSweep, 2 * retained_.size());
  }
  // Under mu_.
  void sweep() {
    std::erase_if(retained_, [&](const Retained& r) {
      if (atomics::loadAcquire(&r.record->importerDone) == 0) return false;
      freeAndRelease(r);
      return true;
    });
  }
  void freeAndRelease(const Retained& r) {
    device_->free(r.fifo);
    if (Result<std::shared_ptr<ShmPool>> pool = access_.pool(); pool.ok()) pool.value()->release(r.key);  // opened: r came from it
  }

  const uint64_t nonce_;
  const int64_t timeoutMs_;
  const int rank_;
  std::shared_ptr<IpcDevice> device_;
  std::shared_ptr<JobSegments> segments_ = std::make_shared<JobSegments>(nonce_);  // after the pool's users
  PoolAccess access_{nonce_, timeoutMs_};
  std::mutex mu_;
  std::vector<Retained> retained_;
  size_t sweepAt_ = kMinSweep;  // sweepIfGrown
};

class IpcFifo : public ConnectorMemory {
 public:
  IpcFifo(std::shared_ptr<IpcWorld> world, std::shared_ptr<ShmPool> pool, const PoolKey& key, Record* record,
          void* fifo, bool owner)
      : world_(std::move(world)), pool_(std::move(pool)), key_(key), record_(record), owner_(owner) {
    base_ = fifo;
  }
  ~IpcFifo() override {
    if (owner_) {
      world_->retire(key_, record_, base_);
      return;
    }
    world_->device().closeImport(base_);
    atomics::storeRelease(&record_->importerDone, 1u);
    pool_->release(key_);
  }

  Result<uint64_t> exchangeSignature(bool isSender, uint64_t signature) override {
    FifoHeader* shadow = &record_->shadow;
    uint64_t* field = isSender ? &header()->senderSig : &header()->receiverSig;
    if (Status s = world_->device().copyIn(field, &signature, sizeof(signature)); !s.ok()) return s;
    atomics::storeRelease(isSender ? &shadow->senderSig : &shadow->receiverSig, signature);
    return atomics::loadAcquire(isSender ? &shadow->receiverSig : &shadow->senderSig);
  }

  // The daemons read the device header; the shadow keeps the first status for the hosts. A daemon
  // that poisons between the read and the write here loses its status to this one: both are
  // failures, and every reader only asks whether the word is nonzero.
  Status poison(uint32_t status, uint64_t fromSeq) override {
    (void)poisonHeader(&record_->shadow, status, fromSeq);
    IpcDevice& d = world_->device();
    uint32_t current = 0;
    if (Status s = d.copyOut(&current, &header()->poison, sizeof(current)); !s.ok() || current != 0) return s;
    if (Status s = d.copyIn(&header()->poisonSeq, &fromSeq, sizeof(fromSeq)); !s.ok()) return s;
    return d.copyIn(&header()->poison, &status, sizeof(status));
  }

  FifoHeader* shadow() const { return &record_->shadow; }

 private:
  std::shared_ptr<IpcWorld> world_;
  std::shared_ptr<ShmPool> pool_;
  PoolKey key_;
  Record* record_;
  bool owner_;
};

class IpcFactory : public ConnectorFactory {
 public:
  explicit IpcFactory(std::shared_ptr<IpcWorld> world) : world_(std::move(world)) {}

  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes) override {
    world_->sweepRetained();
    Result<std::shared_ptr<ShmPool>> pool = world_->access().pool();
    if (!pool.ok()) return pool.status();
    const PoolKey poolKey{key, world_->access().nextGeneration(key, end)};
    Result<ShmPool::Range> range = pool.value()->attach(poolKey, sizeof(Record), /*packed=*/true);
    if (!range.ok()) return range.status();
    auto* record = reinterpret_cast<Record*>(range.value().base);
    if (range.value().bytes != rangeBytes(sizeof(Record), true)) {
      pool.value()->release(poolKey);
      return Status::error(occlInternalError,
                           absl::StrFormat("connector %s: the other end's range takes %d bytes, an IPC record %d: the "
                                           "ends chose different transports",
                                           key.describe(), range.value().bytes, rangeBytes(sizeof(Record), true)));
    }
    const size_t bytes = fifoBytes(nSlots, slotBytes);
    Result<std::shared_ptr<IpcFifo>> fifo = range.value().created ? allocate(pool.value(), poolKey, record, bytes)
                                                                  : import(pool.value(), poolKey, record);
    if (!fifo.ok()) return fifo.status().withContext(absl::StrFormat("connector %s", key.describe()));
    if (Status claimed = claimGeometry(fifo.value()->shadow(), nSlots, slotBytes, key); !claimed.ok()) {
      (void)fifo.value()->poison(occlInvalidUsage, 0);  // the FIFO too: the other end's daemon reads that one
      return claimed;
    }
    return std::shared_ptr<ConnectorMemory>(fifo.value());
  }
  const char* name() const override { return world_->device().name(); }

 private:
  Result<std::shared_ptr<IpcFifo>> allocate(const std::shared_ptr<ShmPool>& pool, const PoolKey& key, Record* record,
                                            size_t bytes) {
    Result<std::pair<void*, Export>> made = world_->device().allocate(bytes, key.connector.receiver);
    if (!made.ok()) {
      (void)poisonHeader(&record->shadow, occlSystemError, 0);
      atomics::storeRelease(&record->state, kFailed);
      pool->release(key);
      return made.status();
    }
    record->owner = world_->rank();
    record->fifo = made.value().second;
    atomics::storeRelease(&record->state, kPublished);
    return std::make_shared<IpcFifo>(world_, pool, key, record, made.value().first, /*owner=*/true);
  }

  Result<std::shared_ptr<IpcFifo>> import(const std::shared_ptr<ShmPool>& pool, const PoolKey& key, Record* record) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(world_->timeoutMs());
    uint32_t state = kEmpty;
    while ((state = atomics::loadAcquire(&record->state)) == kEmpty && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    Status failed = Status::success();
    if (state == kEmpty)
      failed = Status::error(occlTimeout, absl::StrFormat("the other end took the connector's record but published no "
                                                          "FIFO within %d ms (did its process die?)",
                                                          world_->timeoutMs()));
    if (state == kFailed)
      failed = Status::error(occlSystemError, "the other end could not allocate the connector's FIFO (its error says why)");
    if (!failed.ok()) {
      pool->release(key);
      return failed;
    }
    Result<void*> fifo = world_->device().importPointer(record->owner, record->fifo, key.connector.receiver);
    if (!fifo.ok()) {
      (void)poisonHeader(&record->shadow, occlSystemError, 0);
      atomics::storeRelease(&record->importerDone, 1u);
      pool->release(key);
      return fifo.status();
    }
    return std::make_shared<IpcFifo>(world_, pool, key, record, fifo.value(), /*owner=*/false);
  }

  std::shared_ptr<IpcWorld> world_;
};

}  // namespace

std::unique_ptr<ConnectorFactory> makeIpcFactory(uint64_t nonce, int64_t attachTimeoutMs, int rank,
                                                 std::shared_ptr<IpcDevice> device) {
  return std::make_unique<IpcFactory>(std::make_shared<IpcWorld>(nonce, attachTimeoutMs, rank, std::move(device)));
}

}  // namespace occl::transport::ipc
