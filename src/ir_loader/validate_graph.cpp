// Cross-rank checks: connection uniqueness, send/receive matching, dependencies, and deadlock
// freedom. Every tile runs each block's steps once, in order, chunk by chunk; a step waits for its
// dependency, a receiving chunk for its matching send, a sending chunk for room in its connector.
// How much room there is is a runtime setting, so validation asks only that the waits of one tile
// (capacity.hpp) form an acyclic graph with unbounded connectors: a program that deadlocks even
// then is rejected; the slots it needs on top are minConnectorSlots()'s answer. The same graph's
// order drives markPostOps(), which finds where a reduction completes.
#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir_loader/validate_graph.hpp"

namespace occl::ir {
namespace {

// Both ends of one directed connection (sender rank, receiver rank, channel).
struct ConnectionEnds {
  int32_t sendBlock = -1;
  int32_t recvBlock = -1;
};
using ConnectionKey = std::tuple<int32_t, int32_t, int32_t>;

constexpr size_t kMaxCycleShown = 16;

class CrossRankChecker {
 public:
  CrossRankChecker(const Program& p, ErrorList& errors) : p_(p), errors_(errors), steps_(p), sender_(steps_.size(), -1) {}

  const StepIndex& steps() const { return steps_; }
  const std::vector<int64_t>& order() const { return order_; }
  const std::vector<int64_t>& sender() const { return sender_; }
  std::optional<ChunkWaitGraph> takeGraph() { return std::move(graph_); }

  void run() {
    collectConnections();
    if (!errors_.empty()) return;
    for (const auto& [key, ends] : connections_) {
      if (errors_.full()) return;
      matchConnection(key, ends);
    }
    checkDependencies();
    if (errors_.empty()) checkAcyclic();
  }

 private:
  const Step& step(const StepRef& n) const { return p_.ranks[n.rank].blocks[n.block].steps[n.step]; }
  const BlockProgram& block(int32_t r, int32_t b) const { return p_.ranks[r].blocks[b]; }

  // "<gpu id=0>/<tb id=1>/<step s=2> (line 7)": how a message names the other end of a problem.
  std::string describe(const StepRef& n) const {
    std::string out = stepElement(n.rank, n.block, n.step);
    if (int line = step(n).sourceLine; line > 0) absl::StrAppend(&out, " (line ", line, ")");
    return out;
  }
  std::string describeBlock(int32_t r, int32_t b) const {
    std::string out = blockElement(r, b);
    if (int line = block(r, b).sourceLine; line > 0) absl::StrAppend(&out, " (line ", line, ")");
    return out;
  }
  void stepError(const StepRef& n, std::string msg) {
    errors_.add(step(n).sourceLine, stepElement(n.rank, n.block, n.step), std::move(msg));
  }

  // (a): a second threadblock on the same (peer, channel, direction) would share a connector.
  void collectConnections() {
    for (int32_t r = 0; r < p_.nRanks; ++r) {
      for (int32_t b = 0; b < static_cast<int32_t>(p_.ranks[r].blocks.size()); ++b) {
        for (bool sending : {true, false}) {
          for (int32_t peer : connectionPeers(block(r, b), sending)) addEnd(r, b, peer, sending);
        }
      }
    }
  }

  void addEnd(int32_t r, int32_t b, int32_t peer, bool sending) {
    const BlockProgram& blk = block(r, b);
    auto [it, fresh] = owner_.try_emplace({r, peer, blk.channel, sending}, b);
    if (!fresh) {
      errors_.add(blk.sourceLine, blockElement(r, b),
                  absl::StrFormat("%s peer %d on channel %d is already used by %s; each (peer, channel, direction) "
                                  "needs its own connector", sending ? "send" : "recv", peer, blk.channel,
                                  describeBlock(r, it->second)));
      return;
    }
    ConnectionEnds& ends = connections_[sending ? ConnectionKey{r, peer, blk.channel} : ConnectionKey{peer, r, blk.channel}];
    (sending ? ends.sendBlock : ends.recvBlock) = b;
  }

  // Steps of block b of rank r that send to (sending) or receive from `peer`, in program order.
  std::vector<int32_t> stepsWith(int32_t r, int32_t b, int32_t peer, bool sending) const {
    std::vector<int32_t> out;
    if (b < 0) return out;
    const BlockProgram& blk = block(r, b);
    for (int32_t s = 0; s < static_cast<int32_t>(blk.steps.size()); ++s) {
      const Step& st = blk.steps[s];
      if (sending ? stepUsesSendConnector(st.op) && sendPeerOf(blk, st) == peer : stepUsesRecvConnector(st.op) && recvPeerOf(blk, st) == peer)
        out.push_back(s);
    }
    return out;
  }

  // (b): the k-th send on a connection is received by the k-th receive, so the two sequences
  // must pair up exactly; only the first mismatch is reported, later ones are its echoes.
  void matchConnection(const ConnectionKey& key, const ConnectionEnds& ends) {
    const auto [from, to, chan] = key;
    const std::vector<int32_t> sends = stepsWith(from, ends.sendBlock, to, /*sending=*/true);
    const std::vector<int32_t> recvs = stepsWith(to, ends.recvBlock, from, /*sending=*/false);
    const size_t paired = std::min(sends.size(), recvs.size());
    MatchedConnection matched;
    for (size_t i = 0; i < paired; ++i) {
      const StepRef s{from, ends.sendBlock, sends[i]}, r{to, ends.recvBlock, recvs[i]};
      if (step(s).count != step(r).count) {
        stepError(r, absl::StrFormat("receive #%d from rank %d on channel %d has cnt=%d, but the matching send %s "
                                     "has cnt=%d", i + 1, from, chan, step(r).count, describe(s), step(s).count));
        return;
      }
      matched.sends.push_back(steps_.id(s.rank, s.block, s.step));
      matched.recvs.push_back(steps_.id(r.rank, r.block, r.step));
      sender_[matched.recvs.back()] = matched.sends.back();
    }
    matched_.push_back(std::move(matched));
    if (sends.size() > paired) {
      const StepRef s{from, ends.sendBlock, sends[paired]};
      stepError(s, ends.recvBlock < 0
                       ? absl::StrFormat("sends to rank %d on channel %d, but no threadblock of rank %d receives from "
                                         "rank %d on channel %d", to, chan, to, from, chan)
                       : absl::StrFormat("send #%d to rank %d on channel %d is never received: %s has only %d "
                                         "receive(s) from rank %d", paired + 1, to, chan,
                                         describeBlock(to, ends.recvBlock), paired, from));
    } else if (recvs.size() > paired) {
      const StepRef r{to, ends.recvBlock, recvs[paired]};
      stepError(r, ends.sendBlock < 0
                       ? absl::StrFormat("receives from rank %d on channel %d, but no threadblock of rank %d sends to "
                                         "rank %d on channel %d", from, chan, from, to, chan)
                       : absl::StrFormat("receive #%d from rank %d on channel %d is never sent: %s has only %d "
                                         "send(s) to rank %d", paired + 1, from, chan,
                                         describeBlock(from, ends.sendBlock), paired, to));
    }
  }

  // (c): a block only publishes progress after hasdep=1 steps, so waiting on any other step
  // would never finish; an unused hasdep=1 is what a dropped dependency leaves behind.
  void checkDependencies() {
    std::vector<bool> waitedOn(static_cast<size_t>(steps_.size()), false);
    for (int64_t id = 0; id < steps_.size(); ++id) {
      if (errors_.full()) return;
      const StepRef& n = steps_[id];
      const Step& st = step(n);
      if (st.depBlock < 0) continue;
      const auto& blocks = p_.ranks[n.rank].blocks;
      if (st.depBlock >= static_cast<int32_t>(blocks.size())) {
        stepError(n, absl::StrFormat("depid=%d names no threadblock (rank %d has %d)", st.depBlock, n.rank, blocks.size()));
      } else if (st.depStep >= static_cast<int32_t>(blocks[st.depBlock].steps.size())) {
        stepError(n, absl::StrFormat("deps=%d names no step of %s, which has %d steps", st.depStep,
                                     describeBlock(n.rank, st.depBlock), blocks[st.depBlock].steps.size()));
      } else {
        const StepRef target{n.rank, st.depBlock, st.depStep};
        if (!step(target).hasDep) stepError(n, absl::StrCat("depends on ", describe(target), ", which lacks hasdep=1"));
        waitedOn[steps_.id(target.rank, target.block, target.step)] = true;
      }
    }
    for (int64_t id = 0; id < steps_.size() && !errors_.full(); ++id)
      if (step(steps_[id]).hasDep && !waitedOn[id]) stepError(steps_[id], "has hasdep=1 but no step depends on it");
  }

  // (d): with unbounded connectors only program order, dependencies and matching sends wait.
  void checkAcyclic() {
    const int64_t nodes = ChunkWaitGraph::countNodes(p_);
    if (nodes > kMaxWaitGraphNodes) {
      errors_.add(0, "<algo>", absl::StrFormat("one tile has %d chunk steps (the cnt of every send or receive, 1 for "
                                               "each other step), more than the %d the deadlock check accepts",
                                               nodes, kMaxWaitGraphNodes));
      return;
    }
    graph_.emplace(p_, steps_, matched_);
    const ChunkWaitGraph::Schedule schedule = graph_->schedule(kUnboundedSlots);
    if (!schedule.cycle.empty()) {
      reportCycle(schedule.cycle);
      graph_.reset();
      return;
    }
    // A step is done with its last chunk; that order respects every step-level wait too.
    for (int32_t node : schedule.order)
      if (graph_->lastOfStep(node)) order_.push_back(graph_->stepOf(node));
  }

  // The steps a cycle of chunks passes through: a step's consecutive chunks merge into one, and a
  // step met twice closes a shorter cycle of steps, which is the one reported.
  std::vector<int64_t> stepCycle(const std::vector<int32_t>& chunkCycle) const {
    std::vector<int64_t> cycle;
    for (int32_t node : chunkCycle)
      if (cycle.empty() || cycle.back() != graph_->stepOf(node)) cycle.push_back(graph_->stepOf(node));
    if (cycle.size() > 1 && cycle.front() == cycle.back()) cycle.pop_back();
    std::map<int64_t, std::ptrdiff_t> firstAt;
    for (std::ptrdiff_t i = 0; i < std::ssize(cycle); ++i) {
      const auto [seen, fresh] = firstAt.try_emplace(cycle[i], i);
      if (!fresh) return {cycle.begin() + seen->second, cycle.begin() + i};
    }
    return cycle;
  }

  void reportCycle(const std::vector<int32_t>& chunkCycle) {
    const std::vector<int64_t> cycle = stepCycle(chunkCycle);
    std::string chain;
    for (size_t i = 0; i < cycle.size() && i < kMaxCycleShown; ++i)
      absl::StrAppend(&chain, describe(steps_[cycle[i]]), " -> ");
    if (cycle.size() > kMaxCycleShown) absl::StrAppend(&chain, "... -> ");
    absl::StrAppend(&chain, describe(steps_[cycle.front()]));
    stepError(steps_[cycle.front()],
              absl::StrFormat("deadlock: %d steps wait on each other in a cycle (each must finish before the next "
                              "can): %s", cycle.size(), chain));
  }

  const Program& p_;
  ErrorList& errors_;
  StepIndex steps_;
  std::vector<int64_t> sender_;  // step whose send a receiving step consumes, -1 if none
  std::vector<int64_t> order_;   // steps in an order that respects every wait (when acyclic)
  std::map<ConnectionKey, ConnectionEnds> connections_;
  std::vector<MatchedConnection> matched_;
  std::optional<ChunkWaitGraph> graph_;  // once (d) passed
  std::map<std::tuple<int32_t, int32_t, int32_t, bool>, int32_t> owner_;  // (rank, peer, channel, sending) -> block
};

// Replays one tile in wait order, tracking for every chunk how many ranks' inputs it sums, to
// find the steps whose reduction completes a value (the ones avg must divide). Counting instead
// of tracking sets cannot spot double counting, but that would make the sum wrong anyway.
class PostOpMarker {
 public:
  PostOpMarker(Program& p, const CrossRankChecker& graph)
      : p_(p), g_(graph), messages_(static_cast<size_t>(graph.steps().size())) {}

  bool run() {
    int64_t work = 0;
    for (int64_t id = 0; id < g_.steps().size(); ++id) work += step(g_.steps()[id]).count;
    if (work > kMaxReplayChunks) return false;
    for (int64_t i : g_.order()) apply(i);
    return true;
  }

 private:
  static constexpr int64_t kMaxReplayChunks = 1 << 22;

  Step& step(const StepRef& n) { return p_.ranks[n.rank].blocks[n.block].steps[n.step]; }

  // A program run only in place aliases output to input for AllReduce/Reduce/Broadcast; other
  // layouts (and programs that also run out of place) keep them apart.
  BufferKind resolve(BufferKind b) const {
    const bool alias = p_.inPlace && !p_.outOfPlace && collInfo(p_.coll).inPlace == InPlaceRule::Same;
    return alias && b == BufferKind::Output ? BufferKind::Input : b;
  }

  // Contributions held by a chunk: an input chunk starts with its own rank's, others with none.
  int32_t& cell(int32_t rank, BufferKind b, int64_t chunk) {
    b = resolve(b);
    const uint64_t key = (static_cast<uint64_t>(rank) << 40) | (static_cast<uint64_t>(b) << 32) | static_cast<uint64_t>(chunk);
    return state_.try_emplace(key, b == BufferKind::Input ? 1 : 0).first->second;
  }

  void apply(int64_t i) {
    const StepRef& n = g_.steps()[i];
    Step& st = step(n);
    const OpType op = st.op;
    if (op == OpType::Nop) return;
    const bool reduces = op == OpType::RecvReduceCopy || op == OpType::RecvReduceCopySend || op == OpType::Reduce;
    bool completes = reduces;
    std::vector<int32_t>* out = stepUsesSendConnector(op) ? &messages_[i] : nullptr;
    for (int32_t k = 0; k < st.count; ++k) {
      const int32_t in = stepUsesRecvConnector(op) ? messages_[g_.sender()[i]][k] : 0;
      const int32_t src = stepReadsSrc(op) ? cell(n.rank, st.srcBuf, st.srcOff + k) : 0;
      int32_t value = in + src;
      if (op == OpType::Reduce) value += cell(n.rank, st.dstBuf, st.dstOff + k);
      if (stepWritesDst(op)) cell(n.rank, st.dstBuf, st.dstOff + k) = value;
      if (out != nullptr) out->push_back(value);
      completes = completes && value == p_.nRanks;
    }
    st.postOp = completes && st.count > 0;
  }

  Program& p_;
  const CrossRankChecker& g_;
  std::vector<std::vector<int32_t>> messages_;  // per sending step: contributions of each chunk sent
  std::map<uint64_t, int32_t> state_;
};

}  // namespace

std::optional<ChunkWaitGraph> checkCrossRank(const Program& p, ErrorList& errors) {
  CrossRankChecker checker(p, errors);
  checker.run();
  return checker.takeGraph();
}

bool markPostOps(Program& p) {
  ErrorList errors;
  CrossRankChecker graph(p, errors);
  graph.run();
  if (!errors.empty()) return false;
  return PostOpMarker(p, graph).run();
}

}  // namespace occl::ir
