// Internal to src/ir_loader: the wait graph of one tile at chunk granularity, which the deadlock
// check (validate_graph.cpp, "(d)") searches with unbounded connectors and minConnectorSlots()
// searches with a given number of connector slots.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "ir_loader/program.hpp"

namespace occl::ir {

// Graphs with more nodes are refused rather than searched: bounds the time and memory a hostile
// program can cost (a few hundred MiB and seconds at most), far above any real program's size.
inline constexpr int64_t kMaxWaitGraphNodes = int64_t{1} << 22;

// Slot count with which no send ever waits for room.
inline constexpr int32_t kUnboundedSlots = std::numeric_limits<int32_t>::max();

struct StepRef {
  int32_t rank, block, step;
};

// Every step of a program, numbered rank by rank, block by block, in program order: the step ids
// the cross-rank checks and the wait graph share.
class StepIndex {
 public:
  explicit StepIndex(const Program& p);

  int64_t size() const { return static_cast<int64_t>(steps_.size()); }
  const StepRef& operator[](int64_t id) const { return steps_[static_cast<size_t>(id)]; }
  int64_t id(int32_t rank, int32_t block, int32_t step) const { return firstOfBlock_[rank][block] + step; }

 private:
  std::vector<StepRef> steps_;
  std::vector<std::vector<int64_t>> firstOfBlock_;
};

// One directed connection (sender, receiver, channel): its send steps and its receive steps in
// program order, sends[i] received by recvs[i] with equal cnt (step ids).
struct MatchedConnection {
  std::vector<int64_t> sends, recvs;
};

// Node = (rank, block, step, sub): one chunk of a step, in the order the executor runs them (a
// step that neither sends nor receives is a single node). A node waits for the node before it in
// its block, at sub 0 for the last node of its dependency, when it receives for the node that
// sends its chunk, and when it sends chunk k of a connection for the node that receives chunk
// k - slots there (the connector is full until then). A fused step (rcs, rrs, rrcs) needs both at
// once, so it is one node with both waits. Needs a program whose connections passed matching and
// whose dependencies name existing steps.
class ChunkWaitGraph {
 public:
  // The node count, without building the graph, so that a huge one can be refused first.
  static int64_t countNodes(const Program& p);

  ChunkWaitGraph(const Program& p, const StepIndex& steps, const std::vector<MatchedConnection>& connections);

  // Either `order` lists every node after all those it waits for, or the nodes wait on each
  // other: `cycle` then holds a loop of them, each finishing before the next can, the last
  // before the first.
  struct Schedule {
    std::vector<int32_t> order;
    std::vector<int32_t> cycle;
  };
  Schedule schedule(int32_t slots) const;
  bool deadlockFree(int32_t slots) const { return schedule(slots).cycle.empty(); }

  int64_t stepOf(int32_t node) const { return stepOf_[static_cast<size_t>(node)]; }
  bool lastOfStep(int32_t node) const;
  // The most chunks one connection carries per tile: with that many slots no send waits for room.
  int32_t maxChunksPerConnection() const { return maxChunksPerConnection_; }

 private:
  struct StepNodes {
    int32_t first = 0;            // its first node; its nodes are consecutive
    int32_t count = 0;
    bool continuesBlock = false;  // a step precedes it in its block
    int32_t depNode = -1;         // last node of the step it depends on
    int32_t senderFirst = -1;     // first node of the step whose chunks it receives
    int32_t sendConn = -1, sendChunk = 0;  // connection it sends on, chunk index of its first node
    int32_t recvConn = -1, recvChunk = 0;  // connection it receives from, likewise
  };
  // Per chunk of a connection (its index within the tile): the node sending it, the node receiving it.
  struct ConnectionChunks {
    std::vector<int32_t> sendNode, recvNode;
  };

  static constexpr int kMaxWaits = 4;  // program order, dependency, matching send, room

  void addConnection(const MatchedConnection& c);
  void indexFixedWaits();
  int waitsIgnoringCapacity(int32_t node, int32_t* out) const;
  int32_t capacityWait(int32_t node, int32_t slots) const;
  int32_t waitingForRoom(int32_t node, int32_t slots) const;
  std::vector<int32_t> findCycle(const std::vector<int32_t>& pending, int32_t slots) const;

  std::vector<StepNodes> steps_;
  std::vector<int32_t> stepOf_;  // step id of each node
  std::vector<ConnectionChunks> connections_;
  int32_t maxChunksPerConnection_ = 0;
  // Waits other than capacity never change with the slot count: kept reversed (who waits for
  // each node) in compressed rows, with the number of such waits of each node.
  std::vector<int32_t> waiterStart_, waiters_, fixedWaits_;
};

}  // namespace occl::ir
