// Test support: the project's MSCCL-IR fixtures (tests/data/msccl-ir) and MSCCLang's where
// ../shared/msccl-ir exists, edits of their text, the loader's errors as gtest assertions, and an
// oracle that runs a program's tiles the way the executor does. For the ir_loader suites and the
// occl-ir CLI's.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "ir_loader/msccl_ir.hpp"
#include "ir_loader/validate.hpp"

namespace occl::ir::test {

inline const std::string kDataDir = std::string(OCCL_TEST_DATA_DIR) + "/msccl-ir/";
inline const std::string kSharedDir = std::string(OCCL_SHARED_DIR) + "/msccl-ir/";

// The project's fixtures the tests below mutate.
constexpr const char* kRing = "ring_allreduce_4r.xml";
constexpr const char* kAllGather = "ring_allgather_4r.xml";
constexpr const char* kReduceScatter = "ring_reduce_scatter_4r.xml";
constexpr const char* kChainReduce = "chain_reduce_4r_root1.xml";
constexpr const char* kAllToAll = "direct_alltoall_4r.xml";
constexpr const char* kAllPairs = "allpairs_allreduce_4r.xml";
constexpr const char* kSplitBlocks = "edge_allreduce_2r_split_blocks.xml";
constexpr const char* kUnknownAttributes = "edge_unknown_attributes_2r.xml";

// A file's text; one that cannot be read fails the test (every path given here should exist).
inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A project fixture (tests/data/msccl-ir/NAME): part of the repository, so always there.
inline std::string fixture(const std::string& name) { return readFile(kDataDir + name); }

inline std::string replaceOnce(std::string text, std::string_view from, std::string_view to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "fixture no longer contains: " << from;
    return text;
  }
  return text.replace(at, from.size(), to);
}

std::string allErrors(const LoadResult& r) { return formatErrors(r.errors, "test"); }

// Passes when some error has this line (0 = any), mentions `element` and contains `message`.
inline ::testing::AssertionResult HasError(const LoadResult& r, int line, std::string_view element, std::string_view message) {
  if (r.ok()) return ::testing::AssertionFailure() << "loaded without errors";
  for (const LoadError& e : r.errors)
    if ((line == 0 || e.line == line) && e.element.find(element) != std::string::npos &&
        e.message.find(message) != std::string::npos)
      return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "no error at line " << line << " on " << element << " containing '"
                                       << message << "'; got:\n" << allErrors(r);
}

::testing::AssertionResult HasError(std::vector<LoadError> errors, int line, std::string_view element,
                                    std::string_view message) {
  LoadResult r;
  r.errors = std::move(errors);
  return HasError(r, line, element, message);
}

// An oracle independent of the wait graph: runs `tiles` tiles of a program the way the executor
// does, with `slots` slots per connector, and says whether every block finishes. A block takes
// its next chunk once its receive connector has data and its send connector has room, and at a
// step's sub 0 once its dependency has completed that step in this tile. A chunk that may go stays
// allowed until its block takes it, so the order blocks take turns in cannot change the outcome.
inline bool runsToCompletion(const Program& p, int32_t slots, int32_t tiles) {
  struct Cursor {
    int32_t tile = 0, step = 0, sub = 0;
  };
  struct Fifo {
    int64_t sent = 0, received = 0;
  };
  std::map<std::tuple<int32_t, int32_t, int32_t>, Fifo> fifos;  // (sender, receiver, channel)
  std::vector<std::vector<Cursor>> at(p.ranks.size());
  for (size_t r = 0; r < p.ranks.size(); ++r) at[r].resize(p.ranks[r].blocks.size());
  auto stepDone = [&](int32_t r, int32_t b, int32_t tile, int32_t step) {
    const Cursor& c = at[r][b];
    return c.tile > tile || (c.tile == tile && c.step > step);
  };
  // Advances block b of rank r by one chunk, step or tile if it may; false when it must wait.
  auto advance = [&](int32_t r, int32_t b) {
    const BlockProgram& block = p.ranks[r].blocks[b];
    Cursor& c = at[r][b];
    if (c.tile == tiles) return false;
    if (c.step == static_cast<int32_t>(block.steps.size())) {
      c = {c.tile + 1, 0, 0};
      return true;
    }
    const Step& st = block.steps[c.step];
    if (c.sub == 0 && st.depBlock >= 0 && !stepDone(r, st.depBlock, c.tile, st.depStep)) return false;
    if (c.sub == st.count) {
      c = {c.tile, c.step + 1, 0};
      return true;
    }
    Fifo* in = stepUsesRecvConnector(st.op) ? &fifos[{recvPeerOf(block, st), r, block.channel}] : nullptr;
    Fifo* out = stepUsesSendConnector(st.op) ? &fifos[{r, sendPeerOf(block, st), block.channel}] : nullptr;
    if ((in != nullptr && in->received == in->sent) || (out != nullptr && out->sent - out->received == slots))
      return false;
    if (in != nullptr) ++in->received;
    if (out != nullptr) ++out->sent;
    ++c.sub;
    return true;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int32_t r = 0; r < static_cast<int32_t>(p.ranks.size()); ++r)
      for (int32_t b = 0; b < static_cast<int32_t>(p.ranks[r].blocks.size()); ++b)
        while (advance(r, b)) moved = true;
  }
  for (const std::vector<Cursor>& blocks : at)
    for (const Cursor& c : blocks)
      if (c.tile != tiles) return false;
  return true;
}

inline Step makeStep(OpType op, int32_t chunk) {
  Step st;
  st.op = op;
  st.srcOff = st.dstOff = chunk;
  return st;
}
// minConnectorSlots(p) is exact: with that many slots several tiles run through, with one fewer
// even the first tile hangs.
inline ::testing::AssertionResult SlotsMatchExecution(const Program& p) {
  const int32_t slots = minConnectorSlots(p);
  if (slots < 1) return ::testing::AssertionFailure() << "minConnectorSlots = " << slots;
  if (!runsToCompletion(p, slots, 3)) return ::testing::AssertionFailure() << "hangs with " << slots << " slots";
  if (slots > 1 && runsToCompletion(p, slots - 1, 1))
    return ::testing::AssertionFailure() << "runs with " << slots - 1 << " slots, fewer than " << slots;
  return ::testing::AssertionSuccess();
}
// Each file of tests/data/msccl-ir/invalid with the errors it must be rejected with, exactly.
struct InvalidFixture {
  const char* file;
  const char* errors;  // formatErrors(errors, file)
};

inline constexpr InvalidFixture kInvalidFixtures[] = {
    {"deadlock_2r.xml",
     "deadlock_2r.xml: line 6, <gpu id=0>/<tb id=0>/<step s=1>: deadlock: 4 steps wait on each other in a cycle (each "
     "must finish before the next can): <gpu id=0>/<tb id=0>/<step s=1> (line 6) -> <gpu id=1>/<tb id=0>/<step s=0> "
     "(line 11) -> <gpu id=1>/<tb id=0>/<step s=1> (line 12) -> <gpu id=0>/<tb id=0>/<step s=0> (line 5) -> <gpu "
     "id=0>/<tb id=0>/<step s=1> (line 6)\n"},
    {"unmatched_send_2r.xml",
     "unmatched_send_2r.xml: line 6, <gpu id=0>/<tb id=0>/<step s=1>: sends to rank 1 on channel 0, but no threadblock "
     "of rank 1 receives from rank 0 on channel 0\n"},
};

}  // namespace occl::ir::test
