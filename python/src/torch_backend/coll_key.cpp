#include "torch_backend/coll_key.hpp"

#include <bit>
#include <cstdio>
#include <string_view>
#include <utility>

#include "device/coll_types.hpp"
#include "device/dtypes.hpp"
#include "primitives/reduce_ops.hpp"
#include "util/fnv1a.hpp"

namespace occl::torch_backend {
namespace {

thread_local std::optional<uint64_t> tCurrentTag;
thread_local bool tSizeClasses = false;

constexpr std::string_view kCallNames[] = {"allreduce", "broadcast", "reduce", "allgather",
                                           "reduce_scatter", "alltoall", "send/recv", "barrier",
                                           "gather", "scatter"};

}  // namespace

uint64_t Signature::collId() const {
  // Fixed-width fields in a fixed order; the version byte changes if the layout ever does.
  Fnv1a h;
  h.add(uint8_t{1}).add(static_cast<uint8_t>(call)).add(int32_t{datatype}).add(int32_t{op}).add(registeredCount());
  if (call == CallKind::PointToPoint)
    h.add(int32_t{src}).add(int32_t{dst}).add(int32_t{p2pTag});
  else
    h.add(int32_t{root});
  h.add(uint8_t{tag.has_value()}).add(tag.value_or(0));
  if (sizeClass) h.add(uint8_t{2});
  if (op == ops::kOpPreMulSum) h.add(uint8_t{3}).add(preMulScalar);
  if (vector) h.add(uint8_t{4});  // never the id of an exact registration of the class's count
  return h.value();
}

std::string Signature::describe() const {
  std::string s = std::string(kCallNames[static_cast<size_t>(call)]) +
                  (vector ? " with uneven splits of " : " of ") + std::to_string(count) + " " + dtypeName(datatype);
  if (collInfo(collType).reduces) s += std::string(" (") + ops::opName(op) + ")";
  if (op == ops::kOpPreMulSum) {
    char bits[32];
    std::snprintf(bits, sizeof bits, " factor bits 0x%llx", static_cast<unsigned long long>(preMulScalar));
    s += bits;
  }
  if (call == CallKind::PointToPoint)
    s += " from rank " + std::to_string(src) + " to rank " + std::to_string(dst) + " tag " + std::to_string(p2pTag);
  else if (collInfo(collType).rooted || call == CallKind::Gather)
    s += " root " + std::to_string(root);
  if (tag) s += " in coll_id(" + std::to_string(*tag) + ")";
  if (sizeClass) s += " in size class " + std::to_string(registeredCount());
  return s;
}

bool Signature::sameRegistration(const Signature& o) const {
  return call == o.call && collType == o.collType && datatype == o.datatype && op == o.op &&
         preMulScalar == o.preMulScalar &&
         registeredCount() == o.registeredCount() && sizeClass == o.sizeClass && vector == o.vector && root == o.root &&
         src == o.src &&
         dst == o.dst && p2pTag == o.p2pTag && tag == o.tag;
}

uint64_t Signature::registeredCount() const { return sizeClass && !vector ? sizeClassOf(count) : count; }

uint64_t sizeClassOf(uint64_t count) { return count <= 1 ? 1 : std::bit_ceil(count); }

bool sizeClassesOn() { return tSizeClasses; }

bool setSizeClasses(bool on) { return std::exchange(tSizeClasses, on); }

std::optional<uint64_t> currentTag() { return tCurrentTag; }

std::optional<uint64_t> setCurrentTag(std::optional<uint64_t> tag) { return std::exchange(tCurrentTag, tag); }

}  // namespace occl::torch_backend
