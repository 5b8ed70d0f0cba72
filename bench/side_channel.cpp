#include "side_channel.hpp"

#include <cstddef>
#include <cstring>

#include "plan.hpp"

namespace occl::bench {
namespace {

enum SideChannelId : uint32_t { kMaxDoubles = 1, kSumInt64 = 2, kSumVector = 3 };

occlCollDesc_t allReduceDesc(size_t count, int dtype, int op) {
  occlCollDesc_t d;
  occlCollDescInit(&d);
  d.type = occlCollAllReduce;
  d.count = count;
  d.datatype = dtype;
  d.op = op;
  return d;
}

std::string registerError(occlComm_t comm, occlResult_t r) {
  return std::string("occlCollRegister (result aggregation): ") + occlGetErrorString(r) + ": " +
         occlGetLastError(comm);
}

}  // namespace

SideChannel::~SideChannel() {
  if (!open_) return;
  occlCollDeregister(comm_, sideChannelCollId(kMaxDoubles));
  occlCollDeregister(comm_, sideChannelCollId(kSumInt64));
}

std::string SideChannel::open() {
  occlCollDesc_t maxDesc = allReduceDesc(kSlots, occlFloat64, occlMax);
  occlCollDesc_t sumDesc = allReduceDesc(kSlots, occlInt64, occlSum);
  if (occlResult_t r = occlCollRegister(comm_, sideChannelCollId(kMaxDoubles), &maxDesc); r != occlSuccess)
    return registerError(comm_, r);
  if (occlResult_t r = occlCollRegister(comm_, sideChannelCollId(kSumInt64), &sumDesc); r != occlSuccess) {
    occlCollDeregister(comm_, sideChannelCollId(kMaxDoubles));
    return registerError(comm_, r);
  }
  open_ = true;
  return "";
}

RunStatus SideChannel::exchange(void* values, size_t bytes, std::span<const Submission> parts) {
  std::memcpy(buffer_->host(), values, bytes);
  buffer_->upload(0, bytes);
  RunStatus status = submitAndWait(comm_, parts, done_, bound_);
  if (!status.ok()) return status;
  buffer_->download(0, bytes);
  std::memcpy(values, buffer_->host(), bytes);
  return status;
}

RunStatus SideChannel::combine(Maxes& maxes, Sums& sums) {
  // One staging area: the doubles, then the int64s (both 8-byte aligned).
  struct Slots {
    Maxes maxes;
    Sums sums;
  } slots{maxes, sums};
  buffer_->reserve(sizeof slots);
  std::byte* d = buffer_->data();
  const Submission parts[] = {{sideChannelCollId(kMaxDoubles), d + offsetof(Slots, maxes), d + offsetof(Slots, maxes),
                               OCCL_COUNT_REGISTERED},
                              {sideChannelCollId(kSumInt64), d + offsetof(Slots, sums), d + offsetof(Slots, sums),
                               OCCL_COUNT_REGISTERED}};
  RunStatus status = exchange(&slots, sizeof slots, parts);
  maxes = slots.maxes;
  sums = slots.sums;
  return status;
}

RunStatus SideChannel::sumVector(std::vector<int64_t>& values) {
  const uint64_t id = sideChannelCollId(kSumVector);
  occlCollDesc_t d = allReduceDesc(values.size(), occlInt64, occlSum);
  if (occlResult_t r = occlCollRegister(comm_, id, &d); r != occlSuccess) return {registerError(comm_, r), false};
  const size_t bytes = values.size() * sizeof(int64_t);
  buffer_->reserve(bytes);
  const Submission part{id, buffer_->data(), buffer_->data(), OCCL_COUNT_REGISTERED};
  RunStatus status = exchange(values.data(), bytes, {&part, 1});
  if (!status.lost) occlCollDeregister(comm_, id);
  return status;
}

}  // namespace occl::bench
