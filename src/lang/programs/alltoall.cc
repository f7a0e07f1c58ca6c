// All-pairs exchanges: every rank sends each peer its block directly.
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

void allPairsAllToAll(Program& p) {
  const int n = p.options().ranks;
  const int c = p.options().chunkFactor;
  if (!p.options().inplace) {
    for (int r = 0; r < n; ++r)
      for (int q = 0; q < n; ++q) p.chunk(r, kInput, q * c, c).copy(q, kOutput, r * c);
    return;
  }
  // In place, block q of rank r is both what r sends to q and where q's
  // block lands: the blocks arrive in scratch and move in at the end.
  Buffer arrived = p.scratch("arrived");
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      if (q != r) p.chunk(r, kInput, q * c, c).copy(q, arrived, r * c);
  for (int q = 0; q < n; ++q)
    for (int r = 0; r < n; ++r)
      if (q != r) p.chunk(q, arrived, r * c, c).copy(q, kInput, r * c);
}

// Its per-rank form (docs/scale.md): every block is one hop (depth 1); in
// place, the moves out of scratch follow (depth 2).
void allPairsAllToAllRank(Program& p) {
  const int n = p.options().ranks, c = p.options().chunkFactor, f = p.focus();
  const bool inplace = p.options().inplace;
  Buffer arrived = inplace ? p.scratch("arrived", n >= 2 ? n * c : 0) : kOutput;
  p.depth(1);
  for (int r = 0; r < n; ++r)
    for (int q = r == f ? 0 : f; q < (r == f ? n : f + 1); ++q)
      if (!(inplace && q == r)) p.chunk(r, kInput, q * c, c).copy(q, arrived, r * c);
  if (!inplace) return;
  p.depth(2);
  for (int r = 0; r < n; ++r)
    if (r != f) p.chunk(f, arrived, r * c, c).copy(f, kInput, r * c);
}

}  // namespace

void addAllToAllPrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"allpairs_alltoall",
                 "every rank sends each peer its block directly",
                 "alltoall",
                 "any",
                 [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; },
                 allPairsAllToAll,
                 {},
                 allPairsAllToAllRank});
}

}  // namespace chorus::lang
