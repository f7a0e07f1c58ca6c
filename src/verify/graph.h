// The cross-rank step graph of an algorithm: one node per step, send/receive
// pairing per (channel, sender, receiver) in FIFO order, and the
// happens-before relation built from program order, dependencies and
// send -> receive edges. Deadlocks are cycles in it; races are conflicting
// steps it leaves unordered. One slice iteration is modelled: iterations are
// identical and every edge points within one iteration or forward to the
// next, so a cycle-free iteration means a cycle-free execution.
//
// Assumes the algorithm passed ir::validateStructure.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"
#include "ir/validate.h"

namespace chorus::verify {

using NodeId = int32_t;
inline constexpr NodeId kNoNode = -1;
// Messages in flight per connection that the deadlock check allows (E205
// beyond them).
inline constexpr int kCheckedSlots = ir::kMscclSlots;

class StepGraph {
 public:
  // Builds nodes, pairs sends with receives (E201/E202/E203) and checks for
  // cycles (E204) and, where there are none, for cycles through waits for
  // a free slot with kCheckedSlots per connection (E205), appending
  // findings to `diags`.
  StepGraph(const ir::Algorithm& algo, DiagnosticList& diags);

  const ir::Algorithm& algo() const { return algo_; }
  size_t size() const { return globalTb_.size(); }
  NodeId node(int rank, int tb, int step) const { return tbs_[rankTb_[rank] + tb].first + step; }
  // A node's rank, threadblock and step come from its threadblock's entry
  // (4 bytes a step where three arrays took 12: 400 MB at 4096 ranks).
  int rankOf(NodeId n) const { return tbs_[globalTb_[n]].rank; }
  int tbOf(NodeId n) const { return tbs_[globalTb_[n]].tb; }
  int stepOf(NodeId n) const { return n - tbs_[globalTb_[n]].first; }
  const ir::Step& step(NodeId n) const {
    const Tb& t = tbs_[globalTb_[n]];
    return algo_.ranks[t.rank].tbs[t.tb].steps[n - t.first];
  }
  // Global threadblock index (0..totalTbs-1) of a node.
  int globalTbOf(NodeId n) const { return globalTb_[n]; }
  size_t totalTbs() const { return tbs_.size(); }

  // The send a receive is paired with, and vice versa (kNoNode if unmatched).
  NodeId matchedSend(NodeId recv) const { return matchedSend_[recv]; }
  NodeId matchedRecv(NodeId send) const { return matchedRecv_[send]; }

  bool fullyMatched() const { return fullyMatched_; }
  bool acyclic() const { return acyclic_; }
  // A topological order of all nodes (complete only when acyclic()).
  const std::vector<NodeId>& topoOrder() const { return topo_; }
  // Up to three happens-before predecessors: previous step, dependency, send
  // (computed, not stored: the graph costs a few ints per step).
  struct Preds {
    NodeId v[3] = {kNoNode, kNoNode, kNoNode};
    int n = 0;
    const NodeId* begin() const { return v; }
    const NodeId* end() const { return v + n; }
    size_t size() const { return static_cast<size_t>(n); }
  };
  Preds preds(NodeId n) const {
    Preds p;
    if (stepOf(n) > 0) p.v[p.n++] = n - 1;
    const ir::Step& s = step(n);
    if (s.depTb >= 0) p.v[p.n++] = node(rankOf(n), s.depTb, s.depStep);
    if (matchedSend_[n] != kNoNode) p.v[p.n++] = matchedSend_[n];
    return p;
  }

  // Happens-before by vector clocks restricted to the threadblocks in
  // `tracked` (global tb indices): only steps of those threadblocks can be
  // either argument of happensBefore() (until the next call, which replaces
  // the clocks). Tracking only threadblocks that take part in a potential
  // conflict keeps the clocks small. Requires acyclic(). Returns false
  // (computing nothing) when the clocks would exceed `maxCells` integers.
  bool computeClocks(const std::vector<int>& tracked, size_t maxCells = size_t{1} << 28);
  // a happens before b, or a == b. Requires computeClocks() with tbOf(a)'s
  // and tbOf(b)'s threadblocks tracked.
  bool happensBefore(NodeId a, NodeId b) const {
    int32_t col = trackedIndex_[globalTb_[a]];
    return clock_[static_cast<size_t>(b) * tracked_ + static_cast<size_t>(col)] >= stepOf(a);
  }

  // The longest happens-before chain, in steps (nops included), and its last
  // node. Requires acyclic().
  std::pair<int, NodeId> longestChain() const;

  std::string describe(NodeId n) const;  // "rank 1 tb 2 step 3 (rcs)"

 private:
  void match(DiagnosticList& diags);
  void order(DiagnosticList& diags);
  void checkSlots(DiagnosticList& diags);
  // f(receive, send) for each send that waits for the slot that receive
  // frees (the (k - kCheckedSlots)-th receive of the k-th send's connection).
  template <class F>
  void forEachSlotWait(F f) const;
  // Kahn's order of the nodes with `slotEdges` (receive, send) added;
  // `left` gets the in-degrees the nodes outside the order keep.
  std::vector<NodeId> sort(const std::vector<std::pair<NodeId, NodeId>>& slotEdges,
                           std::vector<int32_t>* left) const;
  void reportCycles(const std::vector<int32_t>& indeg,
                    const std::vector<std::pair<NodeId, NodeId>>& slotWaits, DiagCode code,
                    const std::string& lead, DiagnosticList& diags) const;

  const ir::Algorithm& algo_;
  struct Tb {
    int32_t rank, tb;
    NodeId first;  // its step 0
  };
  std::vector<Tb> tbs_;            // by global threadblock index
  std::vector<int32_t> rankTb_;    // by rank: the global index of its threadblock 0
  std::vector<int32_t> globalTb_;  // by node
  std::vector<NodeId> matchedSend_, matchedRecv_;
  std::vector<NodeId> topo_;
  std::vector<int32_t> clock_;
  std::vector<int32_t> position_;      // node -> its index in topo_ (computeClocks)
  std::vector<int32_t> trackedIndex_;  // global tb -> clock column, or -1
  // computeClocks' marks per node (zero between calls): precedes a tracked
  // step, is preceded by one.
  std::vector<char> precedes_, reached_;
  size_t tracked_ = 0;
  bool fullyMatched_ = true;
  bool acyclic_ = true;
};

}  // namespace chorus::verify
