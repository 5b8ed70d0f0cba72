// The proxy's life: creation, connect, attach, its thread's loop and its shutdown (proxy.hpp).
// What it does per connector and per message is in proxy_wire.cpp.
#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "queues/wake_fence.hpp"
#include "transport/net/proxy.hpp"
#include "util/thread_name.hpp"

namespace occl::transport::net {
namespace {

// Idle policy of the proxy thread. After the last pass that moved anything it keeps polling for
// kSpinPasses passes (back-to-back slots of one collective cost no sleep), then sleeps until a
// UCX event (the worker's event fd), the doorbell (host calls), or a daemon's publish: before it
// sleeps the proxy sets kFifoWakeBell on the word of each FIFO it waits for (a sender's tail, a
// receiver's head), and a host daemon's publish rings the bell (queues/fifo.hpp). A GPU daemon
// rings nothing, so the sleep is also bounded, doubling from kFirstSleepUs to
// NetOptions::maxSleepUs: with the host's 1 ms an idle rank's proxy wakes about 1000 times a
// second for one short scan (well under 1% of a core; its bells, and the membarrier they need,
// go up once per idle streak); a CUDA rank's proxy takes a shorter bound
// (api.cpp), within which a slot its daemon publishes after a pause leaves. A busy proxy never
// sleeps; on a machine with fewer cores than busy threads, sleeping is what lets the daemons run.
constexpr int kSpinPasses = 2;
constexpr int64_t kFirstSleepUs = 8;  // NetOptions::maxSleepUs bounds the doubling

uint64_t checkedGeometry(uint32_t nSlots, uint64_t slotBytes) {
  if (nSlots == 0 || nSlots >= (1u << 24) || slotBytes == 0 || slotBytes >= (uint64_t{1} << 40)) return 0;
  return fifoGeometry(nSlots, slotBytes);
}

// Hands the daemon the Conn's FIFO; tells the proxy when it is let go.
class NetMemory : public ConnectorMemory {
 public:
  NetMemory(std::shared_ptr<Conn> conn, std::shared_ptr<Doorbell> doorbell)
      : conn_(std::move(conn)), doorbell_(std::move(doorbell)) {
    base_ = conn_->base;
  }
  ~NetMemory() override {
    conn_->released.store(true, std::memory_order_release);
    doorbell_->ring();
  }
  Result<uint64_t> exchangeSignature(bool isSender, uint64_t signature) override {
    if (isSender != conn_->isSender()) {
      return Status::error(occlInternalError, absl::StrFormat("connector %s: exchangeSignature as the %s on the %s end",
                                                                  conn_->key.describe(), isSender ? "sender" : "receiver",
                                                                  conn_->isSender() ? "sending" : "receiving"));
    }
    Result<uint64_t> peer = ConnectorMemory::exchangeSignature(isSender, signature);
    doorbell_->ring();  // the proxy forwards it now rather than at its next timed pass
    return peer;
  }
  Status poison(uint32_t status, uint64_t fromSeq) override {
    Status s = ConnectorMemory::poison(status, fromSeq);
    doorbell_->ring();
    return s;
  }
  // The sender's daemon fills its slots; the receiver's are filled by the proxy thread, which
  // may already be receiving into them.
  Status populate(ConnectorEnd end, uint32_t nSlots, uint64_t slotBytes, uint64_t bytesPerSlot) override {
    if (end == ConnectorEnd::Sender) populateHostSlots(base_, nSlots, slotBytes, bytesPerSlot, true);
    return Status::success();
  }

 private:
  std::shared_ptr<Conn> conn_;
  std::shared_ptr<Doorbell> doorbell_;
};

}  // namespace

Doorbell::Doorbell() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
Doorbell::~Doorbell() {
  if (fd_ >= 0) ::close(fd_);
}
void Doorbell::ring() const {
  uint64_t one = 1;
  ssize_t n = ::write(fd_, &one, sizeof one);
  (void)n;  // EAGAIN: the counter is saturated, i.e. already rung
}
void Doorbell::drain() const {
  uint64_t v;
  ssize_t n = ::read(fd_, &v, sizeof v);
  (void)n;  // EAGAIN: nobody rang
}

Proxy::Proxy(const NetOptions& options)
    : options_(options), allocator_(std::make_shared<const HostAllocator>(options.allocator)) {}

Result<std::unique_ptr<Proxy>> Proxy::create(const NetOptions& options) {
  std::unique_ptr<Proxy> p(new Proxy(options));
  if (!p->doorbell_->ok()) return Status::systemError("eventfd for the NET proxy", errno);
  auto worker = UcxWorker::create(UcxOptions{options.tls, 0});
  if (!worker.ok()) return worker.status().withContext(absl::StrFormat("rank %d: NET connector", options.rank));
  p->worker_ = std::move(worker.value());
  p->peers_.resize(static_cast<size_t>(options.nRanks));
  return p;
}

Status Proxy::connect(const std::vector<std::vector<uint8_t>>& addresses) {
  const int rank = options_.rank;
  if (connected_) {
    return Status::error(occlInvalidUsage, absl::StrFormat("rank %d: NetFactory::connect called twice", rank));
  }
  if (addresses.size() != peers_.size()) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NetFactory::connect got %d addresses for %d ranks", rank,
                                         addresses.size(), peers_.size()));
  }
  if (!addresses[rank].empty() && addresses[rank] != worker_->address()) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NetFactory::connect: this rank's own entry is another "
                                         "worker's address (ranks swapped in the address table?)",
                                         rank));
  }
  ucp_am_handler_param_t hp{};
  hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG |
                  UCP_AM_HANDLER_PARAM_FIELD_FLAGS;
  hp.id = kWireAmId;
  hp.flags = UCP_AM_FLAG_WHOLE_MSG;
  hp.arg = this;
  hp.cb = [](void* arg, const void* header, size_t headerLength, void* data, size_t length,
             const ucp_am_recv_param_t* param) -> ucs_status_t {
    if (headerLength != sizeof(WireHeader)) return UCS_OK;  // not ours: dropped
    WireHeader h;
    std::memcpy(&h, header, sizeof h);
    return static_cast<Proxy*>(arg)->onMessage(h, data, length, param);
  };
  ucs_status_t st = ucp_worker_set_am_recv_handler(worker_->worker(), &hp);
  if (st != UCS_OK) return ucsError(absl::StrFormat("rank %d: ucp_worker_set_am_recv_handler", rank), st);
  for (size_t r = 0; r < addresses.size(); ++r) {
    if (static_cast<int>(r) == rank || addresses[r].empty()) continue;
    auto peer = std::make_unique<Peer>();
    peer->proxy = this;
    peer->rank = static_cast<int>(r);
    auto ep = worker_->connect(
        addresses[r],
        [](void* arg, ucp_ep_h, ucs_status_t status) {
          // Proxy thread, inside progress: the pass that follows poisons this peer's connectors.
          auto* p = static_cast<Peer*>(arg);
          if (p->failure == UCS_OK) p->failure = status;
        },
        peer.get());
    if (!ep.ok()) {
      for (auto& made : peers_)
        if (made && made->ep) worker_->close(made->ep, 0);
      for (auto& made : peers_) made.reset();
      return ep.status().withContext(absl::StrFormat("rank %d: connecting to rank %d", rank, r));
    }
    peer->ep = ep.value();
    peers_[r] = std::move(peer);
  }
  connected_ = true;
  thread_ = std::thread([this] {
    nameThisThread("occl-proxy");
    run();
  });
  return Status::success();
}

Proxy::~Proxy() {
  if (thread_.joinable()) {
    stop_.store(true, std::memory_order_release);
    doorbell_->ring();
    thread_.join();  // bounded: shutdown() has deadlines throughout
  }
  // UCX may complete what is still in flight with an error while it destroys the worker, which
  // calls onOpDone: every member that touches is still alive here.
  worker_.reset();
}

Result<std::shared_ptr<ConnectorMemory>> Proxy::attach(const ConnectorKey& key, ConnectorEnd end,
                                                       uint32_t nSlots, uint64_t slotBytes) {
  const int rank = options_.rank;
  const bool sender = end == ConnectorEnd::Sender;
  const int self = sender ? key.sender : key.receiver, peer = sender ? key.receiver : key.sender;
  if (self != rank) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NET connector %s attached as its %s, which is rank %d", rank,
                                         key.describe(), sender ? "sender" : "receiver", self));
  }
  if (peer < 0 || peer >= options_.nRanks || peer == rank) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NET connector %s: the peer must be another of the %d ranks",
                                         rank, key.describe(), options_.nRanks));
  }
  const uint64_t geometry = checkedGeometry(nSlots, slotBytes);
  if (geometry == 0) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NET connector %s: %d slots of %d bytes (need 1..2^24-1 slots "
                                         "of 1..2^40-1 bytes)",
                                         rank, key.describe(), nSlots, slotBytes));
  }
  if (!connected_) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("rank %d: NET connector %s attached before NetFactory::connect", rank,
                                         key.describe()));
  }
  const Peer* p = peers_[peer].get();
  if (p == nullptr) {
    return Status::error(occlInvalidUsage,
                         absl::StrFormat("rank %d: NET connector %s: rank %d was given no address in connect()",
                                         rank, key.describe(), peer));
  }
  std::shared_ptr<Conn> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (p->failure != UCS_OK) {
      return Status::error(occlRemoteError,
                           absl::StrFormat("rank %d: NET connector %s: the connection to rank %d failed: %s", rank,
                                           key.describe(), peer, ucs_status_string(p->failure)));
    }
    const uint64_t gen = attaches_[key]++;
    auto it = conns_.find(ConnId{key, gen});
    if (it == conns_.end()) {
      conn = makeConn(key, gen, end, peer, geometry);
      conns_.emplace(ConnId{key, gen}, conn);
    } else {
      conn = it->second;  // the peer spoke first: its data may be waiting in this FIFO
    }
    conn->attached = true;
    conn->localGeometry = geometry;
    Status failure = Status::success();
    if (conn->base == nullptr) {
      failure = Status::error(occlSystemError, absl::StrFormat("rank %d: NET connector %s: allocating %d bytes "
                                                               "of FIFO memory failed",
                                                               rank, key.describe(), fifoBytes(nSlots, slotBytes)));
    } else if (conn->geometry != geometry) {
      failure = Status::error(
          occlInvalidUsage,
          absl::StrFormat("rank %d: NET connector %s: rank %d uses %d slots of %d bytes, this rank %d slots of %d "
                          "bytes; the collective (its count, datatype and algorithm) and connectorSlots and "
                          "connectorSlotBytes decide them, and must be the same on all ranks",
                          rank, key.describe(), peer, conn->nSlots, conn->slotBytes, nSlots, slotBytes));
      poisonLocal(*conn, occlInvalidUsage);  // forwarded to the peer, with this rank's geometry
    }
    if (!failure.ok()) {
      conn->released.store(true, std::memory_order_relaxed);  // nobody holds it: retire once told
      doorbell_->ring();
      return failure;
    }
  }
  doorbell_->ring();  // the proxy announces the attach now
  return std::shared_ptr<ConnectorMemory>(std::make_shared<NetMemory>(std::move(conn), doorbell_));
}

std::shared_ptr<Conn> Proxy::makeConn(const ConnectorKey& key, uint64_t gen, ConnectorEnd end, int peer,
                                      uint64_t geometry) {
  auto c = std::make_shared<Conn>(key, gen, end, peer, geometry, allocator_);
  c->base = allocator_->allocate(fifoBytes(c->nSlots, c->slotBytes));
  if (c->base == nullptr) {
    c->poisonSent = false;  // the peer is told occlSystemError by the Poison pass (serve)
    return c;
  }
  std::memset(c->base, 0, sizeof(FifoHeader));
  // The slots' lines too (fifo.hpp): recycled memory may hold flags of an earlier FIFO's steps.
  std::memset(c->fifo().line(0), 0, c->nSlots * sizeof(FifoLine));
  atomics::storeRelaxed(&c->header()->bellFd, static_cast<int32_t>(doorbell_->fd()));
  atomics::storeRelaxed(&c->header()->geometry, geometry);
  atomics::storeRelaxed(&c->header()->attached, 1u);
  (c->isSender() ? c->sendDone : c->arrived).assign(c->nSlots, 0);
  return c;
}

void Proxy::poisonLocal(Conn& c, uint32_t status) {
  if (c.base == nullptr) return;
  (void)poisonHeader(c.header(), status, 0);  // every submission; wakes this host's daemons parked on the FIFO
}

void Proxy::run() {
  int idle = 0;
  int64_t sleepUs = std::min(kFirstSleepUs, options_.maxSleepUs);
  while (!stop_.load(std::memory_order_acquire)) {
    bool moved;
    {
      std::lock_guard<std::mutex> lock(mu_);
      moved = pass();
    }
    if (!moved && ++idle >= kSpinPasses) {
      {
        // Announced first, then one more pass: a publish the bell missed is seen by that pass
        // (the fence pairs with the publisher's, queues/wake_fence.hpp). The bells stay up for
        // the whole idle streak, and only a bell newly raised (the streak's first sleep, or a
        // connector added since) needs the fence, which interrupts every busy core: an idle
        // proxy wakes up to 1000 times a second (20000 on a CUDA rank).
        std::lock_guard<std::mutex> lock(mu_);
        if (setBells(true)) sleeperFence();
        moved = pass();
      }
      if (!moved) {
        wait(sleepUs);
        sleepUs = std::min(sleepUs * 2, options_.maxSleepUs);
      }
    }
    if (moved) {
      if (idle >= kSpinPasses) {  // the streak's bells are up
        std::lock_guard<std::mutex> lock(mu_);
        setBells(false);
      }
      idle = 0;
      sleepUs = kFirstSleepUs;
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  setBells(false);  // no publish may write an eventfd this process is about to close
  shutdown();
}

bool Proxy::setBells(bool on) {
  bool raised = false;
  for (auto& [id, c] : conns_) {
    if (c->base == nullptr) continue;
    FifoHeader* fh = c->header();
    std::atomic_ref<uint32_t> wake(*fifoWake(fh, c->isSender() ? FifoWord::Tail : FifoWord::Head));
    if (on) {
      raised = (wake.fetch_or(kFifoWakeBell, std::memory_order_seq_cst) & kFifoWakeBell) == 0 || raised;
    } else {
      wake.fetch_and(~kFifoWakeBell, std::memory_order_seq_cst);
    }
  }
  return raised;
}

void Proxy::wait(int64_t micros) {
  if (!worker_->arm()) return;  // events are pending: progress them instead
  pollfd fds[2] = {{worker_->eventFd(), POLLIN, 0}, {doorbell_->fd(), POLLIN, 0}};
  timespec ts{static_cast<time_t>(micros / 1000000), static_cast<long>((micros % 1000000) * 1000)};
  ppoll(fds, 2, &ts, nullptr);
  doorbell_->drain();
}

bool Proxy::pass() {
  bool moved = worker_->progress();
  for (auto& peer : peers_) {
    if (!peer || peer->failure == UCS_OK || peer->failureApplied) continue;
    peer->failureApplied = true;
    for (auto& [id, c] : conns_)
      if (c->peer == peer->rank) poisonLocal(*c, occlRemoteError);
    moved = true;
  }
  for (auto it = conns_.begin(); it != conns_.end();) {
    moved |= serve(it->second);
    if (retirable(*it->second)) {
      conns_.erase(it++);
      moved = true;
    } else {
      ++it;
    }
  }
  return moved;
}

void Proxy::shutdown() {
  // Ship what daemons already published and let in-flight sends finish, for up to drainMs.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(options_.drainMs);
  for (;;) {
    pass();
    bool pending = opsInFlight_ > 0;
    for (auto& [id, c] : conns_) {
      if (c->isSender() && c->base != nullptr && peers_[c->peer]->failure == UCS_OK &&
          c->shipped < atomics::loadAcquire(&c->header()->tail))
        pending = true;
    }
    if (!pending || std::chrono::steady_clock::now() > deadline) break;
    wait(100);
  }
  // A connector still held here has a daemon that would wait for the peer forever: fail it, and
  // tell the peer in the same breath (its endpoint error would tell it too, only later).
  bool poisoned = false;
  for (auto& [id, c] : conns_) {
    if (c->attached && c->base != nullptr && !c->released.load(std::memory_order_acquire) &&
        atomics::loadAcquire(&c->header()->poison) == 0) {
      poisonLocal(*c, occlRemoteError);
      poisoned = true;
    }
  }
  if (poisoned) pass();
  // Close every endpoint at once, flushing briefly; a failed one is closed by force.
  std::vector<ucs_status_ptr_t> closing;
  for (auto& peer : peers_) {
    if (!peer || !peer->ep) continue;
    ucp_request_param_t prm{};
    prm.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    prm.flags = peer->failure == UCS_OK ? 0u : static_cast<uint32_t>(UCP_EP_CLOSE_FLAG_FORCE);
    ucs_status_ptr_t req = ucp_ep_close_nbx(peer->ep, &prm);
    peer->ep = nullptr;
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
  }
  auto closeDeadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (std::chrono::steady_clock::now() < closeDeadline) {
    worker_->progress();
    closing.erase(std::remove_if(closing.begin(), closing.end(),
                                 [](ucs_status_ptr_t r) {
                                   if (ucp_request_check_status(r) == UCS_INPROGRESS) return false;
                                   ucp_request_free(r);
                                   return true;
                                 }),
                  closing.end());
    if (closing.empty() && opsInFlight_ == 0) break;
  }
  // A peer that never progresses (hung, or never connected back) leaves its close open: release
  // the request, and ucp_worker_destroy in ~Proxy tears the endpoint down (and fails, with
  // onOpDone, any operation still in flight on it).
  for (ucs_status_ptr_t r : closing) ucp_request_free(r);
}

}  // namespace occl::transport::net
