// The wait graph of one tile at chunk granularity, and the connector slots a program needs.
//
// One tile is enough: every block runs tile t before tile t+1, and a wait in tile t+1 is on a
// node of tile t+1 or (room for one of the first `slots` chunks of a connection) of tile t. No
// wait points from an earlier tile to a later one, so a cycle of waits lies within one tile and
// uses only waits within it, which are the same in every tile: tile 0's graph decides.
#include "ir_loader/capacity.hpp"

#include <algorithm>
#include <optional>

#include "ir_loader/program_queries.hpp"

namespace occl::ir {
namespace {

// A step that neither sends nor receives waits on nothing outside its block but, at its first
// chunk, its dependency: its chunks form a chain nothing else enters, so one node stands for all.
int32_t nodesOf(const Step& st) { return stepUsesSendConnector(st.op) || stepUsesRecvConnector(st.op) ? std::max<int32_t>(st.count, 1) : 1; }

}  // namespace

StepIndex::StepIndex(const Program& p) {
  firstOfBlock_.resize(p.ranks.size());
  for (size_t r = 0; r < p.ranks.size(); ++r) {
    const std::vector<BlockProgram>& blocks = p.ranks[r].blocks;
    for (size_t b = 0; b < blocks.size(); ++b) {
      firstOfBlock_[r].push_back(size());
      for (size_t s = 0; s < blocks[b].steps.size(); ++s)
        steps_.push_back({static_cast<int32_t>(r), static_cast<int32_t>(b), static_cast<int32_t>(s)});
    }
  }
}

int64_t ChunkWaitGraph::countNodes(const Program& p) {
  int64_t nodes = 0;
  for (const RankProgram& rank : p.ranks)
    for (const BlockProgram& block : rank.blocks)
      for (const Step& st : block.steps) nodes += nodesOf(st);
  return nodes;
}

ChunkWaitGraph::ChunkWaitGraph(const Program& p, const StepIndex& index, const std::vector<MatchedConnection>& connections) {
  auto stepAt = [&](const StepRef& ref) -> const Step& { return p.ranks[ref.rank].blocks[ref.block].steps[ref.step]; };
  steps_.resize(static_cast<size_t>(index.size()));
  int32_t next = 0;
  for (int64_t id = 0; id < index.size(); ++id) {
    StepNodes& s = steps_[id];
    s.first = next;
    s.count = nodesOf(stepAt(index[id]));
    s.continuesBlock = index[id].step > 0;
    next += s.count;
    stepOf_.insert(stepOf_.end(), static_cast<size_t>(s.count), static_cast<int32_t>(id));
  }
  for (int64_t id = 0; id < index.size(); ++id) {
    const Step& st = stepAt(index[id]);
    if (st.depBlock < 0) continue;
    const StepNodes& dep = steps_[index.id(index[id].rank, st.depBlock, st.depStep)];
    steps_[id].depNode = dep.first + dep.count - 1;  // the executor waits for the whole step
  }
  for (const MatchedConnection& c : connections) addConnection(c);
  indexFixedWaits();
}

// Numbers the chunks of one connection in the order they travel: the k-th chunk sent is the k-th
// received, since matched steps have equal cnt and each end runs its steps in order.
void ChunkWaitGraph::addConnection(const MatchedConnection& c) {
  const auto conn = static_cast<int32_t>(connections_.size());
  ConnectionChunks& chunks = connections_.emplace_back();
  for (size_t i = 0; i < c.sends.size(); ++i) {
    StepNodes& send = steps_[c.sends[i]];
    StepNodes& recv = steps_[c.recvs[i]];
    send.sendConn = recv.recvConn = conn;
    send.sendChunk = recv.recvChunk = static_cast<int32_t>(chunks.sendNode.size());
    recv.senderFirst = send.first;
    for (int32_t k = 0; k < send.count; ++k) {
      chunks.sendNode.push_back(send.first + k);
      chunks.recvNode.push_back(recv.first + k);
    }
  }
  maxChunksPerConnection_ = std::max(maxChunksPerConnection_, static_cast<int32_t>(chunks.sendNode.size()));
}

void ChunkWaitGraph::indexFixedWaits() {
  const auto n = static_cast<int32_t>(stepOf_.size());
  fixedWaits_.assign(n, 0);
  waiterStart_.assign(n + 1, 0);
  int32_t waits[kMaxWaits];
  for (int32_t node = 0; node < n; ++node) {
    fixedWaits_[node] = waitsIgnoringCapacity(node, waits);
    for (int j = 0; j < fixedWaits_[node]; ++j) ++waiterStart_[waits[j] + 1];
  }
  for (int32_t node = 0; node < n; ++node) waiterStart_[node + 1] += waiterStart_[node];
  waiters_.resize(waiterStart_[n]);
  std::vector<int32_t> fill(waiterStart_.begin(), waiterStart_.end() - 1);
  for (int32_t node = 0; node < n; ++node) {
    const int k = waitsIgnoringCapacity(node, waits);
    for (int j = 0; j < k; ++j) waiters_[fill[waits[j]]++] = node;
  }
}

// Program order (the previous chunk, or the previous step's last), the dependency (at sub 0), and
// for a receive the node sending the same chunk.
int ChunkWaitGraph::waitsIgnoringCapacity(int32_t node, int32_t* out) const {
  const StepNodes& s = steps_[stepOf_[node]];
  const int32_t sub = node - s.first;
  int k = 0;
  if (sub > 0 || s.continuesBlock) out[k++] = node - 1;
  if (sub == 0 && s.depNode >= 0) out[k++] = s.depNode;
  if (s.senderFirst >= 0) out[k++] = s.senderFirst + sub;
  return k;
}

// Sending chunk k needs a free slot: the receiver must have consumed chunk k - slots.
int32_t ChunkWaitGraph::capacityWait(int32_t node, int32_t slots) const {
  const StepNodes& s = steps_[stepOf_[node]];
  if (s.sendConn < 0) return -1;
  const int64_t chunk = int64_t{s.sendChunk} + (node - s.first);
  return chunk >= slots ? connections_[s.sendConn].recvNode[chunk - slots] : -1;
}

// The converse: the node sending chunk j + slots waits for this node to consume chunk j.
int32_t ChunkWaitGraph::waitingForRoom(int32_t node, int32_t slots) const {
  const StepNodes& s = steps_[stepOf_[node]];
  if (s.recvConn < 0) return -1;
  const std::vector<int32_t>& senders = connections_[s.recvConn].sendNode;
  const int64_t chunk = int64_t{s.recvChunk} + (node - s.first) + slots;
  return chunk < static_cast<int64_t>(senders.size()) ? senders[chunk] : -1;
}

bool ChunkWaitGraph::lastOfStep(int32_t node) const {
  const StepNodes& s = steps_[stepOf_[node]];
  return node == s.first + s.count - 1;
}

// Kahn's algorithm: a node is ready once everything it waits for is done.
ChunkWaitGraph::Schedule ChunkWaitGraph::schedule(int32_t slots) const {
  std::vector<int32_t> pending = fixedWaits_;
  for (const ConnectionChunks& c : connections_)
    for (int64_t k = slots; k < static_cast<int64_t>(c.sendNode.size()); ++k) ++pending[c.sendNode[k]];
  Schedule out;
  std::vector<int32_t>& ready = out.order;
  ready.reserve(pending.size());
  for (int32_t node = 0; node < static_cast<int32_t>(pending.size()); ++node)
    if (pending[node] == 0) ready.push_back(node);
  auto release = [&](int32_t node) {
    if (--pending[node] == 0) ready.push_back(node);
  };
  for (size_t head = 0; head < ready.size(); ++head) {
    const int32_t done = ready[head];
    for (int32_t e = waiterStart_[done]; e < waiterStart_[done + 1]; ++e) release(waiters_[e]);
    if (const int32_t sender = waitingForRoom(done, slots); sender >= 0) release(sender);
  }
  if (ready.size() == pending.size()) return out;
  out.order.clear();
  out.cycle = findCycle(pending, slots);
  return out;
}

// Every node Kahn could not order waits on some other such node, so walking those waits from any
// of them must come back to a node already seen: that loop is the cycle.
std::vector<int32_t> ChunkWaitGraph::findCycle(const std::vector<int32_t>& pending, int32_t slots) const {
  std::vector<int32_t> walk, seenAt(pending.size(), -1);
  int32_t cur = static_cast<int32_t>(std::find_if(pending.begin(), pending.end(), [](int32_t p) { return p > 0; }) -
                                     pending.begin());
  while (seenAt[cur] < 0) {
    seenAt[cur] = static_cast<int32_t>(walk.size());
    walk.push_back(cur);
    int32_t waits[kMaxWaits];
    int k = waitsIgnoringCapacity(cur, waits);
    if (const int32_t room = capacityWait(cur, slots); room >= 0) waits[k++] = room;
    cur = *std::find_if(waits, waits + k, [&](int32_t w) { return pending[w] > 0; });
  }
  std::vector<int32_t> cycle(walk.begin() + seenAt[cur], walk.end());
  std::reverse(cycle.begin(), cycle.end());  // the walk followed waits backwards
  return cycle;
}

}  // namespace occl::ir
