// Binomial trees, any rank count.
//   allreduce: partial sums flow up a binomial tree to rank 0 (in step d
//     the ranks at odd multiples of d send to the rank d below), then the
//     sum flows back down the same tree;
//   gather / scatter (MPI's classic): the same tree rooted at the root, in
//     ranks relative to it; every rank passes on, in one message, the
//     blocks of its whole subtree (held in scratch in relative order).
#include <algorithm>

#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

void binomialAllReduce(Program& p) {
  const int n = p.options().ranks;
  std::vector<Chunk> sum;
  for (int r = 0; r < n; ++r) sum.push_back(p.chunk(r, kInput, 0));
  int top = 1;
  for (int d = 1; d < n; d *= 2) {
    for (int r = d; r < n; r += 2 * d)
      sum[static_cast<size_t>(r - d)] =
          sum[static_cast<size_t>(r - d)].reduce(sum[static_cast<size_t>(r)], kOutput, 0);
    top = d;
  }
  if (n == 1 && !p.options().inplace) sum[0] = sum[0].copy(0, kOutput, 0);
  for (int d = top; d >= 1 && n > 1; d /= 2)
    for (int r = 0; r + d < n; r += 2 * d) p.chunk(r, kOutput, 0).copy(r + d, kOutput, 0);
}

// The rank at distance v after the root, and the tree's widest step.
int real(const Program& p, int v) { return (p.options().root + v) % p.options().ranks; }
int widest(int n) {
  int top = 1;
  while (top * 2 < n) top *= 2;
  return top;
}

void binomialGather(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  Buffer held = p.scratch("subtree");  // block of relative rank j at index j
  for (int v = 1; v < n; ++v) p.chunk(real(p, v), kInput, 0).copy(real(p, v), held, v);
  for (int d = 1; d < n; d *= 2)
    for (int v = d; v < n; v += 2 * d)
      p.chunk(real(p, v), held, v, std::min(d, n - v)).copy(real(p, v - d), held, v);
  if (!p.options().inplace) p.chunk(root, kInput, 0).copy(root, kOutput, root);
  for (int v = 1; v < n; ++v) p.chunk(root, held, v).copy(root, kOutput, real(p, v));
}

void binomialScatter(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  Buffer held = p.scratch("subtree");
  for (int v = 1; v < n; ++v) p.chunk(root, kInput, real(p, v)).copy(root, held, v);
  for (int d = widest(n); d >= 1 && n > 1; d /= 2)
    for (int v = 0; v + d < n; v += 2 * d)
      p.chunk(real(p, v), held, v + d, std::min(d, n - v - d)).copy(real(p, v + d), held, v + d);
  if (!p.options().inplace) p.chunk(root, kInput, root).copy(root, kOutput, 0);
  for (int v = 1; v < n; ++v) p.chunk(real(p, v), held, v).copy(real(p, v), kOutput, 0);
}

// Per-rank forms (docs/scale.md). In relative ranks, v's parent is
// v - lowbit(v), and v's subtree spans min(lowbit(v), n - v) ranks (the
// root's: n); a binomial tree on m ranks is floor(log2 m) hops deep.
int lowbit(int v) { return v & -v; }
int log2floor(int m) {
  int k = 0;
  while ((2 << k) <= m) ++k;
  return k;
}
int popcount(int v) { return __builtin_popcount(static_cast<unsigned>(v)); }
int span(int n, int v) { return v == 0 ? n : std::min(lowbit(v), n - v); }

// Up: the reduction at level j (partner distance 2^j) has depth j + 1 (a
// receiver has received at every level below). Down: rank r's result is
// final at depth L + popcount(r) (L levels up), and it sends at one more.
void binomialAllReduceRank(Program& p) {
  const int n = p.options().ranks, f = p.focus();
  if (n == 1) return aloneRank(p);
  int levels = 0, top = 1;
  for (int d = 1; d < n; d *= 2) ++levels, top = d;
  auto sum = [&](int r, int level) {  // rank r's partial sum before `level`
    return level == 0 || r + 1 >= n ? p.chunk(r, kInput, 0) : p.chunk(r, kOutput, 0);
  };
  for (int j = 0, d = 1; d < n; ++j, d *= 2) {
    const bool receives = f % (2 * d) == 0 && f + d < n, sends = f % (2 * d) == d;
    if (!receives && !sends) continue;
    const int to = receives ? f : f - d, from = to + d;
    p.depth(j + 1);
    sum(to, j).reduce(sum(from, j), kOutput, 0);
  }
  for (int d = top; d >= 1; d /= 2) {
    const bool receives = f % (2 * d) == d, sends = f % (2 * d) == 0 && f + d < n;
    if (!receives && !sends) continue;
    const int from = sends ? f : f - d;
    p.depth(levels + popcount(from) + 1);
    p.chunk(from, kOutput, 0).copy(from + d, kOutput, 0);
  }
}

// A subtree's blocks reach its root at 1 + floor(log2 span) (1: its own
// copy into scratch) and go up one hop later.
void binomialGatherRank(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  const int v = (p.focus() - root + n) % n;
  Buffer held = p.scratch("subtree", n >= 2 ? n : 0);
  auto gathered = [&](int u) { return 1 + log2floor(span(n, u)); };
  if (v >= 1) {
    p.depth(1);
    p.chunk(real(p, v), kInput, 0).copy(real(p, v), held, v);
  }
  for (int d = 1; d < n; d *= 2) {
    if (v != 0 && d > lowbit(v)) break;
    if (v != 0 && d == lowbit(v)) {  // v sends its subtree up
      p.depth(1 + gathered(v));
      p.chunk(real(p, v), held, v, span(n, v)).copy(real(p, v - d), held, v);
      break;
    }
    if (v + d < n) {  // a child's subtree arrives
      p.depth(1 + gathered(v + d));
      p.chunk(real(p, v + d), held, v + d, span(n, v + d)).copy(real(p, v), held, v + d);
    }
  }
  if (v != 0) return;
  if (!p.options().inplace) {
    p.depth(1);
    p.chunk(root, kInput, 0).copy(root, kOutput, root);
  }
  for (int u = 1; u < n; ++u) {
    const int child = 1 << log2floor(u);  // the root's child whose subtree holds u
    p.depth(2 + gathered(child));
    p.chunk(root, held, u).copy(root, kOutput, real(p, u));
  }
}

// The blocks for relative rank u arrive at depth 1 + popcount(u) (the
// root's copies into scratch are at 1).
void binomialScatterRank(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  const int v = (p.focus() - root + n) % n;
  Buffer held = p.scratch("subtree", n >= 2 ? n : 0);
  if (v == 0)
    for (int u = 1; u < n; ++u) {
      p.depth(1);
      p.chunk(root, kInput, real(p, u)).copy(root, held, u);
    }
  for (int d = widest(n); d >= 1 && n > 1; d /= 2) {
    if (v != 0 && d == lowbit(v)) {  // v's blocks arrive from its parent
      p.depth(1 + popcount(v));
      p.chunk(real(p, v - d), held, v, span(n, v)).copy(real(p, v), held, v);
    } else if ((v == 0 || d < lowbit(v)) && v + d < n) {  // and go on to a child
      p.depth(1 + popcount(v + d));
      p.chunk(real(p, v), held, v + d, span(n, v + d)).copy(real(p, v + d), held, v + d);
    }
  }
  if (v == 0 && !p.options().inplace) {
    p.depth(1);
    p.chunk(root, kInput, root).copy(root, kOutput, 0);
  }
  if (v != 0) {
    p.depth(2 + popcount(v));
    p.chunk(real(p, v), held, v).copy(real(p, v), kOutput, 0);
  }
}

}  // namespace

void addTreePrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"binomial_allreduce",
                 "reduce up a binomial tree to rank 0, then broadcast down the same tree",
                 "allreduce",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 binomialAllReduce,
                 {},
                 binomialAllReduceRank});
  out.push_back({"binomial_gather",
                 "blocks flow up a binomial tree to the root, each rank sending its subtree's "
                 "blocks in one message",
                 "gather",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 binomialGather,
                 {"root"},
                 binomialGatherRank});
  out.push_back({"binomial_scatter",
                 "the root's blocks flow down a binomial tree, each rank passing on its "
                 "subtree's blocks in one message",
                 "scatter",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 binomialScatter,
                 {"root"},
                 binomialScatterRank});
}

}  // namespace chorus::lang
