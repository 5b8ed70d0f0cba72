// RAII over the few UCX objects the NET connector needs: one ucp_context and one ucp_worker per
// rank (UcxWorker), and endpoints to peers made from their worker-address bytes.
//
// Threading: the worker is created UCS_THREAD_MODE_SINGLE. Whoever owns a UcxWorker calls it
// from one thread at a time; NetFactory creates it and its endpoints on the caller's thread
// before its proxy thread starts, and from then on only the proxy thread touches it.
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "util/status.hpp"

namespace occl::transport::net {

struct UcxOptions {
  // UCX transports (UCX_TLS syntax, e.g. "tcp" or "rc,sm,self"); empty keeps what UCX reads from
  // the environment (UCX_TLS, else all it finds). Every other UCX_* variable still applies.
  std::string tls;
  // Features beyond active messages and wakeup (e.g. UCP_FEATURE_TAG | UCP_FEATURE_RMA for the
  // path benchmark); the connector itself needs only AM + WAKEUP.
  uint64_t extraFeatures = 0;
};

// "<what>: <UCX's words for status>" as an occlSystemError.
Status ucsError(const std::string& what, ucs_status_t status);

// Called on the progress thread when UCX reports an endpoint failed (peer died, connection reset).
using EndpointErrorFn = void (*)(void* arg, ucp_ep_h ep, ucs_status_t status);

class UcxWorker {
 public:
  static Result<std::unique_ptr<UcxWorker>> create(const UcxOptions& options);
  ~UcxWorker();
  UcxWorker(const UcxWorker&) = delete;
  UcxWorker& operator=(const UcxWorker&) = delete;

  ucp_context_h context() const { return context_; }
  ucp_worker_h worker() const { return worker_; }
  // This worker's address, to hand to peers (opaque bytes, valid for the worker's lifetime).
  const std::vector<uint8_t>& address() const { return address_; }
  // The worker's wakeup file descriptor (readable when arm() said so and an event came).
  int eventFd() const { return efd_; }

  // An endpoint to the worker whose address() is `peerAddress`, with peer failure reported to
  // `onError` (UCP_ERR_HANDLING_MODE_PEER) instead of aborting the process.
  Result<ucp_ep_h> connect(const std::vector<uint8_t>& peerAddress, EndpointErrorFn onError, void* arg);

  // Closes `ep`: flushes what it still sends for up to `flushMs` (0: forced close, up to 100 ms).
  // Progresses the worker meanwhile and never waits longer than that.
  void close(ucp_ep_h ep, int flushMs);

  // Progresses until nothing more happens; true when something did.
  bool progress();
  // Prepares the event fd for waiting: true when the caller may block on eventFd(), false when
  // events are already pending and the caller should progress instead.
  bool arm();

 private:
  UcxWorker() = default;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<uint8_t> address_;
};

}  // namespace occl::transport::net
