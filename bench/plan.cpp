#include "plan.hpp"

#include <algorithm>
#include <tuple>

#include "device/coll_types.hpp"

namespace occl::bench {
namespace {

// collId layout: a tag in the top 16 bits keeps occl-bench's ids recognisable in occl's error
// messages; then data type (4 bits), operator (4), link (16) and size index (24). The link is 0
// for collectives; for SendRecv it is the sending rank + 1, because both ends of one Send/Recv
// pair register the same collId (the sender as Send, the receiver as Recv).
constexpr uint64_t kRowTag = uint64_t{0x0CCB} << 48;
constexpr uint64_t kSideChannelTag = uint64_t{0x0CCA} << 48;

uint64_t rowCollId(const RowKey& key, uint32_t link) {
  return kRowTag | (static_cast<uint64_t>(key.dtype) << 44) | (static_cast<uint64_t>(key.op) << 40) |
         (static_cast<uint64_t>(link & 0xffffu) << 24) | (key.sizeIndex & 0xffffffu);
}

const CollTypeInfo& info(Coll coll) { return collInfo(collType(coll)); }

occlCollDesc_t baseDesc(const SizePlan& plan, const Options& options, int op) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.count = plan.count;
  d.datatype = plan.dtype;
  d.op = op;
  d.root = options.root;
  d.nBlocks = options.blocks;
  d.sharedBuffers = options.sharedBuffers == 1 ? 1 : 0;
  d.algorithm = options.algorithm.empty() ? nullptr : options.algorithm.c_str();
  return d;
}

}  // namespace

int collType(Coll coll) {
  switch (coll) {
    case Coll::AllReduce: return occlCollAllReduce;
    case Coll::AllGather: return occlCollAllGather;
    case Coll::ReduceScatter: return occlCollReduceScatter;
    case Coll::Reduce: return occlCollReduce;
    case Coll::Broadcast: return occlCollBroadcast;
    case Coll::AllToAll: return occlCollAllToAll;
    case Coll::SendRecv: return occlCollSend;
    case Coll::Gather: return occlCollGather;
    case Coll::Scatter: return occlCollScatter;
  }
  return occlCollAllReduce;
}

SizePlan planFor(Coll coll, uint64_t bytes, int dtype, int nRanks) {
  SizePlan p{};
  p.coll = coll;
  p.dtype = dtype;
  p.elemSize = dtypeSize(dtype);
  // Every rank gets both buffers, as the root would: a rank of a SendRecv row sends to the next
  // and receives from the previous.
  p.count = countForElems(collType(coll), bytes / p.elemSize, nRanks);
  std::tie(p.sendElems, p.recvElems) = userElems(collType(coll), p.count, nRanks, /*isRoot=*/true);
  if (coll == Coll::SendRecv) p.recvElems = p.sendElems;
  p.bytes = std::max(p.sendElems, p.recvElems) * p.elemSize;
  return p;
}

double busBwFactor(Coll coll, int nRanks) { return occl::busBwFactor(collType(coll), nRanks); }

bool isReducing(Coll coll) { return info(coll).reduces; }

bool usesRoot(Coll coll) { return info(coll).rooted; }

bool supportsInPlace(Coll coll) { return info(coll).inPlace != InPlaceRule::None; }

InPlaceOffsets inPlaceOffsets(const SizePlan& plan, int rank) {
  const auto [send, recv] = occl::inPlaceOffsets(collType(plan.coll), rank, plan.count);
  return {send, recv};
}

std::vector<Registration> registrationsFor(const SizePlan& plan, const Options& options, const RowKey& key, int rank,
                                           int nRanks) {
  occlCollDesc_t d = baseDesc(plan, options, key.op);
  d.type = collType(plan.coll);
  size_t count = OCCL_COUNT_REGISTERED;
  if (options.maxCountBytes != 0) {
    d.count = planFor(plan.coll, options.maxCountBytes, plan.dtype, nRanks).count;
    d.variableCount = 1;
    count = plan.count;
  }
  if (plan.coll != Coll::SendRecv) return {{rowCollId(key, 0), d, true, true, count}};
  const int next = (rank + 1) % nRanks;
  const int prev = (rank + nRanks - 1) % nRanks;
  occlCollDesc_t recv = d;
  d.root = next;
  recv.type = occlCollRecv;
  recv.root = prev;
  return {{rowCollId(key, static_cast<uint32_t>(rank) + 1), d, true, false, count},
          {rowCollId(key, static_cast<uint32_t>(prev) + 1), recv, false, true, count}};
}

uint64_t sideChannelCollId(uint32_t which) { return kSideChannelTag | which; }

}  // namespace occl::bench
