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

}  // namespace

void addAllToAllPrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"allpairs_alltoall", "every rank sends each peer its block directly", "alltoall",
                 "any", [](int n) { return n >= 1; }, [](const ProgramOptions&) { return 1; },
                 allPairsAllToAll});
}

}  // namespace chorus::lang
