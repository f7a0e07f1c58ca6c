// Maximum flow on integer capacities (Dinic's algorithm): the synthesizer's
// workhorse for cuts of a topology (bound.h). Capacities are exact
// integers, so the cuts it finds decide rational bounds exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace chorus::synth {

class MaxFlow {
 public:
  explicit MaxFlow(int nodes);

  int nodes() const { return static_cast<int>(adj_.size()); }
  // Adds an arc; returns its id (for setCapacity).
  int addArc(int from, int to, int64_t capacity);
  void setCapacity(int arc, int64_t capacity) { arcs_[static_cast<size_t>(arc)].cap = capacity; }
  int64_t capacity(int arc) const { return arcs_[static_cast<size_t>(arc)].cap; }

  // The maximum flow from s to t, or `limit` once that much is found (the
  // caller only needs to know whether the flow reaches it). Starts from
  // zero flow every call.
  int64_t run(int s, int t, int64_t limit = std::numeric_limits<int64_t>::max());
  // After run(): whether node v is reachable from s in the residual graph.
  // When the flow stopped below `limit`, these nodes are the source side
  // of a minimum s-t cut.
  bool sourceSide(int v) const { return level_[static_cast<size_t>(v)] >= 0; }

 private:
  struct Arc {
    int to;
    int64_t cap, flow;
  };
  bool levels(int s, int t);
  int64_t push(int s, int t, int64_t limit);

  std::vector<Arc> arcs_;  // arc 2k forward, 2k+1 its reverse
  std::vector<std::vector<int>> adj_;
  std::vector<int> level_, next_;
  std::vector<int> queue_, stack_;
};

}  // namespace chorus::synth
