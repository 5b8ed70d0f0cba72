// Static checks of a Program, whether parsed from MSCCL-IR or generated: limits, buffer bounds,
// peers, send/receive matching across ranks, dependencies, and deadlock freedom of one tile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ir_loader/program.hpp"
#include "ir_loader/program_queries.hpp"

namespace occl::ir {

// Every check: limits, per-step bounds and peers, then (only if those pass) connection matching,
// dependencies and acyclicity of one tile's waits with unbounded connectors. Empty result = the
// program is safe to run on connectors of at least minConnectorSlots(p) slots.
std::vector<LoadError> validateProgram(const Program& p);

// The fewest connector slots (occlConfig_t::connectorSlots) with which one tile of `p` cannot
// deadlock. A connector holds that many chunk-tiles, so the k-th chunk a tile sends on a
// connection waits until its receiver has consumed chunk k - slots; sends that run ahead of the
// matching receives (all-pairs exchanges) or fused steps that hold a received chunk while they
// wait for room (rings) need more than one. 0 exactly when validateProgram(p) reports a problem.
int32_t minConnectorSlots(const Program& p);

// Sets Step::postOp on the steps whose reduction completes a value (all ranks' inputs summed):
// where avg divides. Needs a program that passes validateProgram(); the MSCCL-IR loader calls it,
// generators set postOp themselves. Returns false (marking nothing) for an invalid program or one
// too large to replay.
bool markPostOps(Program& p);

// The root a rooted program was written for: the one rank that writes its output buffer
// (Reduce) or the one rank that receives nothing (Broadcast). nullopt for other collectives, or
// when no single rank is (MSCCL-IR carries no root, so this is how a registration's root is
// checked against the program's).
std::optional<int32_t> programRoot(const Program& p);

// Human-readable overview: ranks, threadblocks per rank, steps, connector slots needed
// (Program::minConnectorSlots), connections (peer, channel, dir).
std::string summarize(const Program& p);

}  // namespace occl::ir
