// Communicators made from a communicator (comm_split.cpp): occlCommSplit and occlCommShrink.
// api.cpp checks the handles and wraps what these return.
#pragma once

#include <memory>
#include <string>

#include "host/comm.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// occlCommSplit: every rank of `parent` calls it (the ranks of occlCommInitAll each from its own
// thread). Ranks of one `color` form a child, ranked by `key` and then by their rank in the
// parent; OCCL_SPLIT_NOCOLOR takes part and gets nullptr. `config` NULL inherits the parent's
// (as it asked, before occl resolved its automatic fields). The child runs where its parent
// does (same backend, same device) and meets through the parent: no new rendezvous. A bad
// argument on any rank fails the call on every rank, naming the rank.
Result<std::unique_ptr<Comm>> split(Comm& parent, int color, int key, const occlConfig_t* config);

// occlCommShrink: every rank of `parent` not in excludeRanks calls it. Processes meet at the
// lowest survivor's spare rendezvous, made when `parent` was, so neither the parent's bootstrap
// nor its root is needed (either may be dead or hung), and check that they all excluded the same
// ranks; threads meet as a subgroup of the parent's thread group and split it. OCCL_SHRINK_DEFAULT refuses a parent with pending submissions;
// OCCL_SHRINK_ABORT revokes the parent first. The child registers again, under the same collIds,
// the parent's collectives that carriedByShrink.
Result<std::unique_ptr<Comm>> shrink(Comm& parent, const int* excludeRanks, int excludeCount,
                                     const occlConfig_t* config, int flags);

// What a shrunk communicator keeps: AllReduce of any count, type, op, priority and block count,
// on the automatic choice or "ring". Every other kind names ranks or scales with their number
// (AllGather, ReduceScatter, AllToAll buffers; Broadcast, Reduce, SendRecv roots and peers;
// MSCCL-IR programs, written for one rank count), so it must be registered again.
bool carriedByShrink(const occlCollDesc_t& desc, const std::string& algorithm);

}  // namespace occl::host
