// CPU affinity masks: the CPUs a thread may run on, and how many CPUs several ranks' masks cover
// together (host/comm.cpp decides from it whether a wait may spin on its core).
#pragma once

#include <sched.h>

#include <span>
#include <thread>

namespace occl {

// This thread's affinity mask; every CPU the machine reports where it cannot be read.
inline cpu_set_t threadCpus() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0) return cpus;
  const unsigned n = std::thread::hardware_concurrency();
  for (unsigned c = 0; c < n && c < CPU_SETSIZE; ++c) CPU_SET(c, &cpus);
  return cpus;
}

// How many distinct CPUs the masks cover together.
inline int cpusCovered(std::span<const cpu_set_t> masks) {
  cpu_set_t all;
  CPU_ZERO(&all);
  for (const cpu_set_t& m : masks) CPU_OR(&all, &all, &m);
  return CPU_COUNT(&all);
}

}  // namespace occl
