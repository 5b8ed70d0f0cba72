// A v-collective case (desc.vectorCounts, occlSubmitV) as collective_cases.hpp checks a fixed one:
// per-rank counts and displacements drawn from a seed (zeros and the maximum among them, blocks in
// a shuffled order with gaps between them), inputs that every reduction order reduces to the same
// bits, and the exact bytes each rank's receive buffer must hold afterwards, gaps included.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/collective_cases.hpp"

namespace occl::test {

// One rank's arrays for one submission, and its buffers.
struct VecRankIo {
  std::vector<size_t> sendCounts, sendDispls, recvCounts, recvDispls;
  void* sendbuf = nullptr;  // what the submission passes
  void* recvbuf = nullptr;
  RankIo io;                // io.recv and io.expected: the whole receive side, which mismatch() checks
  occlVectors_t vectors() const {
    auto ptr = [](const std::vector<size_t>& v) { return v.empty() ? nullptr : v.data(); };
    return {ptr(sendCounts), ptr(sendDispls), ptr(recvCounts), ptr(recvDispls)};
  }
};

// The description of `s` as a v-collective (desc.vectorCounts): s.count bounds one block.
inline occlCollDesc_t vectorDescFor(const Spec& s) {
  occlCollDesc_t d = descFor(s, 0);
  d.vectorCounts = 1;
  return d;
}

// Block lengths `counts` laid out in a shuffled order with gaps of 0..3 elements: the displacements.
inline std::vector<size_t> scatterBlocks(const std::vector<size_t>& counts, std::mt19937_64& rng) {
  std::vector<size_t> order(counts.size()), displs(counts.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  size_t at = 0;
  for (size_t q : order) {
    at += rng() % 4;
    displs[q] = at;
    at += counts[q];
  }
  return displs;
}

inline size_t blocksEnd(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t q = 0; q < counts.size(); ++q) end = std::max(end, displs[q] + counts[q]);
  return end;
}

// A count of 0..max, often 0 or max.
inline size_t drawCount(std::mt19937_64& rng, size_t max) {
  const uint64_t pick = rng() % 8;
  return pick == 0 ? 0 : pick == 1 ? max : static_cast<size_t>(rng() % (max + 1));
}

// Every rank's arrays and buffers for submission `seed` of `s` (s.count: the most of a block;
// s.inPlace where the type has an in-place form: Gatherv's and Scatterv's root only). Element i of
// the block a rank sends for rank q is input index q*max + i, so every block carries its own values.
template <typename T>
std::vector<VecRankIo> prepareVectorAs(const Spec& s, const Tables<T>& t, int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const size_t max = s.count, eb = sizeof(T);
  std::vector<std::vector<size_t>> counts(static_cast<size_t>(n));  // AllToAllv: [sender][receiver]
  for (auto& row : counts)
    for (int q = 0; q < n; ++q) row.push_back(drawCount(rng, max));
  std::vector<VecRankIo> out(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    VecRankIo& v = out[static_cast<size_t>(r)];
    size_t sendElems = 0, recvElems = 0;
    switch (s.type) {
      case occlCollAllToAll:
        v.sendCounts = counts[static_cast<size_t>(r)];
        for (int q = 0; q < n; ++q) v.recvCounts.push_back(counts[static_cast<size_t>(q)][static_cast<size_t>(r)]);
        v.sendDispls = scatterBlocks(v.sendCounts, rng);
        v.recvDispls = scatterBlocks(v.recvCounts, rng);
        sendElems = blocksEnd(v.sendCounts, v.sendDispls);
        recvElems = blocksEnd(v.recvCounts, v.recvDispls);
        break;
      case occlCollAllGather:  // counts[0] is every rank's row of block lengths
        v.recvCounts = counts[0];
        v.recvDispls = scatterBlocks(v.recvCounts, rng);
        sendElems = v.recvCounts[static_cast<size_t>(r)];
        recvElems = blocksEnd(v.recvCounts, v.recvDispls);
        break;
      case occlCollGather:  // every rank passes the counts; the root alone its displacements
        v.recvCounts = counts[0];
        if (r == s.root) v.recvDispls = scatterBlocks(v.recvCounts, rng);
        sendElems = v.recvCounts[static_cast<size_t>(r)];
        recvElems = r == s.root ? blocksEnd(v.recvCounts, v.recvDispls) : 0;
        break;
      case occlCollScatter:
        v.sendCounts = counts[0];
        if (r == s.root) v.sendDispls = scatterBlocks(v.sendCounts, rng);
        sendElems = r == s.root ? blocksEnd(v.sendCounts, v.sendDispls) : 0;
        recvElems = v.sendCounts[static_cast<size_t>(r)];
        break;
      default:  // ReduceScatterv
        v.sendCounts = counts[0];
        v.sendDispls = scatterBlocks(v.sendCounts, rng);
        sendElems = blocksEnd(v.sendCounts, v.sendDispls);
        recvElems = v.sendCounts[static_cast<size_t>(r)];
        break;
    }
    const bool gathers = s.type == occlCollAllGather || s.type == occlCollGather;
    const bool scatters = s.type == occlCollReduceScatter || s.type == occlCollScatter;
    RankIo& io = v.io;
    // Gatherv and Scatterv: in place at the root only.
    const bool rooted = s.type == occlCollGather || s.type == occlCollScatter;
    const bool inPlace = s.inPlace && s.type != occlCollAllToAll && (!rooted || r == s.root);
    io.first.assign(std::max<size_t>(inPlace ? std::max(sendElems, recvElems) : sendElems, 1) * eb, kSentinel);
    if (!inPlace) io.second.assign(std::max<size_t>(recvElems, 1) * eb, kSentinel);
    io.recvElems = (inPlace ? io.first.size() : io.second.size()) / eb;  // the whole buffer: nothing else written
    std::byte* recvBase = inPlace ? io.first.data() : io.second.data();
    io.recv = v.recvbuf = recvBase;
    io.send = v.sendbuf = io.first.data();
    if (inPlace && gathers) io.send = v.sendbuf = recvBase + v.recvDispls[static_cast<size_t>(r)] * eb;
    if (inPlace && scatters) v.recvbuf = io.first.data() + v.sendDispls[static_cast<size_t>(r)] * eb;
    auto put = [&](std::byte* at, size_t i, T value) { std::memcpy(at + i * eb, &value, eb); };
    // Inputs.
    if (gathers) {
      for (size_t i = 0; i < sendElems; ++i) put(static_cast<std::byte*>(io.send), i, t.input(r, i));
    } else if (!v.sendDispls.empty()) {  // a Scatterv rank other than the root sends nothing
      for (int q = 0; q < n; ++q)
        for (size_t i = 0; i < v.sendCounts[static_cast<size_t>(q)]; ++i)
          put(io.first.data(), v.sendDispls[static_cast<size_t>(q)] + i, t.input(r, static_cast<size_t>(q) * max + i));
    }
    // Expected: the receive side as it is now (gaps and, in place, the rest of the buffer), then the blocks.
    io.expected.assign(recvBase, recvBase + io.recvElems * eb);
    std::byte* expected = io.expected.data();
    switch (s.type) {
      case occlCollAllToAll:
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < v.recvCounts[static_cast<size_t>(q)]; ++i)
            put(expected, v.recvDispls[static_cast<size_t>(q)] + i, t.input(q, static_cast<size_t>(r) * max + i));
        break;
      case occlCollAllGather:
      case occlCollGather:  // off the root, recvbuf is untouched
        for (int q = 0; q < n && !v.recvDispls.empty(); ++q)
          for (size_t i = 0; i < v.recvCounts[static_cast<size_t>(q)]; ++i)
            put(expected, v.recvDispls[static_cast<size_t>(q)] + i, t.input(q, i));
        break;
      case occlCollScatter: {
        const size_t at = inPlace ? v.sendDispls[static_cast<size_t>(r)] : 0;
        for (size_t i = 0; i < recvElems; ++i) put(expected, at + i, t.input(s.root, static_cast<size_t>(r) * max + i));
        break;
      }
      default: {
        const size_t at = inPlace ? v.sendDispls[static_cast<size_t>(r)] : 0;
        for (size_t i = 0; i < recvElems; ++i) put(expected, at + i, t.reduction(static_cast<size_t>(r) * max + i));
      }
    }
  }
  return out;
}

inline std::vector<VecRankIo> prepareVector(const Spec& s, int n, uint64_t seed) {
  return dispatchType(s.dtype, [&]<typename T>() { return prepareVectorAs<T>(s, tablesFor<T>(s, n), n, seed); });
}

}  // namespace occl::test
