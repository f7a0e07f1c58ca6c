#include "synth/maxflow.h"

#include <algorithm>

#include "core/check.h"

namespace chorus::synth {

MaxFlow::MaxFlow(int nodes) : adj_(static_cast<size_t>(nodes)) {}

int MaxFlow::addArc(int from, int to, int64_t capacity) {
  CHORUS_CHECK(from >= 0 && from < nodes() && to >= 0 && to < nodes() && capacity >= 0, "bad arc");
  int id = static_cast<int>(arcs_.size());
  arcs_.push_back(Arc{to, capacity, 0});
  arcs_.push_back(Arc{from, 0, 0});
  adj_[static_cast<size_t>(from)].push_back(id);
  adj_[static_cast<size_t>(to)].push_back(id + 1);
  return id;
}

// Breadth-first levels over arcs with room left; true if t is reached.
bool MaxFlow::levels(int s, int t) {
  level_.assign(adj_.size(), -1);
  queue_.clear();
  queue_.push_back(s);
  level_[static_cast<size_t>(s)] = 0;
  for (size_t head = 0; head < queue_.size(); ++head) {
    int u = queue_[head];
    for (int a : adj_[static_cast<size_t>(u)]) {
      const Arc& arc = arcs_[static_cast<size_t>(a)];
      auto v = static_cast<size_t>(arc.to);
      if (level_[v] < 0 && arc.flow < arc.cap) {
        level_[v] = level_[static_cast<size_t>(u)] + 1;
        queue_.push_back(arc.to);
      }
    }
  }
  return level_[static_cast<size_t>(t)] >= 0;
}

// One blocking-flow augmentation along level-increasing arcs (iterative
// depth-first search with per-node arc pointers); returns what it pushed.
int64_t MaxFlow::push(int s, int t, int64_t limit) {
  int64_t total = 0;
  while (total < limit) {
    // Find a path s -> t; stack_ holds the arcs taken.
    stack_.clear();
    int u = s;
    while (u != t) {
      auto ui = static_cast<size_t>(u);
      bool advanced = false;
      for (; next_[ui] < static_cast<int>(adj_[ui].size()); ++next_[ui]) {
        int a = adj_[ui][static_cast<size_t>(next_[ui])];
        const Arc& arc = arcs_[static_cast<size_t>(a)];
        if (arc.flow < arc.cap && level_[static_cast<size_t>(arc.to)] == level_[ui] + 1) {
          stack_.push_back(a);
          u = arc.to;
          advanced = true;
          break;
        }
      }
      if (advanced) continue;
      if (u == s) return total;  // no more paths at these levels
      // Dead end: retreat and skip the arc that led here.
      level_[ui] = -1;
      int back = stack_.back();
      stack_.pop_back();
      u = arcs_[static_cast<size_t>(back ^ 1)].to;
      ++next_[static_cast<size_t>(u)];
    }
    int64_t f = limit - total;
    for (int a : stack_) {
      const Arc& arc = arcs_[static_cast<size_t>(a)];
      f = std::min(f, arc.cap - arc.flow);
    }
    for (int a : stack_) {
      arcs_[static_cast<size_t>(a)].flow += f;
      arcs_[static_cast<size_t>(a ^ 1)].flow -= f;
    }
    total += f;
  }
  return total;
}

int64_t MaxFlow::run(int s, int t, int64_t limit) {
  for (Arc& a : arcs_) a.flow = 0;
  // Reverse arcs have capacity 0; a negative flow on them is residual room.
  int64_t flow = 0;
  while (flow < limit && levels(s, t)) {
    next_.assign(adj_.size(), 0);
    flow += push(s, t, limit - flow);
  }
  if (flow >= limit) return flow;
  levels(s, t);  // leaves the residual reachability from s in level_
  return flow;
}

}  // namespace chorus::synth
