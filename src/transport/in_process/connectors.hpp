// The in-process transport: ranks that are threads of one process (occlCommInitAll, and the
// splits of its communicators) share anonymous memory; the pairing rule is connector.hpp's.
#pragma once

#include <memory>

#include "transport/connector.hpp"

namespace occl::transport {

// What the ranks of one group of threads share; each rank's factory holds it.
class InProcessWorld;
std::shared_ptr<InProcessWorld> makeInProcessWorld();
std::unique_ptr<ConnectorFactory> makeInProcessFactory(std::shared_ptr<InProcessWorld> world);

}  // namespace occl::transport
