#include "host/algorithms.hpp"

#include "absl/strings/str_format.h"
#include "ir_loader/ring.hpp"

namespace occl::host {
namespace {

Status invalid(const std::string& message) { return Status::error(occlInvalidArgument, message); }

bool rooted(int type) { return type == occlCollReduce || type == occlCollBroadcast; }
bool pointToPoint(int type) { return type == occlCollSend || type == occlCollRecv; }

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
  if (collectiveReduces(d.type) && (d.op < 0 || d.op >= occlNumOps))
    return invalid(absl::StrFormat("desc.op = %d: expected an occlRedOp_t (0..%d) for %s", d.op, occlNumOps - 1,
                                   collTypeName(d.type)));
  if (d.nBlocks < 0) return invalid(absl::StrFormat("desc.nBlocks = %d: expected >= 0 (0 = default)", d.nBlocks));
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

// A send/recv has one link to fill: one block unless the caller asks for more channels.
int blocksFor(const occlCollDesc_t& d, int daemonBlocks) {
  if (d.nBlocks > 0) return d.nBlocks;
  return pointToPoint(d.type) ? 1 : daemonBlocks;
}

ir::Program generate(const occlCollDesc_t& d, int rank, int nRanks, int nBlocks) {
  switch (d.type) {
    case occlCollAllReduce: return ir::makeRingAllReduce(nRanks, nBlocks);
    case occlCollAllGather: return ir::makeRingAllGather(nRanks, nBlocks);
    case occlCollReduceScatter: return ir::makeRingReduceScatter(nRanks, nBlocks);
    case occlCollReduce: return ir::makeChainReduce(nRanks, nBlocks, d.root);
    case occlCollBroadcast: return ir::makeChainBroadcast(nRanks, nBlocks, d.root);
    case occlCollAllToAll: return ir::makeAllToAll(nRanks, nBlocks);
    default: {
      const Endpoints e = endpoints(d, rank);
      return ir::makeSendRecv(nRanks, nBlocks, e.sender, e.receiver);
    }
  }
}

}  // namespace

bool collectiveReduces(int type) {
  return type == occlCollAllReduce || type == occlCollReduceScatter || type == occlCollReduce;
}

const char* collTypeName(int type) {
  static const char* const kNames[] = {"allreduce", "allgather", "reducescatter", "reduce",
                                       "broadcast", "alltoall",  "send",          "recv"};
  return type >= 0 && type < occlNumCollTypes ? kNames[type] : "unknown";
}

Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& d, int rank, int nRanks, int daemonBlocks) {
  if (Status s = validateCommon(d); !s.ok()) return s;
  if (Status s = validateRoot(d, rank, nRanks); !s.ok()) return s;
  const int nBlocks = blocksFor(d, daemonBlocks);
  if (nBlocks > daemonBlocks)
    return invalid(absl::StrFormat("desc.nBlocks = %d exceeds config.daemonBlocks = %d", nBlocks, daemonBlocks));
  if (d.algorithm != nullptr && std::string(d.algorithm) != "ring")
    return invalid(absl::StrFormat("desc.algorithm = \"%s\": only \"ring\" (or NULL) is available", d.algorithm));
  return AlgorithmChoice{generate(d, rank, nRanks, nBlocks), nBlocks};
}

namespace {
// FNV-1a: the signature must be identical in every process, so no per-process seeded hash.
class Fnv1a {
 public:
  template <typename T>
  Fnv1a& add(const T& value) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (size_t i = 0; i < sizeof(T); ++i) mix(bytes[i]);
    return *this;
  }
  Fnv1a& add(const std::string& text) {
    for (unsigned char c : text) mix(c);
    return add(text.size());
  }
  uint64_t value() const { return h_; }

 private:
  void mix(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
  uint64_t h_ = 14695981039346656037ull;
};
}  // namespace

// Only what changes the data movement is hashed, so ranks that differ in an ignored field (the op
// of an AllGather, the root of an AllReduce) still match; both ends of a Send/Recv hash the same
// (sender, receiver) pair instead of their opposite types.
uint64_t registrationSignature(const occlCollDesc_t& d, int rank, int nRanks, const std::string& programName,
                               int nBlocks, uint32_t slots, uint64_t slotBytes) {
  Fnv1a h;
  if (pointToPoint(d.type)) {
    const Endpoints e = endpoints(d, rank);
    h.add(int64_t{occlCollSend}).add(int64_t{e.sender}).add(int64_t{e.receiver});
  } else {
    h.add(int64_t{d.type});
    if (rooted(d.type)) h.add(int64_t{d.root});
  }
  if (collectiveReduces(d.type)) h.add(int64_t{d.op});
  h.add(uint64_t{d.count}).add(int64_t{d.datatype});
  h.add(programName).add(int64_t{nBlocks}).add(int64_t{nRanks}).add(uint64_t{slots}).add(slotBytes);
  return h.value() | 1;  // 0 means "not registered yet" in a connector header
}

}  // namespace occl::host
