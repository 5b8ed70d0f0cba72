// Names of collectives, data types and operators as occl-bench reads and prints them, and byte
// counts with nccl-tests' K/M/G suffixes.
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstring>

#include "options.hpp"

namespace occl::bench {
namespace {

std::string normalized(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '_' && c != '-') out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

struct CollName {
  Coll coll;
  const char* name;
};
constexpr std::array<CollName, 9> kColls = {{{Coll::AllReduce, "allreduce"},
                                             {Coll::AllGather, "allgather"},
                                             {Coll::ReduceScatter, "reducescatter"},
                                             {Coll::Reduce, "reduce"},
                                             {Coll::Broadcast, "broadcast"},
                                             {Coll::AllToAll, "alltoall"},
                                             {Coll::SendRecv, "sendrecv"},
                                             {Coll::Gather, "gather"},
                                             {Coll::Scatter, "scatter"}}};

// Indexed by occlDataType_t; nccl-tests prints these spellings.
constexpr std::array<const char*, occlNumTypes> kDtypeNames = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
constexpr std::array<size_t, occlNumTypes> kDtypeSizes = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

struct Alias {
  const char* name;
  int dtype;
};
constexpr std::array<Alias, 12> kDtypeAliases = {{{"fp16", occlFloat16},
                                                 {"float16", occlFloat16},
                                                 {"fp32", occlFloat32},
                                                 {"float32", occlFloat32},
                                                 {"fp64", occlFloat64},
                                                 {"float64", occlFloat64},
                                                 {"bf16", occlBfloat16},
                                                 {"char", occlInt8},
                                                 {"fp8e4m3", occlFloat8e4m3},
                                                 {"float8e4m3fn", occlFloat8e4m3},
                                                 {"fp8e5m2", occlFloat8e5m2},
                                                 {"float8e5m2", occlFloat8e5m2}}};

// Indexed by occlRedOp_t.
constexpr std::array<const char*, occlNumOps> kOpNames = {"sum", "prod", "max", "min", "avg"};

}  // namespace

std::optional<Coll> collFromName(std::string_view name) {
  std::string n = normalized(name);
  // nccl-tests binaries are <name>_perf, optionally with an _mpi suffix.
  for (const char* suffix : {"perfmpi", "perf"})
    if (n.size() > std::strlen(suffix) && n.ends_with(suffix)) {
      n.resize(n.size() - std::strlen(suffix));
      break;
    }
  for (const CollName& c : kColls)
    if (n == c.name) return c.coll;
  return std::nullopt;
}

std::optional<int> dtypeFromName(std::string_view name) {
  const std::string n = normalized(name);
  for (int t = 0; t < occlNumTypes; ++t)
    if (n == kDtypeNames[static_cast<size_t>(t)]) return t;
  for (const Alias& a : kDtypeAliases)
    if (n == a.name) return a.dtype;
  return std::nullopt;
}

std::optional<int> opFromName(std::string_view name) {
  const std::string n = normalized(name);
  for (int op = 0; op < occlNumOps; ++op)
    if (n == kOpNames[static_cast<size_t>(op)]) return op;
  return std::nullopt;
}

const char* collName(Coll coll) {
  for (const CollName& c : kColls)
    if (c.coll == coll) return c.name;
  return "unknown";
}

const char* dtypeName(int dtype) {
  return dtype >= 0 && dtype < occlNumTypes ? kDtypeNames[static_cast<size_t>(dtype)] : "unknown";
}

const char* opName(int op) { return op >= 0 && op < occlNumOps ? kOpNames[static_cast<size_t>(op)] : "unknown"; }

size_t dtypeSize(int dtype) {
  return dtype >= 0 && dtype < occlNumTypes ? kDtypeSizes[static_cast<size_t>(dtype)] : 0;
}

}  // namespace occl::bench
