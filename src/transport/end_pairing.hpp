// The pairing rule of connector.hpp for ranks that share one process: memory one end created is
// held here until the other end takes it. Not thread-safe: the owning world locks around it.
#pragma once

#include <deque>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "transport/connector.hpp"

namespace occl::transport {

class EndPairing {
 public:
  // The oldest memory the other end created for `key` and `end` has not joined, or nullptr when
  // this end comes first (it then creates the memory and hands it to hold()).
  std::shared_ptr<ConnectorMemory> take(const ConnectorKey& key, ConnectorEnd end) {
    auto it = waiting_.find(key);
    if (it == waiting_.end() || it->second.creator == end) return nullptr;
    std::shared_ptr<ConnectorMemory> memory = std::move(it->second.memories.front());
    it->second.memories.pop_front();
    if (it->second.memories.empty()) waiting_.erase(it);
    return memory;
  }

  // Keeps `memory`, created by `creator`, until the other end takes it. Only called after take()
  // returned nullptr, so every memory waiting for one key was created by the same end.
  void hold(const ConnectorKey& key, ConnectorEnd creator, std::shared_ptr<ConnectorMemory> memory) {
    Waiting& w = waiting_[key];
    w.creator = creator;
    w.memories.push_back(std::move(memory));
  }

 private:
  struct Waiting {
    ConnectorEnd creator = ConnectorEnd::Sender;
    std::deque<std::shared_ptr<ConnectorMemory>> memories;  // in the creator's attach order
  };
  absl::flat_hash_map<ConnectorKey, Waiting> waiting_;
};

}  // namespace occl::transport
