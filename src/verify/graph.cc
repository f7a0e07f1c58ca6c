#include "verify/graph.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>

#include "core/check.h"
#include "ir/validate.h"

namespace chorus::verify {

using ir::Algorithm;

StepGraph::StepGraph(const Algorithm& algo, DiagnosticList& diags) : algo_(algo) {
  rankTb_.resize(algo.ranks.size());
  size_t steps = 0, tbs = 0;
  for (const ir::Rank& r : algo.ranks) {
    tbs += r.tbs.size();
    for (const ir::Threadblock& tb : r.tbs) steps += tb.steps.size();
  }
  globalTb_.reserve(steps);
  tbs_.reserve(tbs);
  for (const ir::Rank& r : algo.ranks) {
    rankTb_[r.id] = static_cast<int32_t>(tbs_.size());
    for (const ir::Threadblock& tb : r.tbs) {
      const auto global = static_cast<int32_t>(tbs_.size());
      tbs_.push_back(Tb{r.id, tb.id, static_cast<NodeId>(globalTb_.size())});
      globalTb_.insert(globalTb_.end(), tb.steps.size(), global);
    }
  }
  matchedSend_.assign(size(), kNoNode);
  matchedRecv_.assign(size(), kNoNode);
  match(diags);
  order(diags);
  checkSlots(diags);
}

std::string StepGraph::describe(NodeId n) const {
  return describeSite(rankOf(n), tbOf(n), stepOf(n)) + " (" +
         std::string(ir::stepTypeName(step(n).type)) + ")";
}

void StepGraph::match(DiagnosticList& diags) {
  // (channel, sender, receiver) -> sending steps in order, receiving steps in order.
  using Key = std::tuple<int, int, int>;
  std::map<Key, std::pair<std::vector<NodeId>, std::vector<NodeId>>> conns;
  for (const ir::Rank& r : algo_.ranks) {
    for (const ir::Threadblock& tb : r.tbs) {
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        NodeId n = node(r.id, tb.id, static_cast<int>(s));
        ir::StepType t = tb.steps[s].type;
        if (ir::sends(t)) conns[{tb.channel, r.id, tb.sendPeer}].first.push_back(n);
        if (ir::receives(t)) conns[{tb.channel, tb.recvPeer, r.id}].second.push_back(n);
      }
    }
  }
  for (const auto& [key, sides] : conns) {
    auto [chan, from, to] = key;
    const auto& [sendsList, recvsList] = sides;
    size_t paired = std::min(sendsList.size(), recvsList.size());
    for (size_t k = 0; k < paired; ++k) {
      NodeId s = sendsList[k], r = recvsList[k];
      matchedSend_[r] = s;
      matchedRecv_[s] = r;
      if (step(s).count != step(r).count) {
        diags.add(DiagCode::kCountMismatch, ir::siteLocation(algo_, rankOf(r), tbOf(r), stepOf(r)),
                  "receive #" + std::to_string(k) + " from rank " + std::to_string(from) +
                      " on channel " + std::to_string(chan) +
                      " has cnt=" + std::to_string(step(r).count) + " but its send (" +
                      describe(s) + ") has cnt=" + std::to_string(step(s).count));
      }
      if (step(s).lag != step(r).lag) {
        diags.add(DiagCode::kLagMismatch, ir::siteLocation(algo_, rankOf(r), tbOf(r), stepOf(r)),
                  "receive #" + std::to_string(k) + " from rank " + std::to_string(from) +
                      " on channel " + std::to_string(chan) +
                      " has lag=" + std::to_string(step(r).lag) + " but its send (" + describe(s) +
                      ") has lag=" + std::to_string(step(s).lag) +
                      " (they would move different slices in one iteration)");
      }
    }
    std::string conn = "rank " + std::to_string(from) + " -> rank " + std::to_string(to) +
                       " on channel " + std::to_string(chan);
    for (size_t k = paired; k < sendsList.size(); ++k) {
      fullyMatched_ = false;
      NodeId s = sendsList[k];
      diags.add(DiagCode::kUnmatchedSend, ir::siteLocation(algo_, rankOf(s), tbOf(s), stepOf(s)),
                "send #" + std::to_string(k) + " on " + conn + " has no matching receive (" +
                    std::to_string(recvsList.size()) + " receive(s) for " +
                    std::to_string(sendsList.size()) + " send(s))");
    }
    for (size_t k = paired; k < recvsList.size(); ++k) {
      fullyMatched_ = false;
      NodeId r = recvsList[k];
      diags.add(DiagCode::kUnmatchedRecv, ir::siteLocation(algo_, rankOf(r), tbOf(r), stepOf(r)),
                "receive #" + std::to_string(k) + " on " + conn + " has no matching send (" +
                    std::to_string(sendsList.size()) + " send(s) for " +
                    std::to_string(recvsList.size()) + " receive(s))");
    }
  }
}

void StepGraph::order(DiagnosticList& diags) {
  std::vector<int32_t> left;
  topo_ = sort({}, &left);
  if (topo_.size() == size()) return;
  acyclic_ = false;
  reportCycles(left, {}, DiagCode::kDeadlock, "", diags);
}

std::vector<NodeId> StepGraph::sort(const std::vector<std::pair<NodeId, NodeId>>& slotEdges,
                                    std::vector<int32_t>* left) const {
  // A step's successors are the inverse of preds(): the next step of its
  // threadblock, the receive its send is matched with, and the steps that
  // depend on it. Only the last need a table (dependencies are few), so
  // the sort holds in-degrees and the order, 8 bytes a step (a table of
  // every successor took 24: 0.8 GB at 4096 ranks). `slotEdges` (receive,
  // send), by receive, adds the waits for a free slot.
  const auto count = static_cast<NodeId>(size());
  std::vector<int32_t>& indeg = *left;
  indeg.assign(size(), 0);
  std::vector<std::pair<NodeId, NodeId>> dependents;  // (target, dependent), by target
  for (NodeId n = 0; n < count; ++n) {
    indeg[static_cast<size_t>(n)] = static_cast<int32_t>(preds(n).size());
    const ir::Step& s = step(n);
    if (s.depTb >= 0) dependents.emplace_back(node(rankOf(n), s.depTb, s.depStep), n);
  }
  for (const auto& [recv, send] : slotEdges) ++indeg[static_cast<size_t>(send)];
  std::sort(dependents.begin(), dependents.end());
  // Kahn's algorithm; a FIFO gives a deterministic order.
  std::vector<NodeId> topo;
  topo.reserve(size());
  for (NodeId n = 0; n < count; ++n)
    if (indeg[static_cast<size_t>(n)] == 0) topo.push_back(n);
  auto release = [&](NodeId v) {
    if (--indeg[static_cast<size_t>(v)] == 0) topo.push_back(v);
  };
  // A threadblock's steps leave the queue in step order (each waits for the
  // one before it), so one cursor per threadblock walks its steps' entries
  // in the two tables (sorted by node) once: a binary search per step over
  // tables of millions of entries took a third of the proof of a
  // 256-chunk schedule on 64 ranks.
  struct Cursors {
    const std::vector<std::pair<NodeId, NodeId>>& table;
    std::vector<size_t> at;  // by global threadblock
    Cursors(const std::vector<std::pair<NodeId, NodeId>>& t, const std::vector<Tb>& tbs)
        : table(t), at(tbs.size()) {
      for (size_t i = 0; i < tbs.size(); ++i)
        at[i] = static_cast<size_t>(
            std::lower_bound(t.begin(), t.end(), std::pair{tbs[i].first, kNoNode}) - t.begin());
    }
    // Node u's next successor in the table, or kNoNode past its last.
    NodeId next(int tb, NodeId u) {
      size_t& i = at[static_cast<size_t>(tb)];
      return i < table.size() && table[i].first == u ? table[i++].second : kNoNode;
    }
  };
  Cursors byDependency(dependents, tbs_), bySlot(slotEdges, tbs_);
  for (size_t head = 0; head < topo.size(); ++head) {
    const NodeId u = topo[head];
    if (u + 1 < count && stepOf(u + 1) > 0) release(u + 1);
    if (matchedRecv_[static_cast<size_t>(u)] != kNoNode)
      release(matchedRecv_[static_cast<size_t>(u)]);
    const int tb = globalTb_[static_cast<size_t>(u)];
    for (NodeId v; (v = byDependency.next(tb, u)) != kNoNode;) release(v);
    for (NodeId v; (v = bySlot.next(tb, u)) != kNoNode;) release(v);
  }
  return topo;
}

void StepGraph::reportCycles(const std::vector<int32_t>& indeg,
                             const std::vector<std::pair<NodeId, NodeId>>& slotWaits, DiagCode code,
                             const std::string& lead, DiagnosticList& diags) const {
  // Every node left has a predecessor that is left, so walking predecessors
  // from any of them must revisit a node: that loop is a cycle. Report each
  // distinct cycle found from the remaining nodes in id order (bounded).
  // `slotWaits` (send, the receive whose slot it waits for), by send.
  auto waitsOn = [&](NodeId cur) {
    for (NodeId p : preds(cur))
      if (indeg[p] > 0) return p;
    auto it = std::lower_bound(slotWaits.begin(), slotWaits.end(), std::pair{cur, kNoNode});
    if (it != slotWaits.end() && it->first == cur && indeg[it->second] > 0) return it->second;
    return kNoNode;
  };
  std::vector<int> seenCycle(size(), 0);
  int reported = 0;
  for (NodeId start = 0; start < static_cast<NodeId>(size()) && reported < 8; ++start) {
    if (indeg[start] == 0 || seenCycle[start]) continue;
    std::map<NodeId, size_t> at;
    std::vector<NodeId> path;
    NodeId cur = start;
    while (!at.count(cur)) {
      at[cur] = path.size();
      path.push_back(cur);
      NodeId next = waitsOn(cur);
      CHORUS_CHECK(next != kNoNode, "node left by Kahn's algorithm without a waiting predecessor");
      cur = next;
    }
    // path[at[cur]..] is the cycle, in waits-for order; reverse it so it
    // reads in happens-before order, then rotate to start at its least node.
    std::vector<NodeId> cycle(path.begin() + static_cast<ptrdiff_t>(at[cur]), path.end());
    std::reverse(cycle.begin(), cycle.end());
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
    bool fresh = true;
    for (NodeId n : cycle) fresh = fresh && !seenCycle[n];
    for (NodeId n : path) seenCycle[n] = 1;
    if (!fresh) continue;
    std::string msg = lead + "cycle of " + std::to_string(cycle.size()) +
                      " steps, each waiting for the previous: ";
    for (size_t i = 0; i < cycle.size(); ++i) {
      msg += describe(cycle[i]);
      msg += " -> ";
    }
    msg += describe(cycle.front());
    NodeId first = cycle.front();
    diags.add(code, ir::siteLocation(algo_, rankOf(first), tbOf(first), stepOf(first)), msg);
    ++reported;
  }
}

template <class F>
void StepGraph::forEachSlotWait(F f) const {
  // A connection's sends in match()'s order (its sender's threadblocks in
  // id order, each in step order); the last kCheckedSlots of each kept.
  struct Connection {
    std::array<NodeId, kCheckedSlots> last{};  // its latest sends, a ring
    size_t sent = 0;
  };
  for (const ir::Rank& r : algo_.ranks) {
    std::map<std::pair<int, int>, Connection> conns;  // (channel, peer)
    for (const ir::Threadblock& tb : r.tbs) {
      if (tb.sendPeer < 0) continue;
      Connection& c = conns[{tb.channel, tb.sendPeer}];
      for (size_t s = 0; s < tb.steps.size(); ++s) {
        if (!ir::sends(tb.steps[s].type)) continue;
        const NodeId n = node(r.id, tb.id, static_cast<int>(s));
        NodeId& slot = c.last[c.sent % kCheckedSlots];
        if (c.sent >= static_cast<size_t>(kCheckedSlots)) f(matchedRecv_[slot], n);
        slot = n;
        ++c.sent;
      }
    }
  }
}

void StepGraph::checkSlots(DiagnosticList& diags) {
  if (!acyclic_ || !fullyMatched_) return;
  // The k-th send of a connection needs the slot the (k - 8)-th receive
  // frees. A step that receives and sends (rcs, rrs, rrcs) waits for its
  // message and its slot before it starts, as the executors run it. Where
  // every such wait points forward in the order already found, that order
  // still holds with them (a ring: no second sort, no edge stored).
  bool forward = true;
  {
    // (Freed at once: 4 bytes a step is 134 MB at 4096 ranks, and the
    // verifier's peak comes later.)
    std::vector<int32_t> at(size());
    for (size_t i = 0; i < topo_.size(); ++i) at[topo_[i]] = static_cast<int32_t>(i);
    forEachSlotWait([&](NodeId recv, NodeId send) { forward = forward && at[recv] < at[send]; });
  }
  if (forward) return;
  std::vector<std::pair<NodeId, NodeId>> edges;  // (receive, send)
  forEachSlotWait([&](NodeId recv, NodeId send) { edges.emplace_back(recv, send); });
  std::sort(edges.begin(), edges.end());
  std::vector<int32_t> left;
  if (sort(edges, &left).size() == size()) return;
  std::vector<std::pair<NodeId, NodeId>> waits;  // (send, receive)
  for (const auto& [recv, send] : edges) waits.emplace_back(send, recv);
  std::sort(waits.begin(), waits.end());
  reportCycles(left, waits, DiagCode::kSlotDeadlock,
               "with " + std::to_string(kCheckedSlots) +
                   " slots per connection (MSCCL's executor and Chorus's runtime by default), a "
                   "send waits for a slot its receiver frees only later: ",
               diags);
}

std::pair<int, NodeId> StepGraph::longestChain() const {
  CHORUS_CHECK(acyclic_, "longest chain needs an acyclic graph");
  std::vector<int> len(size(), 1);
  std::pair<int, NodeId> best{0, kNoNode};
  for (NodeId n : topo_) {
    for (NodeId p : preds(n)) len[n] = std::max(len[n], len[p] + 1);
    if (len[n] > best.first) best = {len[n], n};
  }
  return best;
}

bool StepGraph::computeClocks(const std::vector<int>& tracked, size_t maxCells) {
  CHORUS_CHECK(acyclic_, "happens-before clocks need an acyclic graph");
  tracked_ = tracked.size();
  if (tracked_ != 0 && size() > maxCells / tracked_) return false;
  trackedIndex_.assign(totalTbs(), -1);
  for (size_t i = 0; i < tracked.size(); ++i) trackedIndex_[tracked[i]] = static_cast<int32_t>(i);
  if (tracked_ == 0) return true;
  if (position_.empty()) {
    position_.resize(size());
    for (size_t i = 0; i < topo_.size(); ++i) position_[topo_[i]] = static_cast<int32_t>(i);
  }
  // The span of the topological order that matters: before the tracked
  // threadblocks' first step every clock is -1 (a predecessor there counts
  // as -1), and past their last step no clock is read (happensBefore's
  // second argument is a tracked step).
  int32_t first = static_cast<int32_t>(size()), last = -1;
  for (NodeId n = 0; n < static_cast<NodeId>(size()); ++n)
    if (trackedIndex_[globalTb_[n]] >= 0) {
      first = std::min(first, position_[n]);
      last = std::max(last, position_[n]);
    }
  clock_.resize(size() * tracked_);
  // Only steps on a path between two tracked steps need a clock: a step
  // that precedes no tracked step is never read, and one that no tracked
  // step precedes has every clock -1 (it is marked so, and neither written
  // nor read). A 64-rank direct reduce-scatter's proof took 2.6 times as
  // long with every step of the span (docs/scale.md).
  // The marks are members, zero between calls: a pass per rank costs its
  // span, not the whole graph.
  precedes_.resize(size(), 0);
  reached_.resize(size(), 0);
  for (int32_t i = last; i >= first; --i) {
    const NodeId n = topo_[static_cast<size_t>(i)];
    if (trackedIndex_[globalTb_[n]] < 0 && !precedes_[n]) continue;
    precedes_[n] = 1;
    for (NodeId p : preds(n))
      if (position_[p] >= first) precedes_[p] = 1;
  }
  for (int32_t i = first; i <= last; ++i) {
    const NodeId n = topo_[static_cast<size_t>(i)];
    if (!precedes_[n]) continue;
    const int32_t col = trackedIndex_[globalTb_[n]];
    bool any = col >= 0;
    for (NodeId p : preds(n)) any = any || (position_[p] >= first && reached_[p]);
    if (!any) continue;
    reached_[n] = 1;
    int32_t* c = &clock_[static_cast<size_t>(n) * tracked_];
    std::fill(c, c + tracked_, -1);
    for (NodeId p : preds(n)) {
      if (position_[p] < first || !reached_[p]) continue;
      const int32_t* pc = &clock_[static_cast<size_t>(p) * tracked_];
      for (size_t g = 0; g < tracked_; ++g) c[g] = std::max(c[g], pc[g]);
    }
    if (col >= 0) c[col] = stepOf(n);
  }
  for (int32_t i = first; i <= last; ++i)
    precedes_[topo_[static_cast<size_t>(i)]] = reached_[topo_[static_cast<size_t>(i)]] = 0;
  return true;
}

}  // namespace chorus::verify
