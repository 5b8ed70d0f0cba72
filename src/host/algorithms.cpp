#include "host/algorithms.hpp"

#include <algorithm>
#include <functional>
#include <vector>
#include <optional>
#include <string_view>

#include "absl/strings/str_format.h"
#include "device/coll_desc.hpp"
#include "device/coll_types.hpp"
#include "host/vec_layout.hpp"
#include "ir_loader/fingerprint.hpp"
#include "primitives/dispatch.hpp"
#include "util/fnv1a.hpp"
#include "ir_loader/program_queries.hpp"
#include "ir_loader/ring.hpp"
#include "ir_loader/validate.hpp"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"

namespace occl::host {
namespace {

Status invalid(const std::string& message) { return Status::error(occlInvalidArgument, message); }

bool rooted(int type) { return collInfo(type).rooted; }
bool pointToPoint(int type) { return collInfo(type).pointToPoint; }
bool collectiveReduces(int type) { return collInfo(type).reduces; }

// Both ends of a Send/Recv name the same pair: the sender passes the receiver as root, and the
// receiver passes the sender.
struct Endpoints {
  int sender;
  int receiver;
};
Endpoints endpoints(const occlCollDesc_t& d, int rank) {
  return d.type == occlCollSend ? Endpoints{rank, d.root} : Endpoints{d.root, rank};
}

// The op matters only to reducing collectives; the others ignore it, as NCCL's API does.
Status validateCommon(const occlCollDesc_t& d) {
  if (d.type < 0 || d.type >= occlNumCollTypes)
    return invalid(absl::StrFormat("desc.type = %d: expected an occlCollType_t (0..%d)", d.type, occlNumCollTypes - 1));
  if (d.datatype < 0 || d.datatype >= occlNumTypes)
    return invalid(absl::StrFormat("desc.datatype = %d: expected an occlDataType_t (0..%d)", d.datatype, occlNumTypes - 1));
  // ops::kOpPreMulSum comes from a PreMulSum handle the communicator resolved (host/premul_ops.hpp).
  if (collectiveReduces(d.type) && (d.op < 0 || d.op >= ops::kNumOpKinds))
    return invalid(absl::StrFormat("desc.op = %d: expected an occlRedOp_t (0..%d) for %s", d.op, occlNumOps - 1,
                                   collTypeName(d.type)));
  // Copies dispatch with Sum (Collective::build), so a non-reducing collective needs its type with Sum.
  if (const int op = collectiveReduces(d.type) ? d.op : occlSum; !dispatchCompiled(d.datatype, op))
    return invalid(absl::StrFormat("desc.datatype = %s with op %s: this build of occl runs only some types and ops "
                                   "(CMake OCCL_ONLY_DTYPE_MASK = 0x%x, OCCL_ONLY_OP_MASK = 0x%x); build it "
                                   "without them for the rest",
                                   dtypeName(d.datatype), ops::opName(op), kDispatchDtypeMask, kDispatchOpMask));
  if (d.nBlocks < 0) return invalid(absl::StrFormat("desc.nBlocks = %d: expected >= 0 (0 = default)", d.nBlocks));
  if (d.sharedBuffers != 0 && d.sharedBuffers != 1)
    return invalid(absl::StrFormat("desc.sharedBuffers = %d: expected 0 or 1", d.sharedBuffers));
  if (d.variableCount != 0 && d.variableCount != 1)
    return invalid(absl::StrFormat("desc.variableCount = %d: expected 0 or 1", d.variableCount));
  if (std::string why = vectorCountsRefusal(d); !why.empty()) return invalid(why);
  return Status::success();
}

Status validateRoot(const occlCollDesc_t& d, int rank, int nRanks) {
  if (!rooted(d.type) && !pointToPoint(d.type)) return Status::success();
  const char* role = rooted(d.type) ? "the root rank" : d.type == occlCollSend ? "the receiving peer" : "the sending peer";
  if (d.root < 0 || d.root >= nRanks)
    return invalid(absl::StrFormat("desc.root = %d: expected %s of %s in 0..%d (nranks = %d)", d.root, role,
                                   collTypeName(d.type), nRanks - 1, nRanks));
  if (pointToPoint(d.type) && d.root == rank)
    return invalid(absl::StrFormat("desc.root = %d is this rank: send/recv needs a peer", d.root));
  return Status::success();
}


// A small AllReduce goes direct (ring.hpp: one round of sends instead of 2(n-1) hops in
// sequence), unless the caller named the ring or the collective runs in several parts (partsFor:
// the ring then uses them all). Direct moves n-1 times the count each way
// per rank, so the bound is on that: (n-1) x bytes up to 192 KiB (64 KiB on 4 ranks, 27 KiB on 8),
// where it stops winning against the ring on the 2-core development VM, also in the sweep
// with 3 warm-up iterations now that registration maps the slots in (ConnectorMemory::populate;
// before, direct's first rounds through 3x as many slots lost from 8 KiB on 4 ranks). Measured in
// bench/results/host-2026-11-26b.md. Where the peer program can run instead, direct stops at
// 32 KiB (10.7 KiB on 4 ranks, 4.6 KiB on 8): at 16 KiB on 4 thread-ranks peer takes 24-26 us against
// direct's 23-30, at 64 KiB 23-42 against 56-97; on 8, 16 KiB 77-87 against 95-115 and 4 KiB
// 70-80 against 48-61 (host-2026-11-26c.md). The rank bound keeps its n-1 connectors each way few.
// Ranks in different processes (PeerAccess::Processes) take the same bound: on 4 processes of a
// 2-core Xeon VM, -w 20 -n 300, out of place / in place, peer against direct at 16 KiB 14-23/13-16
// us against 25-33/22-32, 64 KiB 19-22/19-36 against 70-79/68-73, and against the ring at 256 KiB
// 47-50/52-65 against 125-142/113-165. (On the earlier shadow-paging VM peer lost below 512 KiB
// between processes, when each notice still cost two getpid system calls, fixed in 0c6a613.)
constexpr uint64_t kDirectAllReduceMaxPeerBytes = 192 << 10;
constexpr uint64_t kDirectBeforePeerMaxPeerBytes = 32 << 10;
constexpr int kDirectAllReduceMaxRanks = 8;

bool directAllReduce(const occlCollDesc_t& d, int nRanks, int nBlocks, bool ringNamed, PeerAccess peer) {
  if (d.type != occlCollAllReduce || ringNamed || nRanks < 2 || nRanks > kDirectAllReduceMaxRanks || nBlocks != 1)
    return false;
  const uint64_t bytes = static_cast<uint64_t>(d.count) * dtypeSize(d.datatype);
  return bytes * static_cast<uint64_t>(nRanks - 1) <=
         (peer == PeerAccess::None ? kDirectAllReduceMaxPeerBytes : kDirectBeforePeerMaxPeerBytes);
}

// Above the direct bound, ranks that can reach each other's buffers (one address space, or
// occlMemAlloc buffers between processes) use them instead of passing tiles around the ring
// (primitives/peer_read.hpp; bench/results/host-2026-11-26c.md). Each rank holds a connector to
// and from every peer, as direct does, hence the rank bound.
constexpr int kPeerAllReduceMaxRanks = 16;

// Not for PreMulSum: the fold reads the other ranks' inputs, and their scalars are theirs alone.
bool peerAllReduce(const occlCollDesc_t& d, int nRanks, int nBlocks, bool ringNamed, PeerAccess peer) {
  return peer != PeerAccess::None && d.type == occlCollAllReduce && d.op != ops::kOpPreMulSum && !ringNamed && nRanks >= 2 &&
         nRanks <= kPeerAllReduceMaxRanks && nBlocks == 1 && !directAllReduce(d, nRanks, nBlocks, ringNamed, peer);
}

// An AllToAll whose ranks reach each other's buffers (threads, or processes on occlMemAlloc
// buffers) takes each peer's chunk straight from the peer's input (makePeerAllToAll): one copy
// per byte instead of two through a slot. One block. Up to 16 KiB a peer (the registered count:
// a v-collective's largest block) the direct AllToAll's eager sends win: each rank's chunks are
// in its peers' slots after its own turn, where the peer program's second notice ("done with
// yours") costs every rank another turn a submission. 8 ranks on 2 cores (occl-moe-bench,
// bench/results/moe-2026-12-01b.md), direct against peer at 8 / 16 / 32 KiB a peer: thread ranks
// 33-36 / 31-37 / 56-80 us against 42-45 / 42-48 / 42-45; processes 35-37 at 8 KiB against 49-52,
// 52-53 at 32 KiB against 59-64, even at 64 KiB.
constexpr uint64_t kDirectBeforePeerAllToAllMaxBytes = 16 << 10;

bool peerAllToAll(const occlCollDesc_t& d, int nRanks, int nBlocks, bool ringNamed, PeerAccess peer) {
  return peer != PeerAccess::None && d.type == occlCollAllToAll && !ringNamed && nRanks >= 2 && nBlocks == 1 &&
         static_cast<uint64_t>(d.count) * dtypeSize(d.datatype) > kDirectBeforePeerAllToAllMaxBytes;
}

// The built-in generators. A program is made from its BuiltInKey alone,
// {generator, nRanks, nBlocks, root or sender, receiver}, so the library's copy of a key's
// program is the one generate() would make.
enum Generator : int32_t { kDirect, kPeer, kRingAllReduce, kRingAllGather, kRingReduceScatter, kChainReduce,
                           kChainBroadcast, kAllToAll, kSendRecv, kGather, kScatter, kPeerAllToAll };

BuiltInKey builtInKey(const occlCollDesc_t& d, int rank, int nRanks, int nBlocks, bool ringNamed, PeerAccess peer) {
  auto key = [&](Generator g, int32_t a = 0, int32_t b = 0) { return BuiltInKey{g, nRanks, nBlocks, a, b}; };
  if (directAllReduce(d, nRanks, nBlocks, ringNamed, peer)) return key(kDirect);
  if (peerAllReduce(d, nRanks, nBlocks, ringNamed, peer)) return key(kPeer);
  if (peerAllToAll(d, nRanks, nBlocks, ringNamed, peer)) return key(kPeerAllToAll);
  switch (d.type) {
    case occlCollAllReduce: return key(kRingAllReduce);
    case occlCollAllGather: return key(kRingAllGather);
    case occlCollReduceScatter: return key(kRingReduceScatter);
    case occlCollReduce: return key(kChainReduce, d.root);
    case occlCollBroadcast: return key(kChainBroadcast, d.root);
    case occlCollAllToAll: return key(kAllToAll);
    case occlCollGather: return key(kGather, d.root);
    case occlCollScatter: return key(kScatter, d.root);
    default: {
      const Endpoints e = endpoints(d, rank);
      return key(kSendRecv, e.sender, e.receiver);
    }
  }
}

ir::Program generate(const BuiltInKey& key) {
  const auto [generator, nRanks, nBlocks, a, b] = key;
  switch (generator) {
    case kDirect: return ir::makeDirectAllReduce(nRanks);
    case kPeer: return ir::makePeerAllReduce(nRanks);
    case kRingAllReduce: return ir::makeRingAllReduce(nRanks, nBlocks);
    case kRingAllGather: return ir::makeRingAllGather(nRanks, nBlocks);
    case kRingReduceScatter: return ir::makeRingReduceScatter(nRanks, nBlocks);
    case kChainReduce: return ir::makeChainReduce(nRanks, nBlocks, a);
    case kChainBroadcast: return ir::makeChainBroadcast(nRanks, nBlocks, a);
    case kAllToAll: return ir::makeAllToAll(nRanks, nBlocks);
    case kGather: return ir::makeGather(nRanks, a);
    case kScatter: return ir::makeScatter(nRanks, a);
    case kPeerAllToAll: return ir::makePeerAllToAll(nRanks);
    default: return ir::makeSendRecv(nRanks, nBlocks, a, b);
  }
}

// The MSCCL-IR collective of a type, if MSCCL-IR has one (program.hpp pins CollKind's values).
std::optional<ir::CollKind> irKindOf(int type) {
  if (collInfo(type).irName == nullptr) return std::nullopt;
  return static_cast<ir::CollKind>(type);
}

// What the caller named must be able to run this collective at all: a wrong collective, rank
// count or block count is an error, not a silent fallback.
// Its threadblocks need not fit the daemon's blocks: a daemon block runs several (daemonParts()).
Status checkNamedProgram(const ir::Program& p, const occlCollDesc_t& d, int nRanks) {
  const std::string what = absl::StrFormat("desc.algorithm = \"%s\" (program %s)", d.algorithm, p.name);
  const std::optional<ir::CollKind> kind = irKindOf(d.type);
  if (!kind) return invalid(absl::StrFormat("%s: MSCCL-IR programs run collectives, not %s", what, collTypeName(d.type)));
  if (p.coll != *kind)
    return invalid(absl::StrFormat("%s is a %s program; desc.type is %s", what, ir::collName(p.coll), collTypeName(d.type)));
  if (p.nRanks != nRanks)
    return invalid(absl::StrFormat("%s is written for %d ranks; the communicator has %d", what, p.nRanks, nRanks));
  if (rooted(d.type)) {
    const std::optional<int32_t> root = ir::programRoot(p);
    if (!root)
      return invalid(absl::StrFormat("%s: no single rank is its root (for %s, the one rank that %s)", what,
                                     collTypeName(d.type),
                                     d.type == occlCollReduce ? "writes its output" : "receives nothing"));
    if (*root != d.root)
      return invalid(absl::StrFormat("%s is written for root %d; desc.root = %d", what, *root, d.root));
  }
  return Status::success();
}

// MSCCL's size rule: a positive count whose bytes (count x datatype size x the collective's
// multiplier) lie in [minBytes, maxBytes], split into whole chunks.
bool sizeFits(const ir::Program& p, const occlCollDesc_t& d, int nRanks) {
  const uint64_t elems = static_cast<uint64_t>(d.count) * ir::chunkMultiplier(p.coll, nRanks);
  const uint64_t bytes = elems * dtypeSize(d.datatype);
  return d.count > 0 && elems % static_cast<uint64_t>(p.nChunksPerLoop) == 0 && bytes >= p.minBytes &&
         bytes <= p.maxBytes;
}

int floorPowerOfTwo(uint64_t v) {
  int p = 1;
  while (static_cast<uint64_t>(p) * 2 <= v) p *= 2;
  return p;
}

}  // namespace

int partsFor(const occlCollDesc_t& d, int nRanks, const PartsRule& rule) {
  if (d.nBlocks > 0) return d.nBlocks;
  if (pointToPoint(d.type)) return 1;
  if (!rule.bySize) return rule.daemonBlocks;
  const uint64_t bytes = static_cast<uint64_t>(d.count) * chunkMultiplier(d.type, nRanks) * dtypeSize(d.datatype);
  const uint64_t partBytes = std::max<uint64_t>(rule.slotBytes / kSlotShareOfAPart, 1);
  const int bySize = floorPowerOfTwo(std::clamp<uint64_t>(bytes / partBytes, 1, kMaxPartsBySize));
  return std::min(bySize, std::max(rule.daemonBlocks, 1));
}

Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& d, int rank, int nRanks, const PartsRule& parts,
                                        PeerAccess peer, AlgorithmLibrary& library) {
  if (Status s = validateCommon(d); !s.ok()) return s;
  if (Status s = validateRoot(d, rank, nRanks); !s.ok()) return s;
  const int nBlocks = partsFor(d, nRanks, parts);
  if (d.nBlocks > parts.daemonBlocks)
    return invalid(absl::StrFormat("desc.nBlocks = %d exceeds config.daemonBlocks = %d", d.nBlocks, parts.daemonBlocks));
  const bool ringNamed = d.algorithm != nullptr && std::string_view(d.algorithm) == "ring";
  const BuiltInKey key = builtInKey(d, rank, nRanks, nBlocks, ringNamed, peer);
  const KnownProgram builtIn = library.builtIn(key, [&] { return generate(key); });
  if (d.algorithm == nullptr || ringNamed) {
    AlgorithmChoice choice;
    choice.forms = {builtIn.program, builtIn.program};
    choice.fingerprints = {builtIn.fingerprint, builtIn.fingerprint};
    chooseSmallForm(d, nRanks, parts, peer, *builtIn.program, library, rank, choice);
    return choice;
  }

  Result<KnownProgram> named = library.find(d.algorithm);
  if (!named.ok()) return named.status();
  const ir::Program& p = *named.value().program;
  if (Status s = checkNamedProgram(p, d, nRanks); !s.ok()) return s;
  const bool fits = sizeFits(p, d, nRanks);
  AlgorithmChoice choice;
  for (uint32_t f : {kFormOutOfPlace, kFormInPlace}) {
    const KnownProgram& form = fits && (f == kFormInPlace ? p.inPlace : p.outOfPlace) ? named.value() : builtIn;
    choice.forms[f] = form.program;
    choice.fingerprints[f] = form.fingerprint;
  }
  return choice;
}

bool connectorsWithin(const ir::Program& small, const ir::Program& large) {
  if (small.nRanks != large.nRanks) return false;
  for (int r = 0; r < small.nRanks; ++r) {
    const auto& mine = small.ranks[static_cast<size_t>(r)].blocks;
    const auto& theirs = large.ranks[static_cast<size_t>(r)].blocks;
    if (mine.size() > theirs.size()) return false;
    for (size_t b = 0; b < mine.size(); ++b) {
      if (mine[b].channel != theirs[b].channel) return false;
      for (bool sending : {true, false}) {
        const std::vector<int32_t> have = ir::connectionPeers(theirs[b], sending);
        for (int32_t peer : ir::connectionPeers(mine[b], sending))
          if (std::find(have.begin(), have.end(), peer) == have.end()) return false;
      }
    }
  }
  return true;
}

void chooseSmallForm(const occlCollDesc_t& d, int nRanks, const PartsRule& parts, PeerAccess peer,
                     const ir::Program& large, AlgorithmLibrary& library, int rank, AlgorithmChoice& choice) {
  if (d.variableCount != 1 || d.vectorCounts == 1 || d.nBlocks > 0 || nRanks < 2) return;
  const bool ringNamed = d.algorithm != nullptr;  // selectAlgorithm calls this for "ring" or none
  std::vector<uint64_t> bounds;
  if (parts.bySize) {  // partsFor: one part below twice a part's share of a slot
    const uint64_t unit = static_cast<uint64_t>(chunkMultiplier(d.type, nRanks)) * dtypeSize(d.datatype);
    const uint64_t partBytes = std::max<uint64_t>(parts.slotBytes / kSlotShareOfAPart, 1);
    bounds.push_back((2 * partBytes - 1) / unit);
  }
  if (d.type == occlCollAllReduce && !ringNamed && nRanks <= kDirectAllReduceMaxRanks) {
    const uint64_t bound = peer == PeerAccess::None ? kDirectAllReduceMaxPeerBytes : kDirectBeforePeerMaxPeerBytes;
    bounds.push_back(bound / static_cast<uint64_t>(nRanks - 1) / dtypeSize(d.datatype));
  }
  std::sort(bounds.begin(), bounds.end(), std::greater<>());
  for (uint64_t count : bounds) {
    if (count == 0 || count >= d.count) continue;
    occlCollDesc_t s = d;
    s.count = count;
    // What a registration of `count` would run; else, where that is the direct AllReduce off the
    // maximum's connectors (a ring of more than two ranks), the ring of its parts.
    for (bool ring : {ringNamed, true}) {
      const BuiltInKey key = builtInKey(s, rank, nRanks, partsFor(s, nRanks, parts), ring, peer);
      const KnownProgram small = library.builtIn(key, [&] { return generate(key); });
      // The same program under another key (a Gather's is one block whatever its parts).
      if (small.fingerprint == choice.fingerprints[kFormOutOfPlace] || !connectorsWithin(*small.program, large)) continue;
      choice.small = small.program;
      choice.smallFingerprint = small.fingerprint;
      choice.smallCount = count;
      return;
    }
  }
}

const char* builtInAlgorithm(const occlCollDesc_t& d, int nRanks, const PartsRule& parts, PeerAccess peer) {
  const int nBlocks = partsFor(d, nRanks, parts);
  if (directAllReduce(d, nRanks, nBlocks, /*ringNamed=*/false, peer)) return "direct";
  if (peerAllReduce(d, nRanks, nBlocks, /*ringNamed=*/false, peer)) return "peer";
  if (peerAllToAll(d, nRanks, nBlocks, /*ringNamed=*/false, peer)) return "peer";
  return collInfo(d.type).builtIn;
}

// Only what changes the data movement is hashed, so ranks that differ in an ignored field (the op
// of an AllGather, the root of an AllReduce) still match; both ends of a Send/Recv hash the same
// (sender, receiver) pair instead of their opposite types.
uint64_t registrationSignature(const occlCollDesc_t& d, int rank, int nRanks, const AlgorithmChoice& choice,
                               uint32_t slots, uint64_t slotBytes) {
  Fnv1a h;
  if (pointToPoint(d.type)) {
    const Endpoints e = endpoints(d, rank);
    h.add(int64_t{occlCollSend}).add(int64_t{e.sender}).add(int64_t{e.receiver});
  } else {
    h.add(int64_t{d.type});
    if (rooted(d.type)) h.add(int64_t{d.root});
  }
  if (collectiveReduces(d.type)) h.add(int64_t{d.op});
  h.add(int64_t{d.sharedBuffers}).add(int64_t{d.variableCount}).add(int64_t{d.vectorCounts});
  h.add(uint64_t{d.count}).add(int64_t{d.datatype}).add(int64_t{nRanks}).add(uint64_t{slots}).add(slotBytes);
  for (uint64_t fingerprint : choice.fingerprints) h.add(fingerprint);
  h.add(choice.smallFingerprint).add(choice.smallCount);
  return h.value() | 1;  // 0 means "not registered yet" in a connector header
}

}  // namespace occl::host
