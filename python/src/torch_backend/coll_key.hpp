// How a torch.distributed call becomes an occl collective id.
//
// c10d passes no collective id, so the backend derives one from the call's *signature*: the kind
// of call, element type, reduction, count, root, the point-to-point pair and torch's p2p tag, and
// the tag of an enclosing `occl.torch.coll_id(tag)` block. Equal signatures share one registered
// collective, whose submissions pair up across ranks in the order each rank issues them (occl
// runs the submissions of one id in order). So:
//   - calls with different signatures (or different tags) may be issued in any order per rank;
//   - calls with the same signature and tag must be issued in the same order on every rank,
//     as any collective library requires: give them distinct tags to free their order too.
// The id is a 64-bit FNV-1a hash of the signature's fields: the same on every rank and run.
//
// Inside an `occl.torch.size_classes()` block the count enters the signature as its size class
// (the smallest power of two at least the count): the collective is registered with that class
// as its maximum (desc.variableCount) and each call submits its own count. A loop over many
// shapes then registers one collective per class, not per shape; calls of one class pair up in
// issue order as calls of one signature do, and ranks that issue different counts for the same
// call fail it with both counts named (occlSubmitCount).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace occl::torch_backend {

// The calls of the backend. Barrier runs an occl AllReduce under a key of its own, so it never
// pairs with a user's.
enum class CallKind : uint8_t {
  AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, PointToPoint, Barrier, Gather, Scatter
};

struct Signature {
  CallKind call = CallKind::AllReduce;
  int collType = 0;   // occlCollType_t registered on this rank (Send or Recv for PointToPoint)
  int datatype = 0;   // occlDataType_t
  int op = 0;         // occlRedOp_t (or ops::kOpPreMulSum), 0 when the call does not reduce
  uint64_t preMulScalar = 0;  // PREMUL_SUM: its factor as one element's bits (ranks must agree)
  uint64_t count = 0; // occl's count for collType
  int root = 0;       // Reduce/Broadcast root; the peer for point to point
  int src = -1, dst = -1;  // point to point: the sender and the receiver (the same on both sides)
  int p2pTag = 0;     // torch's send/recv tag
  std::optional<uint64_t> tag;  // occl.torch.coll_id(tag)
  bool sizeClass = false;       // occl.torch.size_classes(): registered by registeredCount()
  bool vector = false;          // a v-collective (uneven splits): count bounds one block (kVectorBlockBound)

  // The count the collective is registered with: `count`, or its size class.
  uint64_t registeredCount() const;
  // Fields that must agree across ranks, and so enter the id (collType does not: a send and its
  // recv register Send and Recv under one id).
  uint64_t collId() const;
  std::string describe() const;
  bool sameRegistration(const Signature& o) const;
};

// The count a v-collective of the backend is registered with, the same on every rank whatever its
// splits: the most elements one rank's block may hold (2^28, a GiB of float32). Connectors are
// sized by tiles, not by this bound.
inline constexpr uint64_t kVectorBlockBound = uint64_t{1} << 28;

// The tag of the innermost `coll_id` block of the calling thread, if any.
std::optional<uint64_t> currentTag();
std::optional<uint64_t> setCurrentTag(std::optional<uint64_t> tag);
// Whether the calling thread is inside an `occl.torch.size_classes()` block; the setter returns
// the previous setting.
bool sizeClassesOn();
bool setSizeClasses(bool on);
// The smallest power of two at least `count` (1 for 0).
uint64_t sizeClassOf(uint64_t count);

}  // namespace occl::torch_backend
