// How the ranks of a group of threads of one process get their connector factories
// (occlCommInitAll, and the splits of its communicators): they share connector memory in the
// process, host memory for host and simt ranks, GPU memory for CUDA ranks (cuda/connectors.hpp).
// Ranks that are processes take the transport table instead (select.hpp).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "transport/connector.hpp"

namespace occl::transport::in_process {

// `devices[r]` is rank r's CUDA device, -1 for all where the ranks are host threads (all ranks of
// one group are of one kind). Each call of the returned function makes the next rank's factory.
std::function<std::unique_ptr<ConnectorFactory>()> connectorsFor(const std::vector<int>& devices);

}  // namespace occl::transport::in_process
