// Generators of the built-in algorithms, in the same Program form the MSCCL-IR loader produces.
#pragma once

#include "ir_loader/program.hpp"

namespace occl::ir {

// Ring AllReduce over nRanks ranks on nChannels channels (one daemon block each): a
// reduce-scatter phase (s, rrs..., rrcs) followed by an all-gather phase (rcs..., r). Reads come
// from the input buffer and writes go to the output buffer, so the same program serves in-place
// (input == output) and out-of-place submissions.
Program makeRingAllReduce(int nRanks, int nChannels);

}  // namespace occl::ir
