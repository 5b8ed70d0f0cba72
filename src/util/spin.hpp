// The CPU's spin-wait hint (x86 `pause`, Arm `yield`): tells the core that this thread is busy
// waiting, so that a hyper-threaded sibling gets the pipeline and the loop exits without a
// memory-order mis-speculation. Costs no system call; a loop of it holds the core, so every
// user bounds it (a daemon wait spins so only where this host's ranks have a core each, and only
// for SpinBudget::spinInPlaceNs: host/comm.cpp).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace occl {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace occl
