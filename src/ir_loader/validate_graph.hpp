// Internal to src/ir_loader: the cross-rank half of validateProgram().
#pragma once

#include <optional>

#include "ir_loader/capacity.hpp"
#include "ir_loader/program.hpp"
#include "ir_loader/program_queries.hpp"

namespace occl::ir {

// Needs a program that passed the per-rank checks (peers, channels and dependency indices in
// range or -1). Checks (a) one threadblock per (rank, peer, channel, direction), (b) each
// connection's sends match its receives one to one with equal cnt, (c) dependencies name an
// existing hasdep=1 step and every hasdep=1 step is waited on, (d) the chunk-level wait graph of
// one tile with unbounded connectors (capacity.hpp) is small enough to search and has no cycle.
// Returns that graph when every check passed.
std::optional<ChunkWaitGraph> checkCrossRank(const Program& p, ErrorList& errors);

// All of validateProgram()'s checks; the wait graph when they pass (defined in validate.cpp).
std::optional<ChunkWaitGraph> validatedWaitGraph(const Program& p, ErrorList& errors);

}  // namespace occl::ir
