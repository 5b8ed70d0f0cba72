#include "host/algorithms.hpp"

#include "absl/strings/str_format.h"
#include "ir_loader/ring.hpp"

namespace occl::host {
namespace {

Status invalid(const std::string& message) { return Status::error(occlInvalidArgument, message); }

Status validateCommon(const occlCollDesc_t& d, int nRanks) {
  if (d.type < 0 || d.type >= occlNumCollTypes)
    return invalid(absl::StrFormat("desc.type = %d: expected an occlCollType_t (0..%d)", d.type, occlNumCollTypes - 1));
  if (d.datatype < 0 || d.datatype >= occlNumTypes)
    return invalid(absl::StrFormat("desc.datatype = %d: expected an occlDataType_t (0..%d)", d.datatype, occlNumTypes - 1));
  if (d.op < 0 || d.op >= occlNumOps)
    return invalid(absl::StrFormat("desc.op = %d: expected an occlRedOp_t (0..%d)", d.op, occlNumOps - 1));
  if (d.nBlocks < 0) return invalid(absl::StrFormat("desc.nBlocks = %d: expected >= 0 (0 = default)", d.nBlocks));
  return Status::success();
}

int defaultBlocks(const occlCollDesc_t& d, int daemonBlocks) { return d.nBlocks > 0 ? d.nBlocks : daemonBlocks; }

}  // namespace

const char* collTypeName(int type) {
  static const char* const kNames[] = {"allreduce", "allgather", "reducescatter", "reduce",
                                       "broadcast", "alltoall",  "send",          "recv"};
  return type >= 0 && type < occlNumCollTypes ? kNames[type] : "unknown";
}

Result<AlgorithmChoice> selectAlgorithm(const occlCollDesc_t& d, int rank, int nRanks, int daemonBlocks) {
  if (Status s = validateCommon(d, nRanks); !s.ok()) return s;
  int nBlocks = defaultBlocks(d, daemonBlocks);
  if (nBlocks > daemonBlocks)
    return invalid(absl::StrFormat("desc.nBlocks = %d exceeds config.daemonBlocks = %d", nBlocks, daemonBlocks));
  if (d.algorithm != nullptr && std::string(d.algorithm) != "ring")
    return Status::error(occlInvalidArgument,
                         absl::StrFormat("desc.algorithm = \"%s\": only \"ring\" (or NULL) is available", d.algorithm));
  switch (d.type) {
    case occlCollAllReduce:
      return AlgorithmChoice{ir::makeRingAllReduce(nRanks, nBlocks), nBlocks};
    default:
      return Status::error(occlInvalidArgument,
                           absl::StrFormat("desc.type = %s is not implemented yet", collTypeName(d.type)));
  }
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

uint64_t registrationSignature(const occlCollDesc_t& d, int rank, int nRanks, const std::string& programName,
                               int nBlocks, uint32_t slots, uint64_t slotBytes) {
  Fnv1a h;
  h.add(int64_t{d.type}).add(uint64_t{d.count}).add(int64_t{d.datatype}).add(int64_t{d.op}).add(int64_t{d.root});
  h.add(programName).add(int64_t{nBlocks}).add(int64_t{nRanks}).add(uint64_t{slots}).add(slotBytes);
  return h.value() | 1;  // 0 means "not registered yet" in a connector header
}

}  // namespace occl::host
