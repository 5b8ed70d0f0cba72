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
  // A variable count's small-message form (kFormSmall, CollDesc::smallCount): the built-in program
  // its submissions of at most smallCount run, or null (smallCount 0). See chooseSmallForm.
  std::shared_ptr<const ir::Program> small;
  uint64_t smallFingerprint = 0;
  uint64_t smallCount = 0;
};

// Whether a large AllReduce may use the peers' buffers where they are (the "peer" program,
// primitives/peer_read.hpp): ranks that share an address space (comm.cpp), or processes of one
// host on occlMemAlloc buffers (desc.sharedBuffers). Both switch from direct at the same size.
enum class PeerAccess : uint8_t { None, InProcess, Processes };

// How many parts (program blocks; NCCL's channels) the built-in program of a registration that
// names no desc.nBlocks gets. A send/recv fills one link: 1. Otherwise, on the host backend, one
// per daemon block (a part is a thread of the rank's CPUs); on kernel backends, by size: a part
// per eighth of a connector slot of the collective's largest buffer, rounded down to a power of
// two, 1..kMaxPartsBySize, and at most one per daemon block. With the GPU's 1 MiB slots and 16
// blocks that is 1 part below 256 KiB and 16 from 2 MiB: one daemon block copies ~30 GB/s
// (bench/results/gpu-*.md), so a collective of a few MiB needs many at once, and one below
// ~100 KiB is over before a second block would matter. Not more parts than blocks: a block can
// run several (daemonParts()), but each is a task of the queue, whose position sets its spin
// threshold, so 16 parts on one block would push the collectives behind them to the floor of
// stickiness (on simt, the paper's 8-rank workload took 4x as long). Ranks whose daemons have
// different block counts thus split a large collective differently, and its registration fails
// as a mismatch on every rank: a GPU's auto count is the same for every rank of a process unless
// more than eight share the device (backend/residency.hpp).
inline constexpr int kMaxPartsBySize = 16;
inline constexpr uint64_t kSlotShareOfAPart = 8;
struct PartsRule {
  int daemonBlocks;     // the communicator's, resolved (Backend::daemonBlocks)
  bool bySize;          // Backend::daemonIsKernel
  uint64_t slotBytes;   // config.connectorSlotBytes, resolved
};
int partsFor(const occlCollDesc_t& desc, int nRanks, const PartsRule& rule);

// The small-message form of a variable count (issue 45; docs/design.md, "The small-message
// form"). A collective registered for a maximum count runs the maximum's program, chosen for its
// size: on a kernel backend its parts by size (16 for a few MiB, where 8 bytes need 1), on the
// host the peer AllReduce where a small count goes direct. Its small submissions then pay for the
// maximum. So a built-in registration with desc.variableCount gets a second program for counts up
// to a bound: the one a registration of the bound's count would run, where that is another program
// and every connector of its part b is one of the maximum's part b (the same FIFO, taken in the
// part's submission order, so a rank on one side of the bound and a peer on the other with
// another count still meet at a stamped message, and fail as every count mismatch does). The
// bounds tried, largest first: a kernel backend's largest count of one part (partsFor), whose ring
// or chain is the maximum's channel 0 (the ring of one part where the rules would go direct
// there); and the direct AllReduce's (directAllReduce), whose connectors to and from every peer
// are the peer program's. None fits: no small form. `large` is the maximum's built-in program,
// already in `choice`.
void chooseSmallForm(const occlCollDesc_t& desc, int nRanks, const PartsRule& parts, PeerAccess peer,
                     const ir::Program& large, AlgorithmLibrary& library, int rank, AlgorithmChoice& choice);

// Whether every connector of `small`'s part b, on every rank, is one of `large`'s part b's: the
// same peer and end on the same channel. False where a rank has more parts in `small`.
bool connectorsWithin(const ir::Program& small, const ir::Program& large);

// Validates the description against the communicator (rank count, root/peer range, types, ops,
// the algorithm it names) and chooses the programs. Errors name the offending field.
Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& desc, int rank, int nRanks, const PartsRule& parts,
                                        PeerAccess peer, AlgorithmLibrary& library);

// The name of the built-in program a registration of `desc` that names no algorithm runs:
// collInfo(type).builtIn, except "direct" for an AllReduce small enough on one part and "peer"
// for a larger one where `peer` allows (algorithms.cpp).
const char* builtInAlgorithm(const occlCollDesc_t& desc, int nRanks, const PartsRule& parts, PeerAccess peer);

// The registration signature both ends of every connector must agree on. Fields the collective
// ignores are left out, and both ends of a Send/Recv hash the same (sender, receiver) pair; the
// programs enter by fingerprint, so ranks that loaded different files under one name disagree.
uint64_t registrationSignature(const occlCollDesc_t& desc, int rank, int nRanks, const AlgorithmChoice& choice,
                               uint32_t slots, uint64_t slotBytes);

}  // namespace occl::host
