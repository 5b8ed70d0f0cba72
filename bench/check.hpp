// Inputs and verification. Every rank's input is a function of (rank, element index), chosen so
// that the expected result can be computed on the host and is exact in any reduction order:
// small integers for sum/min/max/avg (their sums stay within the exactly representable integers of
// the narrowest float type), 1s and 2s for prod (powers of two), and distinct small integers for
// the data-moving collectives so that a misplaced block is caught.
#pragma once

#include <cstddef>
#include <cstdint>

#include "plan.hpp"

namespace occl::bench {

struct CheckSpec {
  SizePlan plan;
  int op;
  int root;
  int rank;
  int nRanks;
};

// Where one run reads and writes. Out of place: two buffers. In place: send and recv point into
// one buffer at the collective's in-place offsets.
struct RunBuffers {
  void* send;  // sendElems elements
  void* recv;  // recvElems elements
};

// Writes this rank's input at buffers.send, after poisoning the result window at buffers.recv
// with values that differ from the expected ones in every element (so a result that is never
// written is counted as wrong). The poison is written first: in place the two overlap, and the
// input must win there.
void prepareRun(const CheckSpec& spec, const RunBuffers& buffers);

// Writes only the input (no poison): what the timed iterations run on.
void writeInput(const CheckSpec& spec, void* send);

// Elements of this rank's result that differ bitwise from the expected value; 0 where the rank
// has no result (Reduce on a non-root rank).
int64_t countWrong(const CheckSpec& spec, const void* recv);

}  // namespace occl::bench
