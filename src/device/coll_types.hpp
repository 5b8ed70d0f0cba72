// What each collective type means, in one table that the library, occl-bench and the tests read
// (NCCL's definitions): the user buffers' element counts, the in-place rule, whether it reduces,
// has a root or is point-to-point, what the chunks of its algorithm divide, its bus-bandwidth
// factor (nccl-tests' busBw = algBw * factor) and its names. A new collective is a row here, a
// generator (ir_loader/ring.hpp) and a test case (tests/support/collective_cases.hpp).
//
// "count" is NCCL's: elements per rank for AllReduce, Reduce, Broadcast and Send/Recv; elements
// each rank contributes to (AllGather, Gather) or receives from (ReduceScatter, Scatter) the
// whole; elements sent to each peer (AllToAll).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string_view>
#include <utility>

#include "occl/occl.h"

namespace occl {

// A user buffer's elements, given count and the rank count n.
enum class Extent : uint8_t {
  None,         // the buffer is not used (may be NULL)
  Count,        // count
  CountByRanks, // count * n
  RootOnly,     // count on the root, none (NULL allowed) elsewhere
  RootOnlyByRanks,  // count * n on the root, none (NULL allowed) elsewhere
};

// Whether only the root holds a buffer of this extent (NULL allowed elsewhere).
constexpr bool rootOnly(Extent e) { return e == Extent::RootOnly || e == Extent::RootOnlyByRanks; }

// In place, where sendbuf sits against recvbuf (NCCL's rule; any other overlap is an error).
enum class InPlaceRule : uint8_t {
  None,            // no in-place form: the buffers must not overlap
  Same,            // sendbuf == recvbuf
  SendIsOwnShare,  // sendbuf == recvbuf + rank * count (AllGather; Gather on the root)
  RecvIsOwnShare,  // recvbuf == sendbuf + rank * count (ReduceScatter; Scatter on the root)
};

// nccl-tests' bus-bandwidth factor, as a function of n.
enum class BusBw : uint8_t {
  TwoNMinusOneOverN,  // 2(n-1)/n: every byte crosses the ring twice
  NMinusOneOverN,     // (n-1)/n
  One,
};

struct CollTypeInfo {
  int type;              // occlCollType_t: the row's index
  const char* name;      // messages, occl-bench, tests: "allreduce", ..., "send", "recv"
  const char* irName;    // MSCCL-IR's coll attribute; nullptr: MSCCL-IR has no such collective
  const char* builtIn;   // the algorithm a registration that names none runs (AllReduce: "direct" for
                         // small counts instead, host::builtInAlgorithm)
  bool reduces;          // takes desc.op
  bool rooted;           // desc.root is the root rank
  bool pointToPoint;     // desc.root is the peer; only the pair takes part
  Extent send, recv;
  bool chunksByRanks;    // the chunks divide count * n elements (else count)
  InPlaceRule inPlace;
  BusBw busBw;
};

inline constexpr CollTypeInfo kCollTypes[] = {
    {occlCollAllReduce, "allreduce", "allreduce", "ring", true, false, false, Extent::Count, Extent::Count, false,
     InPlaceRule::Same, BusBw::TwoNMinusOneOverN},
    {occlCollAllGather, "allgather", "allgather", "ring", false, false, false, Extent::Count, Extent::CountByRanks,
     true, InPlaceRule::SendIsOwnShare, BusBw::NMinusOneOverN},
    {occlCollReduceScatter, "reducescatter", "reduce_scatter", "ring", true, false, false, Extent::CountByRanks,
     Extent::Count, true, InPlaceRule::RecvIsOwnShare, BusBw::NMinusOneOverN},
    {occlCollReduce, "reduce", "reduce", "chain", true, true, false, Extent::Count, Extent::RootOnly, false,
     InPlaceRule::Same, BusBw::One},
    {occlCollBroadcast, "broadcast", "broadcast", "chain", false, true, false, Extent::RootOnly, Extent::Count, false,
     InPlaceRule::Same, BusBw::One},
    {occlCollAllToAll, "alltoall", "alltoall", "direct", false, false, false, Extent::CountByRanks,
     Extent::CountByRanks, true, InPlaceRule::None, BusBw::NMinusOneOverN},
    {occlCollSend, "send", nullptr, "p2p", false, false, true, Extent::Count, Extent::None, false, InPlaceRule::None,
     BusBw::One},
    {occlCollRecv, "recv", nullptr, "p2p", false, false, true, Extent::None, Extent::Count, false, InPlaceRule::None,
     BusBw::One},
    {occlCollGather, "gather", nullptr, "direct", false, true, false, Extent::Count, Extent::RootOnlyByRanks, true,
     InPlaceRule::SendIsOwnShare, BusBw::NMinusOneOverN},
    {occlCollScatter, "scatter", nullptr, "direct", false, true, false, Extent::RootOnlyByRanks, Extent::Count, true,
     InPlaceRule::RecvIsOwnShare, BusBw::NMinusOneOverN},
};

constexpr bool rowsInEnumOrder() {
  for (int t = 0; t < occlNumCollTypes; ++t)
    if (kCollTypes[t].type != t) return false;
  return true;
}
static_assert(std::size(kCollTypes) == static_cast<size_t>(occlNumCollTypes), "one row per occlCollType_t");
static_assert(rowsInEnumOrder(), "kCollTypes[t] describes collective type t");

constexpr bool isCollType(int type) { return type >= 0 && type < occlNumCollTypes; }

// The row of a valid type (check isCollType first).
constexpr const CollTypeInfo& collInfo(int type) { return kCollTypes[type]; }

constexpr const char* collTypeName(int type) { return isCollType(type) ? collInfo(type).name : "unknown"; }

// The type whose name or irName is `name` (occlNumCollTypes when none is).
constexpr int collTypeFromName(std::string_view name) {
  for (const CollTypeInfo& c : kCollTypes)
    if (name == c.name || (c.irName != nullptr && name == c.irName)) return c.type;
  return occlNumCollTypes;
}

// Whether `typed` spells `name` when case, '_' and '-' are ignored ("all_reduce", "AllReduce").
constexpr bool sameCollName(std::string_view typed, std::string_view name) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  size_t j = 0;
  for (char c : typed) {
    if (c == '_' || c == '-') continue;
    if (j == name.size() || lower(c) != name[j]) return false;
    ++j;
  }
  return j == name.size();
}

// As collTypeFromName, also taking the spellings users type: occl-bench's, nccl-tests' and
// MSCCL-IR's ("all_reduce", "reduce_scatter", "AllGather"). The tools read names through this.
constexpr int collTypeFromAnyName(std::string_view name) {
  for (const CollTypeInfo& c : kCollTypes)
    if (sameCollName(name, c.name)) return c.type;
  return occlNumCollTypes;
}
static_assert(collTypeFromAnyName("all_reduce") == occlCollAllReduce && collTypeFromAnyName("Reduce_Scatter") ==
                  occlCollReduceScatter && collTypeFromAnyName("reduce") == occlCollReduce &&
                  collTypeFromAnyName("reduces") == occlNumCollTypes && collTypeFromAnyName("") == occlNumCollTypes,
              "collTypeFromAnyName ignores case, '_' and '-', and nothing else");

constexpr uint64_t extentElems(Extent e, uint64_t count, int nRanks, bool isRoot) {
  switch (e) {
    case Extent::None: return 0;
    case Extent::Count: return count;
    case Extent::CountByRanks: return count * static_cast<uint64_t>(nRanks);
    case Extent::RootOnly: return isRoot ? count : 0;
    case Extent::RootOnlyByRanks: return isRoot ? count * static_cast<uint64_t>(nRanks) : 0;
  }
  return 0;
}

// Elements of a rank's send and receive buffers.
constexpr std::pair<uint64_t, uint64_t> userElems(int type, uint64_t count, int nRanks, bool isRoot) {
  const CollTypeInfo& c = collInfo(type);
  return {extentElems(c.send, count, nRanks, isRoot), extentElems(c.recv, count, nRanks, isRoot)};
}

// Elements the chunks of the collective's program divide: count times this.
constexpr uint64_t chunkMultiplier(int type, int nRanks) {
  return collInfo(type).chunksByRanks ? static_cast<uint64_t>(nRanks) : 1;
}

// nccl-tests' count for a size of `elems` elements (the largest buffer's): a rank's share of it
// where the chunks divide count * n.
constexpr uint64_t countForElems(int type, uint64_t elems, int nRanks) {
  return elems / chunkMultiplier(type, nRanks);
}

// In place, the element offsets of sendbuf and recvbuf within the one buffer.
constexpr std::pair<uint64_t, uint64_t> inPlaceOffsets(int type, int rank, uint64_t count) {
  const uint64_t own = static_cast<uint64_t>(rank) * count;
  switch (collInfo(type).inPlace) {
    case InPlaceRule::SendIsOwnShare: return {own, 0};
    case InPlaceRule::RecvIsOwnShare: return {0, own};
    default: return {0, 0};
  }
}

// What the in-place rule asks of the pointers, for messages.
constexpr const char* inPlaceRuleText(int type) {
  switch (collInfo(type).inPlace) {
    case InPlaceRule::None: return "nothing: buffers must not overlap";
    case InPlaceRule::Same: return "sendbuf == recvbuf";
    case InPlaceRule::SendIsOwnShare: return "sendbuf == recvbuf + rank*count";
    case InPlaceRule::RecvIsOwnShare: return "recvbuf == sendbuf + rank*count";
  }
  return "";
}

constexpr double busBwFactor(int type, int nRanks) {
  const double n = nRanks;
  switch (collInfo(type).busBw) {
    case BusBw::TwoNMinusOneOverN: return 2.0 * (n - 1) / n;
    case BusBw::NMinusOneOverN: return (n - 1) / n;
    case BusBw::One: return 1.0;
  }
  return 1.0;
}

}  // namespace occl
