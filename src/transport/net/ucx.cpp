// UcxWorker: context, worker and endpoints (ucx.hpp).
#include "transport/net/ucx.hpp"

#include <chrono>

#include "absl/strings/str_format.h"

namespace occl::transport::net {

Status ucsError(const std::string& what, ucs_status_t status) {
  return Status::error(occlSystemError, absl::StrFormat("%s: %s", what, ucs_status_string(status)));
}

Result<std::unique_ptr<UcxWorker>> UcxWorker::create(const UcxOptions& options) {
  std::unique_ptr<UcxWorker> w(new UcxWorker());
  // ucp_config_read applies UCX_* from the environment; an explicit TLS overrides UCX_TLS.
  ucp_config_t* config = nullptr;
  ucs_status_t st = ucp_config_read(nullptr, nullptr, &config);
  if (st != UCS_OK) return ucsError("reading the UCX configuration (UCX_* variables)", st);
  if (!options.tls.empty()) {
    st = ucp_config_modify(config, "TLS", options.tls.c_str());
    if (st != UCS_OK) {
      ucp_config_release(config);
      return ucsError(absl::StrFormat("UCX transports \"%s\"", options.tls), st);
    }
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP | options.extraFeatures;
  params.name = "occl";
  st = ucp_init(&params, config, &w->context_);
  ucp_config_release(config);
  if (st != UCS_OK) {
    w->context_ = nullptr;
    return ucsError(absl::StrFormat("ucp_init (transports \"%s\")", options.tls.empty() ? "from UCX_TLS" : options.tls),
                    st);
  }
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  st = ucp_worker_create(w->context_, &wp, &w->worker_);
  if (st != UCS_OK) {
    w->worker_ = nullptr;
    return ucsError("ucp_worker_create", st);
  }
  st = ucp_worker_get_efd(w->worker_, &w->efd_);
  if (st != UCS_OK) return ucsError("ucp_worker_get_efd", st);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  st = ucp_worker_get_address(w->worker_, &addr, &len);
  if (st != UCS_OK) return ucsError("ucp_worker_get_address", st);
  const auto* bytes = reinterpret_cast<const uint8_t*>(addr);
  w->address_.assign(bytes, bytes + len);
  ucp_worker_release_address(w->worker_, addr);
  return w;
}

UcxWorker::~UcxWorker() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

Result<ucp_ep_h> UcxWorker::connect(const std::vector<uint8_t>& peerAddress, EndpointErrorFn onError,
                                    void* arg) {
  if (peerAddress.empty()) {
    return Status::error(occlInvalidArgument, "an empty UCX worker address cannot be connected to");
  }
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(peerAddress.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = onError;
  ep.err_handler.arg = arg;
  ucp_ep_h handle = nullptr;
  ucs_status_t st = ucp_ep_create(worker_, &ep, &handle);
  if (st != UCS_OK) return ucsError("ucp_ep_create from a peer's worker address", st);
  return handle;
}

void UcxWorker::close(ucp_ep_h ep, int flushMs) {
  // One close per endpoint: a flush close that times out cannot be turned into a forced one, so
  // its request is left to ucp_worker_destroy, which releases every endpoint it still has.
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = flushMs > 0 ? 0u : static_cast<uint32_t>(UCP_EP_CLOSE_FLAG_FORCE);
  ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
  if (req == nullptr || UCS_PTR_IS_ERR(req)) return;  // closed now, or gone either way
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(flushMs > 0 ? flushMs : 100);
  while (ucp_request_check_status(req) == UCS_INPROGRESS) {
    if (std::chrono::steady_clock::now() > deadline) return;
    ucp_worker_progress(worker_);
  }
  ucp_request_free(req);
}

bool UcxWorker::progress() {
  bool any = false;
  while (ucp_worker_progress(worker_) != 0) any = true;
  return any;
}

bool UcxWorker::arm() { return ucp_worker_arm(worker_) == UCS_OK; }

}  // namespace occl::transport::net
