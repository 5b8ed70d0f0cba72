// Cross-rank checks: connection uniqueness, send/receive matching, dependencies, and deadlock
// freedom. Every tile runs each block's steps once, in order; a step waits for its dependency and
// (if it receives) for the matching send. Connectors hold at least two slots, so within one tile
// a send never waits for its receiver: the waits of one tile form a graph that must be acyclic.
// The same graph's order drives markPostOps(), which finds where a reduction completes.
#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ir_loader/validate_graph.hpp"

namespace occl::ir {
namespace {

struct NodeRef {
  int32_t rank, block, step;
};

// Both ends of one directed connection (sender rank, receiver rank, channel).
struct ConnectionEnds {
  int32_t sendBlock = -1;
  int32_t recvBlock = -1;
};
using ConnectionKey = std::tuple<int32_t, int32_t, int32_t>;

constexpr size_t kMaxCycleShown = 16;

class CrossRankChecker {
 public:
  CrossRankChecker(const Program& p, ErrorList& errors) : p_(p), errors_(errors) {}

  const std::vector<NodeRef>& nodes() const { return nodes_; }
  const std::vector<int64_t>& order() const { return order_; }
  const std::vector<int64_t>& sender() const { return sender_; }

  void run() {
    indexNodes();
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
  const Step& step(const NodeRef& n) const { return p_.ranks[n.rank].blocks[n.block].steps[n.step]; }
  const BlockProgram& block(int32_t r, int32_t b) const { return p_.ranks[r].blocks[b]; }
  int64_t node(int32_t r, int32_t b, int32_t s) const { return base_[r][b] + s; }

  // "<gpu id=0>/<tb id=1>/<step s=2> (line 7)": how a message names the other end of a problem.
  std::string describe(const NodeRef& n) const {
    std::string out = stepElement(n.rank, n.block, n.step);
    if (int line = step(n).sourceLine; line > 0) absl::StrAppend(&out, " (line ", line, ")");
    return out;
  }
  std::string describeBlock(int32_t r, int32_t b) const {
    std::string out = blockElement(r, b);
    if (int line = block(r, b).sourceLine; line > 0) absl::StrAppend(&out, " (line ", line, ")");
    return out;
  }
  void stepError(const NodeRef& n, std::string msg) {
    errors_.add(step(n).sourceLine, stepElement(n.rank, n.block, n.step), std::move(msg));
  }

  void indexNodes() {
    base_.resize(p_.ranks.size());
    for (int32_t r = 0; r < p_.nRanks; ++r) {
      for (int32_t b = 0; b < static_cast<int32_t>(p_.ranks[r].blocks.size()); ++b) {
        base_[r].push_back(static_cast<int64_t>(nodes_.size()));
        for (int32_t s = 0; s < static_cast<int32_t>(block(r, b).steps.size()); ++s) nodes_.push_back({r, b, s});
      }
    }
    sender_.assign(nodes_.size(), -1);
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
      if (sending ? opSends(st.op) && sendPeerOf(blk, st) == peer : opReceives(st.op) && recvPeerOf(blk, st) == peer)
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
    for (size_t i = 0; i < paired; ++i) {
      const NodeRef s{from, ends.sendBlock, sends[i]}, r{to, ends.recvBlock, recvs[i]};
      if (step(s).count != step(r).count) {
        stepError(r, absl::StrFormat("receive #%d from rank %d on channel %d has cnt=%d, but the matching send %s "
                                     "has cnt=%d", i + 1, from, chan, step(r).count, describe(s), step(s).count));
        return;
      }
      sender_[node(r.rank, r.block, r.step)] = node(s.rank, s.block, s.step);
    }
    if (sends.size() > paired) {
      const NodeRef s{from, ends.sendBlock, sends[paired]};
      stepError(s, ends.recvBlock < 0
                       ? absl::StrFormat("sends to rank %d on channel %d, but no threadblock of rank %d receives from "
                                         "rank %d on channel %d", to, chan, to, from, chan)
                       : absl::StrFormat("send #%d to rank %d on channel %d is never received: %s has only %d "
                                         "receive(s) from rank %d", paired + 1, to, chan,
                                         describeBlock(to, ends.recvBlock), paired, from));
    } else if (recvs.size() > paired) {
      const NodeRef r{to, ends.recvBlock, recvs[paired]};
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
    std::vector<bool> waitedOn(nodes_.size(), false);
    for (const NodeRef& n : nodes_) {
      if (errors_.full()) return;
      const Step& st = step(n);
      if (st.depBlock < 0) continue;
      const auto& blocks = p_.ranks[n.rank].blocks;
      if (st.depBlock >= static_cast<int32_t>(blocks.size())) {
        stepError(n, absl::StrFormat("depid=%d names no threadblock (rank %d has %d)", st.depBlock, n.rank, blocks.size()));
      } else if (st.depStep >= static_cast<int32_t>(blocks[st.depBlock].steps.size())) {
        stepError(n, absl::StrFormat("deps=%d names no step of %s, which has %d steps", st.depStep,
                                     describeBlock(n.rank, st.depBlock), blocks[st.depBlock].steps.size()));
      } else {
        const NodeRef target{n.rank, st.depBlock, st.depStep};
        if (!step(target).hasDep) stepError(n, absl::StrCat("depends on ", describe(target), ", which lacks hasdep=1"));
        waitedOn[node(target.rank, target.block, target.step)] = true;
      }
    }
    for (size_t i = 0; i < nodes_.size() && !errors_.full(); ++i)
      if (step(nodes_[i]).hasDep && !waitedOn[i]) stepError(nodes_[i], "has hasdep=1 but no step depends on it");
  }

  // What node i waits for: its predecessor in the block, its dependency, its matching send.
  int preds(int64_t i, int64_t out[3]) const {
    const NodeRef& n = nodes_[i];
    const Step& st = step(n);
    int k = 0;
    if (n.step > 0) out[k++] = i - 1;
    if (st.depBlock >= 0) out[k++] = node(n.rank, st.depBlock, st.depStep);
    if (sender_[i] >= 0) out[k++] = sender_[i];
    return k;
  }

  // (d): Kahn's algorithm; whatever it cannot order lies on or behind a cycle.
  void checkAcyclic() {
    const int64_t n = static_cast<int64_t>(nodes_.size());
    std::vector<int64_t> succStart(n + 1, 0), succ, indeg(n, 0), pre(3);
    for (int64_t i = 0; i < n; ++i) {
      const int k = preds(i, pre.data());
      indeg[i] = k;
      for (int j = 0; j < k; ++j) ++succStart[pre[j] + 1];
    }
    for (int64_t i = 0; i < n; ++i) succStart[i + 1] += succStart[i];
    succ.resize(succStart[n]);
    std::vector<int64_t> fill(succStart.begin(), succStart.end() - 1);
    for (int64_t i = 0; i < n; ++i) {
      const int k = preds(i, pre.data());
      for (int j = 0; j < k; ++j) succ[fill[pre[j]]++] = i;
    }
    std::vector<int64_t>& ready = order_;
    for (int64_t i = 0; i < n; ++i)
      if (indeg[i] == 0) ready.push_back(i);
    for (size_t head = 0; head < ready.size(); ++head)
      for (int64_t e = succStart[ready[head]]; e < succStart[ready[head] + 1]; ++e)
        if (--indeg[succ[e]] == 0) ready.push_back(succ[e]);
    if (static_cast<int64_t>(ready.size()) == n) return;
    const auto stuck = std::find_if(indeg.begin(), indeg.end(), [](int64_t d) { return d > 0; });
    reportCycle(stuck - indeg.begin(), indeg);
  }

  // Every unordered node waits on some unordered node, so walking those waits from any of them
  // must come back to a node already seen: that loop is the cycle.
  void reportCycle(int64_t start, const std::vector<int64_t>& indeg) {
    std::vector<int64_t> path, pre(3);
    std::map<int64_t, size_t> seenAt;
    int64_t cur = start;
    while (seenAt.find(cur) == seenAt.end()) {
      seenAt[cur] = path.size();
      path.push_back(cur);
      const int k = preds(cur, pre.data());
      for (int j = 0; j < k; ++j)
        if (indeg[pre[j]] > 0) {
          cur = pre[j];
          break;
        }
    }
    std::vector<int64_t> cycle(path.begin() + static_cast<std::ptrdiff_t>(seenAt[cur]), path.end());
    std::reverse(cycle.begin(), cycle.end());  // the walk followed waits backwards
    std::string chain;
    for (size_t i = 0; i < cycle.size() && i < kMaxCycleShown; ++i) absl::StrAppend(&chain, describe(nodes_[cycle[i]]), " -> ");
    if (cycle.size() > kMaxCycleShown) absl::StrAppend(&chain, "... -> ");
    absl::StrAppend(&chain, describe(nodes_[cycle.front()]));
    stepError(nodes_[cycle.front()],
              absl::StrFormat("deadlock: %d steps wait on each other in a cycle (each must finish before the next "
                              "can): %s", cycle.size(), chain));
  }

  const Program& p_;
  ErrorList& errors_;
  std::vector<std::vector<int64_t>> base_;  // first node of (rank, block)
  std::vector<NodeRef> nodes_;
  std::vector<int64_t> sender_;  // node whose send a receiving node consumes, -1 if none
  std::vector<int64_t> order_;   // nodes in an order that respects every wait (when acyclic)
  std::map<ConnectionKey, ConnectionEnds> connections_;
  std::map<std::tuple<int32_t, int32_t, int32_t, bool>, int32_t> owner_;  // (rank, peer, channel, sending) -> block
};

// Replays one tile in wait order, tracking for every chunk how many ranks' inputs it sums, to
// find the steps whose reduction completes a value (the ones avg must divide). Counting instead
// of tracking sets cannot spot double counting, but that would make the sum wrong anyway.
class PostOpMarker {
 public:
  PostOpMarker(Program& p, const CrossRankChecker& graph) : p_(p), g_(graph), messages_(graph.nodes().size()) {}

  bool run() {
    int64_t work = 0;
    for (const NodeRef& n : g_.nodes()) work += step(n).count;
    if (work > kMaxReplayChunks) return false;
    for (int64_t i : g_.order()) apply(i);
    return true;
  }

 private:
  static constexpr int64_t kMaxReplayChunks = 1 << 22;

  Step& step(const NodeRef& n) { return p_.ranks[n.rank].blocks[n.block].steps[n.step]; }

  // A program run only in place aliases output to input for AllReduce/Reduce/Broadcast; other
  // layouts (and programs that also run out of place) keep them apart.
  BufferKind resolve(BufferKind b) const {
    const bool alias = p_.inPlace && !p_.outOfPlace && (p_.coll == CollKind::AllReduce || p_.coll == CollKind::Reduce ||
                                      p_.coll == CollKind::Broadcast);
    return alias && b == BufferKind::Output ? BufferKind::Input : b;
  }

  // Contributions held by a chunk: an input chunk starts with its own rank's, others with none.
  int32_t& cell(int32_t rank, BufferKind b, int64_t chunk) {
    b = resolve(b);
    const uint64_t key = (static_cast<uint64_t>(rank) << 40) | (static_cast<uint64_t>(b) << 32) | static_cast<uint64_t>(chunk);
    return state_.try_emplace(key, b == BufferKind::Input ? 1 : 0).first->second;
  }

  void apply(int64_t i) {
    const NodeRef& n = g_.nodes()[i];
    Step& st = step(n);
    const OpType op = st.op;
    if (op == OpType::Nop) return;
    const bool reduces = op == OpType::RecvReduceCopy || op == OpType::RecvReduceCopySend || op == OpType::Reduce;
    bool completes = reduces;
    std::vector<int32_t>* out = opSends(op) ? &messages_[i] : nullptr;
    for (int32_t k = 0; k < st.count; ++k) {
      const int32_t in = opReceives(op) ? messages_[g_.sender()[i]][k] : 0;
      const int32_t src = opReadsSrc(op) ? cell(n.rank, st.srcBuf, st.srcOff + k) : 0;
      int32_t value = in + src;
      if (op == OpType::Reduce) value += cell(n.rank, st.dstBuf, st.dstOff + k);
      if (opWritesDst(op)) cell(n.rank, st.dstBuf, st.dstOff + k) = value;
      if (out != nullptr) out->push_back(value);
      completes = completes && value == p_.nRanks;
    }
    st.postOp = completes && st.count > 0;
  }

  Program& p_;
  const CrossRankChecker& g_;
  std::vector<std::vector<int32_t>> messages_;  // per sending node: contributions of each chunk sent
  std::map<uint64_t, int32_t> state_;
};

}  // namespace

void checkCrossRank(const Program& p, ErrorList& errors) { CrossRankChecker(p, errors).run(); }

bool markPostOps(Program& p) {
  ErrorList errors;
  CrossRankChecker graph(p, errors);
  graph.run();
  if (!errors.empty()) return false;
  return PostOpMarker(p, graph).run();
}

}  // namespace occl::ir
