// NetFactory: the public face of the NET connector (net/connectors.hpp); the work is the Proxy's.
#include "transport/net/connectors.hpp"

#include "absl/strings/str_format.h"
#include "transport/net/proxy.hpp"

namespace occl::transport::net {

NetFactory::NetFactory(NetOptions options) : options_(std::move(options)) {}
NetFactory::~NetFactory() = default;

const std::vector<uint8_t>& NetFactory::localAddress() const { return proxy_->address(); }

Status NetFactory::connect(const std::vector<std::vector<uint8_t>>& addresses) {
  return proxy_->connect(addresses);
}

Result<std::shared_ptr<ConnectorMemory>> NetFactory::attach(const ConnectorKey& key, ConnectorEnd end,
                                                            uint32_t nSlots, uint64_t slotBytes) {
  return proxy_->attach(key, end, nSlots, slotBytes);
}

Result<std::unique_ptr<NetFactory>> makeNetFactory(NetOptions options) {
  if (options.nRanks < 1 || options.rank < 0 || options.rank >= options.nRanks) {
    return Status::error(occlInvalidArgument, absl::StrFormat("NET connector: rank %d of %d ranks is not a rank",
                                                              options.rank, options.nRanks));
  }
  if (!options.allocator.allocate || !options.allocator.release) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NET connector: the FIFO allocator needs both allocate and "
                                         "release",
                                         options.rank));
  }
  if (options.maxSleepUs < 1 || options.maxSleepUs > 1000000) {
    return Status::error(occlInvalidArgument, absl::StrFormat("rank %d: NET connector: maxSleepUs %d outside 1..1000000",
                                                              options.rank, options.maxSleepUs));
  }
  if (options.drainMs < 0) {
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("rank %d: NET connector: drainMs %d < 0", options.rank, options.drainMs));
  }
  std::unique_ptr<NetFactory> f(new NetFactory(options));
  auto proxy = Proxy::create(f->options_);
  if (!proxy.ok()) return proxy.status();
  f->proxy_ = std::move(proxy.value());
  return f;
}

}  // namespace occl::transport::net
