// The per-rank progress ("proxy") thread of the NET connector (net/connectors.hpp says what it
// mirrors). One UCX worker, one endpoint per remote peer, one table of connectors.
//
// Threads: the proxy thread owns the worker and every Conn's proxy-side fields, under mu_ for the
// whole of one pass (UCX callbacks run inside that pass). attach() runs on callers' threads and
// takes mu_ only to find or create a Conn; it never calls UCX. Daemons and the host talk to the
// proxy only through the FIFO header words and Conn::released, and ring the doorbell where they
// can (host calls); a host daemon's publish rings it while the proxy sleeps (queues/fifo.hpp),
// a GPU daemon's is found by polling.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "transport/net/conn.hpp"
#include "transport/net/net_options.hpp"
#include "transport/net/ucx.hpp"
#include "transport/net/wire.hpp"

namespace occl::transport::net {

// An eventfd the host rings to wake the sleeping proxy. Shared with every ConnectorMemory, so a
// handle that outlives the factory still rings something valid.
class Doorbell {
 public:
  Doorbell();
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  void ring() const;
  void drain() const;

 private:
  int fd_;
};

struct ConnId {
  ConnectorKey key;
  uint64_t generation;
  bool operator==(const ConnId&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const ConnId& c) {
    return H::combine(std::move(h), c.key, c.generation);
  }
};

class Proxy {
 public:
  static Result<std::unique_ptr<Proxy>> create(const NetOptions& options);
  ~Proxy();

  const std::vector<uint8_t>& address() const { return worker_->address(); }
  Status connect(const std::vector<std::vector<uint8_t>>& addresses);
  Result<std::shared_ptr<ConnectorMemory>> attach(const ConnectorKey& key, ConnectorEnd end, uint32_t nSlots,
                                                  uint64_t slotBytes);

  // UCX callbacks (proxy thread, mu_ held); public for the C callbacks in proxy_wire.cpp.
  struct Peer {
    Proxy* proxy = nullptr;
    int rank = -1;
    ucp_ep_h ep = nullptr;
    ucs_status_t failure = UCS_OK;  // set by UCX's endpoint error callback
    bool failureApplied = false;    // every Conn with this peer was poisoned for it
  };
  struct Op;  // one UCX operation in flight (proxy_wire.cpp)
  ucs_status_t onMessage(const WireHeader& h, void* data, size_t length, const ucp_am_recv_param_t* param);
  void onOpDone(Op* op, ucs_status_t status);

 private:
  explicit Proxy(const NetOptions& options);
  void run();
  bool pass();                 // one round of progress and connector scans; true when anything moved
  bool serve(const std::shared_ptr<Conn>& c);  // one connector's round; true when anything moved
  bool retirable(const Conn& c) const;
  bool publishSent(Conn& c);     // sender: local head = min(sent, credited); true when anything moved
  bool publishArrived(Conn& c);  // receiver: local tail over the landed steps, in order
  void wait(int64_t micros);   // sleeps until a UCX event, the doorbell, or `micros`
  bool setBells(bool on);      // daemon publishes ring the doorbell while the proxy sleeps; true: one was raised
  void shutdown();             // on the proxy thread once stop_ is set: drain, close endpoints

  // Find-or-create for a message of the peer; nullptr when that generation already retired here.
  std::shared_ptr<Conn> connForMessage(const WireHeader& h, ConnectorEnd localEnd, int peer);
  std::shared_ptr<Conn> makeConn(const ConnectorKey& key, uint64_t gen, ConnectorEnd end, int peer, uint64_t geometry);
  void poisonLocal(Conn& c, uint32_t status);

  // Sends: a control message (no payload), or step `step` of a sender Conn.
  void sendControl(Conn& c, WireKind kind, uint64_t value, uint32_t status = 0);
  void sendData(const std::shared_ptr<Conn>& c, uint64_t step);
  WireHeader headerFor(const Conn& c, WireKind kind) const;

  NetOptions options_;
  std::shared_ptr<const HostAllocator> allocator_;
  std::unique_ptr<UcxWorker> worker_;
  std::shared_ptr<Doorbell> doorbell_ = std::make_shared<Doorbell>();
  std::vector<std::unique_ptr<Peer>> peers_;  // by rank; ep == nullptr: not a NET peer
  bool connected_ = false;

  std::mutex mu_;
  absl::flat_hash_map<ConnId, std::shared_ptr<Conn>> conns_;
  // Per key: how many times this rank attached it (its next generation).
  absl::flat_hash_map<ConnectorKey, uint64_t> attaches_;
  uint64_t opsInFlight_ = 0;  // all Ops, for shutdown

  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace occl::transport::net
