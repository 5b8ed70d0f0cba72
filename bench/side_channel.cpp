#include "side_channel.hpp"

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

RunStatus SideChannel::combine(Maxes& maxes, Sums& sums) {
  const Submission parts[] = {{sideChannelCollId(kMaxDoubles), maxes.data(), maxes.data()},
                              {sideChannelCollId(kSumInt64), sums.data(), sums.data()}};
  return submitAndWait(comm_, parts, done_, bound_);
}

RunStatus SideChannel::sumVector(std::vector<int64_t>& values) {
  const uint64_t id = sideChannelCollId(kSumVector);
  occlCollDesc_t d = allReduceDesc(values.size(), occlInt64, occlSum);
  if (occlResult_t r = occlCollRegister(comm_, id, &d); r != occlSuccess) return {registerError(comm_, r), false};
  const Submission part{id, values.data(), values.data()};
  RunStatus status = submitAndWait(comm_, {&part, 1}, done_, bound_);
  if (!status.lost) occlCollDeregister(comm_, id);
  return status;
}

}  // namespace occl::bench
