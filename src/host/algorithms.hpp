// Algorithm selection at registration: which Program runs a registered collective.
#pragma once

#include <cstdint>
#include <string>

#include "host/status.hpp"
#include "ir_loader/program.hpp"
#include "occl/occl.h"

namespace occl::host {

struct AlgorithmChoice {
  ir::Program program;
  int nBlocks;  // daemon blocks the collective uses
};

// Validates the description against the communicator (rank count, root/peer range, types,
// ops) and returns the program to run. Errors name the offending field.
Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& desc, int rank, int nRanks, int daemonBlocks);

// The registration signature both ends of every connector must agree on. Fields the collective
// ignores are left out, and both ends of a Send/Recv hash the same (sender, receiver) pair.
uint64_t registrationSignature(const occlCollDesc_t& desc, int rank, int nRanks, const std::string& programName,
                               int nBlocks, uint32_t slots, uint64_t slotBytes);

const char* collTypeName(int type);

// AllReduce, ReduceScatter and Reduce: the collectives whose desc.op means something.
bool collectiveReduces(int type);

}  // namespace occl::host
