// One bootstrap connection (bootstrap.hpp): the root has one per other rank, a leaf one to the
// root. Private to the bootstrap's sources (bootstrap*.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>

#include "bootstrap/socket.hpp"

namespace occl::bootstrap {

struct Link {
  int peer = -1;
  Socket socket;
  std::string name;         // "rank 2 (10.0.0.2:41234)", for messages
  std::mutex sendMu;        // frames must not interleave: user thread and monitor both send
  FrameReader reader;       // monitor thread only
  bool polled = true;       // monitor thread only
  std::deque<Frame> inbox;  // guarded by Bootstrap::mu_
  bool closed = false;      // guarded by mu_: EOF or error seen
  bool saidGoodbye = false; // guarded by mu_

  Status send(uint32_t type, uint32_t seq, const void* data, size_t bytes, Deadline deadline) {
    std::lock_guard lk(sendMu);
    return sendFrame(socket, type, seq, data, bytes, deadline).withContext("sending to " + name);
  }
};

}  // namespace occl::bootstrap
