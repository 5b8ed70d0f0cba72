// Host threads sleeping on a FIFO word until its peer publishes (queues/fifo.hpp says who wakes
// them). A daemon block of the host backend parks here once a wait has spun a while, instead of
// yielding its core round after round: with more busy threads than cores (several ranks, their
// proxies and the kernel's network work on two cores), yielding waiters take the time the thread
// they wait for needs. Device code never parks (SpinBudget::parkAfter is 0 there).
#pragma once

#include <cstdint>

#include "queues/fifo.hpp"

namespace occl {

#if !OCCL_ON_DEVICE
// Sleeps until the word is no longer `seen`, the connector is poisoned, a wake, or `maxNs`;
// returns at once when either happened already. The caller re-checks what it waits for (spurious
// returns are allowed).
void fifoPark(FifoHeader* h, FifoWord which, uint64_t seen, uint64_t maxNs);

// How many times the calling thread has slept in fifoPark: a host daemon pass that slept on a
// FIFO has waited already, and its block goes straight on to the next pass.
uint64_t fifoParksOnThisThread();

// The receiver parks until the sender has published `need` slots past the receiver's head (or
// poisons the connector); a peer program waits for its second notice this way.
inline void parkUntilRecv(const FifoHandle& f, uint64_t maxNs, uint64_t need = 1) {
  const uint64_t tail = atomics::loadAcquire(&f.header->tail);
  if (tail - atomics::loadRelaxed(&f.header->head) >= need) return;
  fifoPark(f.header, FifoWord::Tail, tail, maxNs);
}
// The sender parks until the receiver frees a slot (or poisons the connector).
inline void parkUntilSend(const FifoHandle& f, uint64_t maxNs) {
  const uint64_t head = atomics::loadAcquire(&f.header->head);
  if (atomics::loadRelaxed(&f.header->tail) - head < f.nSlots) return;
  fifoPark(f.header, FifoWord::Head, head, maxNs);
}
#endif

}  // namespace occl
