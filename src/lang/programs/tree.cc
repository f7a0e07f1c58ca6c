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

}  // namespace

void addTreePrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"binomial_allreduce",
                 "reduce up a binomial tree to rank 0, then broadcast down the same tree",
                 "allreduce", "any", [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; }, binomialAllReduce});
  out.push_back({"binomial_gather",
                 "blocks flow up a binomial tree to the root, each rank sending its subtree's "
                 "blocks in one message",
                 "gather",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 binomialGather,
                 {"root"}});
  out.push_back({"binomial_scatter",
                 "the root's blocks flow down a binomial tree, each rank passing on its "
                 "subtree's blocks in one message",
                 "scatter",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 binomialScatter,
                 {"root"}});
}

}  // namespace chorus::lang
