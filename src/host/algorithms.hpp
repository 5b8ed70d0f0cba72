// Algorithm selection at registration: which Program runs a registered collective.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "host/algorithm_library.hpp"
#include "ir_loader/program.hpp"
#include "occl/occl.h"
#include "util/status.hpp"

namespace occl::host {

// Which program a submission runs, by placement: forms[kFormOutOfPlace] and forms[kFormInPlace]
// (device/coll_desc.hpp). The requested MSCCL-IR program where MSCCL would run it, else the
// built-in algorithm; the same pointer twice when one program serves both placements. With
// each, its fingerprint.
struct AlgorithmChoice {
  std::array<std::shared_ptr<const ir::Program>, 2> forms;
  std::array<uint64_t, 2> fingerprints;
};

// Whether a large AllReduce may use the peers' buffers where they are (the "peer" program,
// primitives/peer_read.hpp): ranks that share an address space (comm.cpp), or processes of one
// host on occlMemAlloc buffers (desc.sharedBuffers). Both switch from direct at the same size.
enum class PeerAccess : uint8_t { None, InProcess, Processes };

// Validates the description against the communicator (rank count, root/peer range, types, ops,
// the algorithm it names) and chooses the programs. Errors name the offending field.
Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& desc, int rank, int nRanks, int daemonBlocks,
                                        PeerAccess peer, AlgorithmLibrary& library);

// The name of the built-in program a registration of `desc` that names no algorithm runs:
// collInfo(type).builtIn, except "direct" for an AllReduce small enough on one block and "peer"
// for a larger one where `peer` allows (algorithms.cpp).
const char* builtInAlgorithm(const occlCollDesc_t& desc, int nRanks, int daemonBlocks, PeerAccess peer);

// The registration signature both ends of every connector must agree on. Fields the collective
// ignores are left out, and both ends of a Send/Recv hash the same (sender, receiver) pair; the
// programs enter by fingerprint, so ranks that loaded different files under one name disagree.
uint64_t registrationSignature(const occlCollDesc_t& desc, int rank, int nRanks, const AlgorithmChoice& choice,
                               uint32_t slots, uint64_t slotBytes);

}  // namespace occl::host
