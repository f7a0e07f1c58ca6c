#include "synth/alltoall.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>

namespace chorus::synth {

namespace {

struct ProblemDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// The simplest fraction within `tolerance` (relative) of x with a
// denominator of at most `maxDen` (continued fractions), if any.
bool recoverRational(double x, int64_t maxDen, double tolerance, Rational& out) {
  int64_t h0 = 0, h1 = 1, k0 = 1, k1 = 0;  // convergents h/k
  double r = x;
  for (int i = 0; i < 64; ++i) {
    const double a = std::floor(r);
    if (a > 9e15) break;
    const auto ai = static_cast<int64_t>(a);
    const int64_t h2 = ai * h1 + h0, k2 = ai * k1 + k0;
    if (k2 > maxDen) break;
    h0 = h1;
    h1 = h2;
    k0 = k1;
    k1 = k2;
    if (std::fabs(static_cast<double>(h1) / static_cast<double>(k1) - x) <=
        tolerance * std::max(1.0, std::fabs(x))) {
      out = Rational{h1, k1};
      return true;
    }
    const double frac = r - a;
    if (frac < 1e-18) break;
    r = 1.0 / frac;
  }
  return false;
}

}  // namespace

Result<AllToAllBound> allToAllBound(const topo::Topology& t) {
  const int n = t.ranks();
  if (n < 2) return Status(StatusCode::kInvalidArgument, "a bound needs at least two ranks");
  auto t0 = std::chrono::steady_clock::now();
  const int v = static_cast<int>(t.nodes.size());
  const int e = static_cast<int>(t.links.size());
  std::unique_ptr<glp_prob, ProblemDeleter> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MAX);
  // Columns: lambda, then f[s][l] for source rank s and link l.
  const int lambda = 1;
  auto flowCol = [&](int s, int l) { return 2 + s * e + l; };
  glp_add_cols(lp.get(), 1 + n * e);
  glp_set_col_bnds(lp.get(), lambda, GLP_LO, 0.0, 0.0);
  glp_set_obj_coef(lp.get(), lambda, 1.0);
  for (int c = 2; c <= 1 + n * e; ++c) glp_set_col_bnds(lp.get(), c, GLP_LO, 0.0, 0.0);
  // Rows: conservation per (source, node), then capacity per link, then caps.
  std::vector<int> ia{0}, ja{0};
  std::vector<double> ar{0.0};
  auto add = [&](int row, int col, double x) {
    ia.push_back(row);
    ja.push_back(col);
    ar.push_back(x);
  };
  int rows = 0;
  std::vector<int> rankOfNode(static_cast<size_t>(v), -1);
  for (int r = 0; r < n; ++r) rankOfNode[static_cast<size_t>(t.nodeOfRank(r))] = r;
  glp_add_rows(lp.get(), n * v + e);
  // Conservation, row s * v + x + 1 for source s at node x:
  // in - out = demand (lambda at every other rank, -(n-1) lambda at s).
  for (int s = 0; s < n; ++s) {
    for (int x = 0; x < v; ++x) {
      const int row = ++rows;
      glp_set_row_bnds(lp.get(), row, GLP_FX, 0.0, 0.0);
      const int r = rankOfNode[static_cast<size_t>(x)];
      if (r >= 0) add(row, lambda, r == s ? static_cast<double>(n - 1) : -1.0);
    }
    for (int l = 0; l < e; ++l) {
      const topo::Link& link = t.links[static_cast<size_t>(l)];
      add(s * v + link.to + 1, flowCol(s, l), 1.0);
      add(s * v + link.from + 1, flowCol(s, l), -1.0);
    }
  }
  const int firstCapacityRow = rows + 1;
  for (int l = 0; l < e; ++l) {
    const int row = ++rows;
    glp_set_row_bnds(lp.get(), row, GLP_UP, 0.0, t.links[static_cast<size_t>(l)].bandwidth);
    for (int s = 0; s < n; ++s) add(row, flowCol(s, l), 1.0);
  }
  // Per-rank send / receive caps bound the flow leaving / entering a rank
  // (as the simulator treats them).
  for (int r = 0; r < n; ++r) {
    const topo::Node& node = t.nodes[static_cast<size_t>(t.nodeOfRank(r))];
    for (bool send : {true, false}) {
      const double cap = send ? node.sendCap : node.recvCap;
      if (cap <= 0) continue;
      const int row = glp_add_rows(lp.get(), 1);
      ++rows;
      glp_set_row_bnds(lp.get(), row, GLP_UP, 0.0, cap);
      for (int l = 0; l < e; ++l) {
        const topo::Link& link = t.links[static_cast<size_t>(l)];
        if ((send ? link.from : link.to) == t.nodeOfRank(r))
          for (int s = 0; s < n; ++s) add(row, flowCol(s, l), 1.0);
      }
    }
  }
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_term_out(GLP_OFF);
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  if (glp_simplex(lp.get(), &parm) != 0 || glp_get_status(lp.get()) != GLP_OPT)
    return Status(StatusCode::kInternal, "the alltoall LP did not solve (GLPK simplex)");
  // Refine from the optimal basis in exact (rational) arithmetic when the
  // problem is small enough for it to be quick.
  AllToAllBound b;
  parm.presolve = GLP_OFF;
  if (n * e <= 200000 && glp_exact(lp.get(), &parm) == 0 && glp_get_status(lp.get()) == GLP_OPT)
    b.exactSimplex = true;
  const double rate = glp_get_obj_val(lp.get());
  if (rate <= 0) {
    // Some rank cannot reach another.
    return Status(StatusCode::kInvalidArgument,
                  "no alltoall on '" + t.name + "': a rank cannot reach another");
  }
  b.pairRate = rate;
  b.algbw = rate * n;
  b.exact = recoverRational(b.algbw, 1000000, 1e-12, b.algbwExact);
  for (int l = 0; l < e; ++l)
    if (std::fabs(glp_get_row_dual(lp.get(), firstCapacityRow + l)) > 1e-12)
      b.bottleneck.push_back(l);
  b.flow.assign(static_cast<size_t>(n), std::vector<double>(static_cast<size_t>(e), 0));
  for (int src = 0; src < n; ++src)
    for (int l = 0; l < e; ++l)
      b.flow[static_cast<size_t>(src)][static_cast<size_t>(l)] =
          std::max(0.0, glp_get_col_prim(lp.get(), flowCol(src, l)));
  b.variables = 1 + n * e;
  b.constraints = rows;
  b.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return b;
}

std::vector<std::vector<std::vector<BlockPath>>> allToAllPaths(const topo::Topology& t,
                                                               const AllToAllBound& b) {
  const int n = t.ranks();
  const size_t v = t.nodes.size();
  std::vector<int> rankOfNode(v, -1);
  for (int r = 0; r < n; ++r) rankOfNode[static_cast<size_t>(t.nodeOfRank(r))] = r;
  std::vector<std::vector<int>> out(v);  // node -> links leaving it
  for (size_t l = 0; l < t.links.size(); ++l)
    out[static_cast<size_t>(t.links[l].from)].push_back(static_cast<int>(l));
  const double eps = 1e-9 * std::max(1.0, b.pairRate);
  std::vector<std::vector<std::vector<BlockPath>>> paths(
      static_cast<size_t>(n), std::vector<std::vector<BlockPath>>(static_cast<size_t>(n)));
  for (int s = 0; s < n; ++s) {
    std::vector<double> flow = b.flow[static_cast<size_t>(s)];
    for (int d = 0; d < n; ++d) {
      if (d == s) continue;
      double left = b.pairRate;
      // Fewest hops first, along links with flow left; each path takes what
      // its narrowest link has, up to what the pair still needs.
      for (int round = 0; left > eps && round < 4 * static_cast<int>(t.links.size()); ++round) {
        std::vector<int> via(v, -1);  // node -> link it was reached by
        std::vector<int> queue{t.nodeOfRank(s)};
        std::vector<char> seen(v, 0);
        seen[static_cast<size_t>(t.nodeOfRank(s))] = 1;
        for (size_t i = 0; i < queue.size() && !seen[static_cast<size_t>(t.nodeOfRank(d))]; ++i)
          for (int l : out[static_cast<size_t>(queue[i])]) {
            const int to = t.links[static_cast<size_t>(l)].to;
            if (seen[static_cast<size_t>(to)] || flow[static_cast<size_t>(l)] <= eps) continue;
            seen[static_cast<size_t>(to)] = 1;
            via[static_cast<size_t>(to)] = l;
            queue.push_back(to);
          }
        if (!seen[static_cast<size_t>(t.nodeOfRank(d))]) break;  // the rest is rounding
        std::vector<int> links;
        for (int x = t.nodeOfRank(d); x != t.nodeOfRank(s);
             x = t.links[static_cast<size_t>(via[static_cast<size_t>(x)])].from)
          links.push_back(via[static_cast<size_t>(x)]);
        std::reverse(links.begin(), links.end());
        double take = left;
        for (int l : links) take = std::min(take, flow[static_cast<size_t>(l)]);
        BlockPath p;
        p.ranks.push_back(s);
        for (int l : links) {
          flow[static_cast<size_t>(l)] -= take;
          const int r = rankOfNode[static_cast<size_t>(t.links[static_cast<size_t>(l)].to)];
          if (r >= 0) p.ranks.push_back(r);
        }
        p.rate = take;
        left -= take;
        auto same = std::find_if(paths[s][d].begin(), paths[s][d].end(),
                                 [&](const BlockPath& q) { return q.ranks == p.ranks; });
        if (same != paths[s][d].end())
          same->rate += take;
        else
          paths[static_cast<size_t>(s)][static_cast<size_t>(d)].push_back(std::move(p));
      }
      if (paths[static_cast<size_t>(s)][static_cast<size_t>(d)].empty())
        paths[static_cast<size_t>(s)][static_cast<size_t>(d)].push_back(
            BlockPath{{s, d}, b.pairRate});  // a flow too small to trace: go direct
    }
  }
  return paths;
}

lang::ProgramOptions allToAllProgramOptions(int ranks, int pieces, const LowerOptions& options) {
  lang::ProgramOptions po;
  po.name = options.name;
  po.collective = "alltoall";
  po.ranks = ranks;
  po.chunkFactor = pieces;
  po.inplace = false;
  po.protocol = options.protocol;
  po.instances = options.instances;
  // A threadblock per connection, as the forests have: a relay waiting for
  // its data must not hold up the sends beside it.
  po.pairThreadblocks = false;
  return po;
}

void recordAllToAll(lang::Program& p, const AllToAllPaths& paths) {
  const int ranks = p.options().ranks;
  const lang::Buffer relay = p.scratch("relay");
  std::vector<int> used(static_cast<size_t>(ranks), 0);  // relay chunks per rank
  const int k = p.options().chunkFactor;
  for (int s = 0; s < ranks; ++s) {
    // Its own block: one local copy.
    p.chunk(s, lang::kInput, s * k, k).copy(s, lang::kOutput, s * k);
    for (int d = 0; d < ranks; ++d) {
      if (d == s) continue;
      const std::vector<BlockPath>& ways = paths[static_cast<size_t>(s)][static_cast<size_t>(d)];
      // Pieces per path in proportion to its rate, the remainders to the
      // largest fractions.
      double total = 0;
      for (const BlockPath& w : ways) total += w.rate;
      std::vector<int> count(ways.size());
      std::vector<std::pair<double, size_t>> rest;
      int given = 0;
      for (size_t i = 0; i < ways.size(); ++i) {
        const double share = k * ways[i].rate / total;
        count[i] = static_cast<int>(std::floor(share));
        given += count[i];
        rest.emplace_back(share - count[i], i);
      }
      std::stable_sort(rest.begin(), rest.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (size_t i = 0; given < k; ++i, ++given) ++count[rest[i % rest.size()].second];
      int at = 0;
      for (size_t i = 0; i < ways.size(); ++i) {
        if (count[i] == 0) continue;
        const std::vector<int>& hops = ways[i].ranks;
        lang::Chunk c = p.chunk(s, lang::kInput, d * k + at, count[i]);
        for (size_t h = 1; h + 1 < hops.size(); ++h) {
          int& next = used[static_cast<size_t>(hops[h])];
          c = c.copy(hops[h], relay, next, {.channel = static_cast<int>(h - 1)});
          next += count[i];
        }
        c.copy(d, lang::kOutput, s * k + at,
               {.channel = static_cast<int>(std::min<size_t>(hops.size() - 2, 31))});
        at += count[i];
      }
    }
  }
}

compiler::Compiled lowerAllToAll(int ranks, const AllToAllPaths& paths, int pieces,
                                 const LowerOptions& options) {
  lang::Program p(allToAllProgramOptions(ranks, pieces, options));
  recordAllToAll(p, paths);
  return compiler::compile(p);
}

}  // namespace chorus::synth
