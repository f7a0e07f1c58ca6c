#include "synth/blink.h"

#include <glpk.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "core/check.h"
#include "synth/cuts.h"

namespace chorus::synth {

namespace {

struct Edge {
  int from, to;
  double cost;
  int id;  // the arc it stands for
};

// Chu-Liu/Edmonds: the minimum-cost spanning out-tree from `root` over
// nodes 0..n-1; returns the chosen edges' ids (n - 1 of them), or an empty
// vector when some node cannot be reached.
std::vector<int> minArborescence(int n, int root, const std::vector<Edge>& edges) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> inCost(static_cast<size_t>(n), kInf);
  std::vector<int> inEdge(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    if (e.from != e.to && e.to != root && e.cost < inCost[static_cast<size_t>(e.to)]) {
      inCost[static_cast<size_t>(e.to)] = e.cost;
      inEdge[static_cast<size_t>(e.to)] = static_cast<int>(i);
    }
  }
  for (int v = 0; v < n; ++v)
    if (v != root && inEdge[static_cast<size_t>(v)] < 0) return {};
  // Cycles among the cheapest in-edges.
  std::vector<int> comp(static_cast<size_t>(n), -1), mark(static_cast<size_t>(n), -1);
  int comps = 0;
  bool cycle = false;
  for (int v = 0; v < n; ++v) {
    int u = v;
    while (u != root && mark[static_cast<size_t>(u)] < 0 && comp[static_cast<size_t>(u)] < 0) {
      mark[static_cast<size_t>(u)] = v;
      u = edges[static_cast<size_t>(inEdge[static_cast<size_t>(u)])].from;
    }
    if (u != root && comp[static_cast<size_t>(u)] < 0 && mark[static_cast<size_t>(u)] == v) {
      // u lies on a new cycle: one component for all of it.
      for (int x = u;; x = edges[static_cast<size_t>(inEdge[static_cast<size_t>(x)])].from) {
        comp[static_cast<size_t>(x)] = comps;
        if (edges[static_cast<size_t>(inEdge[static_cast<size_t>(x)])].from == u) break;
      }
      ++comps;
      cycle = true;
    }
  }
  std::vector<int> chosen;
  if (!cycle) {
    for (int v = 0; v < n; ++v)
      if (v != root)
        chosen.push_back(edges[static_cast<size_t>(inEdge[static_cast<size_t>(v)])].id);
    return chosen;
  }
  for (int v = 0; v < n; ++v)
    if (comp[static_cast<size_t>(v)] < 0) comp[static_cast<size_t>(v)] = comps++;
  // Contract: an edge into a cycle node costs what it saves over the
  // cycle's own in-edge there; recurse with edge ids = positions here.
  std::vector<Edge> contracted;
  std::vector<int> original;  // contracted edge -> index in `edges`
  for (size_t i = 0; i < edges.size(); ++i) {
    const Edge& e = edges[i];
    const int a = comp[static_cast<size_t>(e.from)], b = comp[static_cast<size_t>(e.to)];
    if (a == b) continue;
    contracted.push_back(
        Edge{a, b, e.cost - inCost[static_cast<size_t>(e.to)], static_cast<int>(original.size())});
    original.push_back(static_cast<int>(i));
  }
  std::vector<int> inner = minArborescence(comps, comp[static_cast<size_t>(root)], contracted);
  if (inner.empty() && comps > 1) return {};
  // Expand: the chosen edges, and every cycle edge except the one into the
  // node a chosen edge enters.
  std::vector<char> entered(static_cast<size_t>(n), 0);
  for (int c : inner) {
    const Edge& e = edges[static_cast<size_t>(original[static_cast<size_t>(c)])];
    chosen.push_back(e.id);
    entered[static_cast<size_t>(e.to)] = 1;
  }
  for (int v = 0; v < n; ++v) {
    if (v == root || entered[static_cast<size_t>(v)]) continue;
    // Nodes not entered from outside keep their cheapest in-edge (they lie
    // on a contracted cycle, or are their own component and were entered).
    chosen.push_back(edges[static_cast<size_t>(inEdge[static_cast<size_t>(v)])].id);
  }
  return chosen;
}

}  // namespace

Result<Forest> blinkForest(const topo::Topology& t, bool reversed, const BlinkOptions& options,
                           int maxPieces) {
  if (options.treesPerRoot < 1)
    return Status(StatusCode::kInvalidArgument, "blink needs at least one tree per root");
  auto split = splitTopology(t, reversed, maxPieces);
  if (!split.isOk()) return split.status();
  const Forest& base = split.value();
  const int n = t.ranks();
  const size_t ranks = static_cast<size_t>(n);
  // Arcs with capacity (base.k pieces per shard per unit time at the optimum).
  std::vector<std::pair<int, int>> arcs;
  std::vector<double> cap;
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      if (a != b && base.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)] > 0) {
        arcs.emplace_back(a, b);
        cap.push_back(
            static_cast<double>(base.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)]));
      }
  const double eps = options.epsilon;
  const double m = static_cast<double>(arcs.size());
  const double delta = (1 + eps) * std::pow((1 + eps) * m, -1.0 / eps);
  std::vector<double> length(arcs.size());
  for (size_t e = 0; e < arcs.size(); ++e) length[e] = delta / cap[e];
  // Garg-Koenemann rounds: each root routes demand base.k per round.
  std::map<std::pair<int, std::vector<int>>, double> trees;  // (root, arc ids) -> amount
  std::vector<double> load(arcs.size(), 0.0);
  auto volume = [&] {
    double d = 0;
    for (size_t e = 0; e < arcs.size(); ++e) d += length[e] * cap[e];
    return d;
  };
  // The rounds only find candidate trees (the linear program below sets
  // their shares), so they may stop early: after a budget of arborescence
  // work (about a few seconds; small topologies never reach it).
  constexpr double kWorkBudget = 5e8;
  double work = 0;
  // Arcs are in the forest's direction (in-trees were split on the reversed
  // graph already); their costs are the current lengths.
  std::vector<Edge> edges;
  for (size_t e = 0; e < arcs.size(); ++e)
    edges.push_back(Edge{arcs[e].first, arcs[e].second, length[e], static_cast<int>(e)});
  while (volume() < 1 && work < kWorkBudget)
    for (int r = 0; r < n; ++r) {
      double demand = static_cast<double>(base.k);
      while (demand > 1e-12) {
        work += static_cast<double>(n) * static_cast<double>(arcs.size());
        for (size_t e = 0; e < arcs.size(); ++e) edges[e].cost = length[e];
        std::vector<int> tree = minArborescence(n, r, edges);
        if (tree.empty())
          return Status(
              StatusCode::kInvalidArgument,
              "rank " + std::to_string(r) + " cannot reach every rank on '" + t.name + "'");
        std::sort(tree.begin(), tree.end());
        double amount = demand;
        for (int e : tree) amount = std::min(amount, cap[static_cast<size_t>(e)]);
        for (int e : tree) {
          length[static_cast<size_t>(e)] *= 1 + eps * amount / cap[static_cast<size_t>(e)];
          load[static_cast<size_t>(e)] += amount;
        }
        trees[{r, tree}] += amount;
        demand -= amount;
      }
    }
  // Each root's heaviest distinct trees, then their shares re-optimised by
  // a linear program over those trees alone (the largest common rate), as
  // Blink re-solves its chosen trees.
  const int kept = options.treesPerRoot;
  std::vector<std::vector<const std::vector<int>*>> chosen(ranks);
  std::vector<std::vector<double>> share(ranks);
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<double, const std::vector<int>*>> mine;
    for (const auto& [key, amount] : trees)
      if (key.first == r) mine.push_back({amount, &key.second});
    std::stable_sort(mine.begin(), mine.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    if (static_cast<int>(mine.size()) > kept) mine.resize(static_cast<size_t>(kept));
    for (const auto& [amount, tree] : mine) {
      chosen[static_cast<size_t>(r)].push_back(tree);
      share[static_cast<size_t>(r)].push_back(amount);
    }
  }
  {
    std::unique_ptr<glp_prob, void (*)(glp_prob*)> lp(glp_create_prob(), glp_delete_prob);
    glp_set_obj_dir(lp.get(), GLP_MAX);
    std::vector<std::pair<int, int>> column{{-1, -1}};  // (root, tree) per column from 2
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < chosen[static_cast<size_t>(r)].size(); ++i)
        column.push_back({r, static_cast<int>(i)});
    const int cols = static_cast<int>(column.size());  // lambda is column 1
    glp_add_cols(lp.get(), cols);
    for (int c = 1; c <= cols; ++c) glp_set_col_bnds(lp.get(), c, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(lp.get(), 1, 1.0);
    glp_add_rows(lp.get(), n + static_cast<int>(arcs.size()));
    std::vector<int> ia{0}, ja{0};
    std::vector<double> ar{0.0};
    for (int r = 0; r < n; ++r) {  // sum of the root's trees - lambda >= 0
      glp_set_row_bnds(lp.get(), r + 1, GLP_LO, 0.0, 0.0);
      ia.push_back(r + 1), ja.push_back(1), ar.push_back(-1.0);
    }
    for (size_t e = 0; e < arcs.size(); ++e)
      glp_set_row_bnds(lp.get(), n + 1 + static_cast<int>(e), GLP_UP, 0.0, cap[e]);
    for (int c = 2; c <= cols; ++c) {
      auto [r, i] = column[static_cast<size_t>(c - 1)];
      ia.push_back(r + 1), ja.push_back(c), ar.push_back(1.0);
      for (int e : *chosen[static_cast<size_t>(r)][static_cast<size_t>(i)])
        ia.push_back(n + 1 + e), ja.push_back(c), ar.push_back(1.0);
    }
    glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    if (glp_simplex(lp.get(), &parm) == 0 && glp_get_status(lp.get()) == GLP_OPT &&
        glp_get_obj_val(lp.get()) > 0)
      for (int c = 2; c <= cols; ++c) {
        auto [r, i] = column[static_cast<size_t>(c - 1)];
        share[static_cast<size_t>(r)][static_cast<size_t>(i)] = glp_get_col_prim(lp.get(), c);
      }
  }
  // Whole pieces (pieces = 4 x trees per root) in proportion to the shares.
  const int pieces = 4 * kept;
  Forest f;
  f.k = pieces;
  f.arcs.assign(ranks, std::vector<int64_t>(ranks, 0));
  for (int r = 0; r < n; ++r) {
    std::vector<std::pair<double, const std::vector<int>*>> mine;
    for (size_t i = 0; i < chosen[static_cast<size_t>(r)].size(); ++i)
      if (share[static_cast<size_t>(r)][i] > 1e-12)
        mine.push_back({share[static_cast<size_t>(r)][i], chosen[static_cast<size_t>(r)][i]});
    if (mine.empty()) mine.push_back({1.0, chosen[static_cast<size_t>(r)].front()});
    double total = 0;
    for (const auto& [amount, tree] : mine) total += amount;
    // Largest remainders, at least one piece each.
    std::vector<int64_t> weight(mine.size(), 1);
    int64_t left = pieces - static_cast<int64_t>(mine.size());
    std::vector<std::pair<double, size_t>> remainder;
    for (size_t i = 0; i < mine.size(); ++i) {
      const double part = mine[i].first / total * static_cast<double>(left);
      weight[i] += static_cast<int64_t>(std::floor(part));
      remainder.push_back({part - std::floor(part), i});
    }
    int64_t given = std::accumulate(weight.begin(), weight.end(), int64_t{0});
    std::stable_sort(remainder.begin(), remainder.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (size_t i = 0; given < pieces; ++i, ++given)
      ++weight[remainder[i % remainder.size()].second];
    for (size_t i = 0; i < mine.size(); ++i) {
      Tree tree{r, weight[i], {}};
      // Edges from the root outward (each `to` after its `from`).
      std::vector<char> reached(ranks, 0);
      reached[static_cast<size_t>(r)] = 1;
      std::vector<std::pair<int, int>> todo;
      for (int e : *mine[i].second) todo.push_back(arcs[static_cast<size_t>(e)]);
      while (!todo.empty()) {
        for (auto it = todo.begin(); it != todo.end();) {
          if (reached[static_cast<size_t>(it->first)]) {
            tree.edges.push_back(*it);
            reached[static_cast<size_t>(it->second)] = 1;
            it = todo.erase(it);
          } else {
            ++it;
          }
        }
      }
      for (auto [a, b] : tree.edges)
        f.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)] += weight[i];
      f.trees.push_back(std::move(tree));
    }
  }
  // The rate the whole pieces reach: every root's pieces take one unit of
  // time at the optimum's k per unit time where each arc carries its
  // capacity; with these loads the slowest arc takes load x k / (pieces x
  // cap) units. algbw = optimum x min over arcs of pieces x cap / (k x load).
  Rational worst{1, 1};  // the fraction of the optimum, at most 1
  for (size_t e = 0; e < arcs.size(); ++e) {
    auto [a, b] = arcs[e];
    const int64_t used = f.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)];
    if (used == 0) continue;
    const i128 num = i128{pieces} * base.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)];
    const i128 den = i128{base.k} * used;
    if (num * worst.den < i128{worst.num} * den) worst = reduced(num, den);
  }
  f.algbw = times(base.algbw, worst);
  f.maxflows = base.maxflows;
  return f;
}

}  // namespace chorus::synth
