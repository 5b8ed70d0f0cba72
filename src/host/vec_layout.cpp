#include "host/vec_layout.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_format.h"
#include "device/coll_types.hpp"

namespace occl::host {
namespace {

Status invalid(const std::string& message) { return Status::error(occlInvalidArgument, message); }

const char* vName(int type) {
  switch (type) {
    case occlCollAllToAll: return "AllToAllv";
    case occlCollAllGather: return "AllGatherv";
    case occlCollGather: return "Gatherv";
    case occlCollScatter: return "Scatterv";
    default: return "ReduceScatterv";
  }
}

// Which sides' arrays a type reads (the side whose buffer holds n blocks): the send side's, the
// receive side's.
struct Sides {
  bool send;
  bool recv;
};
Sides sidesOf(int type) {
  switch (type) {
    case occlCollAllToAll: return {true, true};
    case occlCollAllGather:
    case occlCollGather: return {false, true};
    default: return {true, false};  // ReduceScatter, Scatter
  }
}

bool rootedType(int type) { return type == occlCollGather || type == occlCollScatter; }

// Reads `counts` and `displs` (named `side`Counts, `side`Displs) into n blocks; `displs` NULL:
// counts alone, at offset 0 (a rank of Gatherv or Scatterv that is not the root).
Status readBlocks(const VecShape& shape, const char* side, const size_t* counts, const size_t* displs,
                  VecBlock* out) {
  const uint64_t maxElems = std::numeric_limits<uint64_t>::max() / shape.elemBytes;
  for (int q = 0; q < shape.nRanks; ++q) {
    const uint64_t count = counts[q], displ = displs != nullptr ? displs[q] : 0;
    if (count > shape.maxCount)
      return invalid(absl::StrFormat("%sCounts[%d] = %d: a block of %s holds at most desc.count = %d elements", side, q,
                                     count, vName(shape.type), shape.maxCount));
    if (displ > maxElems - count)
      return invalid(absl::StrFormat("%sDispls[%d] = %d with %sCounts[%d] = %d reaches past the address space", side, q,
                                     displ, side, q, count));
    out[q] = VecBlock{displ, count};
  }
  return Status::success();
}

uint64_t extent(const VecBlock* blocks, int n) {
  uint64_t end = 0;
  for (int q = 0; q < n; ++q)
    if (blocks[q].length > 0) end = std::max(end, blocks[q].offset + blocks[q].length);
  return end;
}

// recvbuf's blocks are written by different ranks at once: they must not overlap.
Status checkDisjoint(const VecShape& shape, const char* side, const VecBlock* blocks) {
  absl::InlinedVector<int, 64> order;
  for (int q = 0; q < shape.nRanks; ++q)
    if (blocks[q].length > 0) order.push_back(q);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return blocks[a].offset < blocks[b].offset; });
  for (size_t i = 1; i < order.size(); ++i) {
    const VecBlock& before = blocks[order[i - 1]];
    if (before.offset + before.length > blocks[order[i]].offset)
      return invalid(absl::StrFormat("%sDispls: block %d (elements %d..%d) overlaps block %d (from %d); the blocks of "
                                     "recvbuf must not overlap",
                                     side, order[i - 1], before.offset, before.offset + before.length - 1, order[i],
                                     blocks[order[i]].offset));
  }
  return Status::success();
}

}  // namespace

std::string vectorCountsRefusal(const occlCollDesc_t& d) {
  if (d.vectorCounts == 0) return "";
  if (d.vectorCounts != 1) return absl::StrFormat("desc.vectorCounts = %d: expected 0 or 1", d.vectorCounts);
  if (d.type != occlCollAllToAll && d.type != occlCollAllGather && d.type != occlCollReduceScatter &&
      d.type != occlCollGather && d.type != occlCollScatter)
    return absl::StrFormat("desc.vectorCounts = 1 with desc.type %s: v-collectives are alltoall, allgather, "
                           "reducescatter, gather and scatter",
                           collTypeName(d.type));
  if (d.algorithm != nullptr && std::string_view(d.algorithm) != "ring")
    return absl::StrFormat("desc.algorithm = \"%s\": a v-collective (desc.vectorCounts) runs the built-in algorithm "
                           "(NULL or \"ring\")",
                           d.algorithm);
  if (d.variableCount != 0)
    return "desc.variableCount = 1 with desc.vectorCounts = 1: a v-collective's counts are per block already";
  return "";
}

Status vecLayout(const VecShape& shape, const occlVectors_t* v, const void* sendbuf, const void* recvbuf,
                 VecLayout& out) {
  if (v == nullptr) return invalid(absl::StrFormat("vectors is NULL: %s needs its counts and displacements", vName(shape.type)));
  const Sides sides = sidesOf(shape.type);
  const int n = shape.nRanks;
  // Gatherv and Scatterv: only the root's buffer holds the n blocks; every rank reads the counts
  // (its own block is counts[rank]), and only the root the displacements.
  const bool blocksHere = !rootedType(shape.type) || shape.rank == shape.root;
  out.sendElems = out.recvElems = 0;
  out.inPlace = false;
  out.blocks.assign(vecTableBlocks(static_cast<uint32_t>(n)), VecBlock{0, 0});
  VecBlock* in = out.blocks.data();
  VecBlock* outBlocks = out.blocks.data() + n;
  for (auto [used, counts, displs, side] : {std::tuple{sides.send, v->sendCounts, v->sendDispls, "send"},
                                            std::tuple{sides.recv, v->recvCounts, v->recvDispls, "recv"}}) {
    if (!used && (counts != nullptr || displs != nullptr))
      return invalid(absl::StrFormat("vectors->%sCounts and %sDispls must be NULL for %s (it reads the %s side's only)",
                                     side, side, vName(shape.type), sides.send ? "send" : "receive"));
    if (used && (counts == nullptr || (blocksHere && displs == nullptr)))
      return invalid(absl::StrFormat("vectors->%s%s is NULL: %s needs %d of them%s", side,
                                     counts == nullptr ? "Counts" : "Displs", vName(shape.type), n,
                                     rootedType(shape.type) && counts != nullptr ? " at the root" : ""));
  }
  if (sides.send) {
    if (Status s = readBlocks(shape, "send", v->sendCounts, blocksHere ? v->sendDispls : nullptr, in); !s.ok()) return s;
  }
  if (sides.recv) {
    if (Status s = readBlocks(shape, "recv", v->recvCounts, blocksHere ? v->recvDispls : nullptr, outBlocks); !s.ok())
      return s;
    if (blocksHere) {
      if (Status s = checkDisjoint(shape, "recv", outBlocks); !s.ok()) return s;
    }
  }
  // The side whose arrays the type does not read holds one block: this rank's share of the other
  // side's (AllGatherv's and Gatherv's input, ReduceScatterv's and Scatterv's output). Off the
  // root, the other side holds nothing (its program never touches that buffer).
  if (!sides.send) in[0] = VecBlock{0, outBlocks[shape.rank].length};
  if (!sides.recv) outBlocks[0] = VecBlock{0, in[shape.rank].length};
  if (!blocksHere) std::fill_n(sides.recv ? outBlocks : in, n, VecBlock{0, 0});
  out.sendElems = extent(in, sides.send ? n : 1);
  out.recvElems = extent(outBlocks, sides.recv ? n : 1);

  if (out.sendElems > 0 && sendbuf == nullptr)
    return invalid(absl::StrFormat("sendbuf is NULL, and its blocks hold %d elements", out.sendElems));
  if (out.recvElems > 0 && recvbuf == nullptr)
    return invalid(absl::StrFormat("recvbuf is NULL, and its blocks hold %d elements", out.recvElems));
  if (sendbuf == nullptr || recvbuf == nullptr) return Status::success();
  const auto s = reinterpret_cast<uintptr_t>(sendbuf), r = reinterpret_cast<uintptr_t>(recvbuf);
  const uint64_t eb = shape.elemBytes;
  if (blocksHere && !sides.send) out.inPlace = s == r + outBlocks[shape.rank].offset * eb;
  if (blocksHere && !sides.recv) out.inPlace = r == s + in[shape.rank].offset * eb;
  if (out.inPlace) return Status::success();
  if (s < r + out.recvElems * eb && r < s + out.sendElems * eb)
    return invalid(absl::StrFormat("sendbuf and recvbuf overlap but are not in place (%s)",
                                   shape.type == occlCollAllToAll ? "AllToAllv has no in-place form"
                                   : !blocksHere                  ? "in place is the root's only"
                                   : !sides.send                  ? "in place: sendbuf == recvbuf + recvDispls[rank]"
                                                                  : "in place: recvbuf == sendbuf + sendDispls[rank]"));
  return Status::success();
}

Result<std::unique_ptr<VecTables>> VecTables::create(backend::Backend& backend, uint32_t nRanks, uint32_t window,
                                                     uint32_t nParts) {
  std::unique_ptr<VecTables> t(new VecTables(backend, nRanks, window));
  const uint64_t table = vecTableBlocks(nRanks) * sizeof(VecBlock);
  Result<void*> slots = backend.allocShared(table * window);
  if (!slots.ok()) return slots.status();
  t->slots_ = static_cast<VecBlock*>(slots.value());
  Result<void*> cache = backend.allocDaemon(table * nParts);
  if (!cache.ok()) return cache.status();
  t->cache_ = static_cast<VecBlock*>(cache.value());
  return t;
}

VecTables::~VecTables() {
  if (slots_ != nullptr) backend_.freeShared(slots_);
  if (cache_ != nullptr) backend_.freeDaemon(cache_);
}

void VecTables::write(uint64_t seq, const std::vector<VecBlock>& blocks) {
  std::memcpy(slots_ + vecTableBlocks(nRanks_) * windowSlot(seq, window_), blocks.data(), blocks.size() * sizeof(VecBlock));
}

}  // namespace occl::host
