// occl-torture's options and its runner (tools/occl_torture_run.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "torture/torture.hpp"

namespace occl::tools {

struct TortureOptions {
  int ranks = 8;
  int colls = 8;
  size_t minBytes = 256;
  size_t maxBytes = 1 << 20;
  int iters = 20;
  int blocks = 1;
  torture::Order order = torture::Order::Shuffled;
  int policy = occlOrderAgreed;
  int spin = occlSpinPolicyStickiness;
  bool forcePreempt = false;
  bool noPreempt = false;
  bool switchCost = true;
  int64_t timeoutMs = 20000;
  uint64_t seed = 1;
  int lagUs = 0;
  bool gates = false;  // gated submission: inputs written and gates opened later, in another order
  // One rank per process, from the launcher's environment (mpirun, torchrun): --mpi, or implied
  // by OMPI_COMM_WORLD_SIZE / WORLD_SIZE. `ranks` is then the job's size.
  bool processes = false;
};

// Runs the workload, prints the report; returns the exit status (see occl_torture.cpp).
int runTorture(const TortureOptions& o);

// The daemon's own cost of one context switch (tools/occl_torture_switch.cpp).
struct SwitchCost {
  double noSaveNs = 0;    // load, run to an unready wait, preempt; nothing moved, so no save
  double withSaveNs = 0;  // the same after receiving one 64-byte tile, so the context is saved
  uint64_t savesSeen = 0;
};
SwitchCost measureSwitchCost(int tries);

}  // namespace occl::tools
