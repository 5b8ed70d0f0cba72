// Bus crossings, counted on the simt backend. The CUDA backend keeps in pinned host memory mapped
// into the GPU what the host and the daemon share (backend allocShared: the SQ, the CQ rings, the
// block reports, the SQE count and abort flag; and the launch's ended word). On a GPU each access
// a daemon thread makes to it is a PCIe transaction, ~1.5 us on an H200, which is most of a small
// collective's time. The simt backend registers that memory here (addHostMapped) and, while
// counting is on, counts every lane's access to it: the loads,
// stores and read-modify-writes of atomics::. Device memory, connectors and user buffers (device
// memory on a GPU within a process) are not counted.
//
// A poll of the SQ (the read of a whole SQE line, atomics::pollLine) is counted apart: an idle
// daemon polls as often as it idles, so the number says nothing of a collective's cost; the poll
// that finds an entry is one read per submission and block. So is a wait's look for new
// submissions (the SQ's published count, read by a wait that is not ready: executor.hpp), which a
// wait makes only once it has spun a while on the kernel backends, and which costs no time on a
// GPU that has nothing to do but wait.
//
// Counting is off by default and process-wide: ranks that share a process (threads) share the
// counts. A lane decides whether it counts when it starts (simt_block.cpp), so turn counting on
// before the launch to be counted: before a communicator's first submission. occl-bench turns it
// on with --backend simt; tests/simt/simt_crossings_test pins the counts.
//
// Host code only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "device/compat.hpp"

namespace occl::exec::simt {

// Registers (and forgets) host memory that a GPU would reach across the bus: the simt backend's
// allocShared, which allocates as the host backend does (backend/host_memory.hpp).
void addHostMapped(const void* p, size_t bytes);
void removeHostMapped(const void* p);
bool isHostMapped(const void* p);

struct Crossings {
  uint64_t reads = 0;   // loads, the SQ polls that found an entry not among them
  uint64_t writes = 0;  // stores
  uint64_t rmws = 0;    // read-modify-writes (none may target host-mapped memory: checkAtomicTarget)
  uint64_t sqPolls = 0; // reads of an SQE line, whether or not they found an entry
  uint64_t waitLooks = 0;  // reads of the SQ's published count by waits that were not ready
};

void countCrossings(bool on);
bool countingCrossings();
// Every lane's crossings since counting began (process-wide).
Crossings crossings();

}  // namespace occl::exec::simt
