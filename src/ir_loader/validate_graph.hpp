// Internal to src/ir_loader: the cross-rank half of validateProgram().
#pragma once

#include "ir_loader/program.hpp"
#include "ir_loader/validate.hpp"

namespace occl::ir {

// Needs a program that passed the per-rank checks (peers, channels and dependency indices in
// range or -1). Checks (a) one threadblock per (rank, peer, channel, direction), (b) each
// connection's sends match its receives one to one with equal cnt, (c) dependencies name an
// existing hasdep=1 step and every hasdep=1 step is waited on, (d) the wait graph of one tile
// (program order, dependencies, send -> matching receive) has no cycle.
void checkCrossRank(const Program& p, ErrorList& errors);

}  // namespace occl::ir
