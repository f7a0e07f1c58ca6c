// All-pairs: every rank talks to every other directly.
//   allgather: every rank sends its block to every other rank (one step).
// Allreduce:
//   one step: every rank sends its whole input to every other rank, and
//             every rank sums all of them itself (latency-bound sizes);
//   two steps: rank r collects and sums chunk r from everyone (an all-pairs
//             reduce-scatter), then sends the sum to everyone (allgather).
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

void allPairsAllReduce1(Program& p) {
  const int n = p.options().ranks;
  Buffer theirs = p.scratch("theirs");
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < n; ++q)
      if (q != r) p.chunk(q, kInput, 0).copy(r, theirs, q);
  for (int r = 0; r < n; ++r) {
    Chunk sum = p.chunk(r, kInput, 0);
    for (int q = 0; q < n; ++q)
      if (q != r) sum = sum.reduce(p.chunk(r, theirs, q), kOutput, 0);
    if (n == 1 && !p.options().inplace) sum.copy(r, kOutput, 0);
  }
}

void allPairsAllReduce2(Program& p) {
  const int n = p.options().ranks;
  for (int r = 0; r < n; ++r) {
    Chunk sum = p.chunk(r, kInput, r);
    for (int q = 0; q < n; ++q)
      if (q != r) sum = sum.reduce(p.chunk(q, kInput, r), kOutput, r);
    if (n == 1 && !p.options().inplace) sum = sum.copy(r, kOutput, r);
    for (int q = 0; q < n; ++q)
      if (q != r) sum.copy(q, kOutput, r);
  }
}

void allPairsAllGather(Program& p) {
  const int n = p.options().ranks;
  for (int r = 0; r < n; ++r) {
    Chunk mine = p.chunk(r, kInput, 0);
    if (!p.options().inplace) mine.copy(r, kOutput, r);
    for (int q = 0; q < n; ++q)
      if (q != r) mine.copy(q, kOutput, r);
  }
}

// Per-rank forms (docs/scale.md): every exchange is one hop (depth 1); a
// rank's sum grows by one peer per depth.
void allPairsAllReduce1Rank(Program& p) {
  const int n = p.options().ranks, f = p.focus();
  Buffer theirs = p.scratch("theirs", n >= 2 ? n : 0);
  p.depth(1);
  for (int r = 0; r < n; ++r) {  // the whole program's (r, q) order, f's pairs only
    if (r != f) {
      p.chunk(f, kInput, 0).copy(r, theirs, f);
      continue;
    }
    for (int q = 0; q < n; ++q)
      if (q != r) p.chunk(q, kInput, 0).copy(r, theirs, q);
  }
  Chunk sum = p.chunk(f, kInput, 0);
  for (int q = 0, i = 1; q < n; ++q)
    if (q != f) {
      p.depth(1 + i++);
      sum = sum.reduce(p.chunk(f, theirs, q), kOutput, 0);
    }
  if (n == 1 && !p.options().inplace) {
    p.depth(1);
    sum.copy(f, kOutput, 0);
  }
}

void allPairsAllReduce2Rank(Program& p) {
  const int n = p.options().ranks, f = p.focus();
  for (int r = 0; r < n; ++r) {
    if (r != f) {  // f's chunk r joins r's sum as its i-th, and the total comes back
      const int i = f < r ? f + 1 : f;
      p.depth(i);
      p.chunk(r, i == 1 ? kInput : kOutput, r).reduce(p.chunk(f, kInput, r), kOutput, r);
      p.depth(n);
      p.chunk(r, kOutput, r).copy(f, kOutput, r);
      continue;
    }
    Chunk sum = p.chunk(r, kInput, r);
    for (int q = 0, i = 1; q < n; ++q)
      if (q != r) {
        p.depth(i++);
        sum = sum.reduce(p.chunk(q, kInput, r), kOutput, r);
      }
    if (n == 1 && !p.options().inplace) {
      p.depth(1);
      sum = sum.copy(r, kOutput, r);
    }
    p.depth(n);
    for (int q = 0; q < n; ++q)
      if (q != r) sum.copy(q, kOutput, r);
  }
}

void allPairsAllGatherRank(Program& p) {
  const int n = p.options().ranks, f = p.focus();
  p.depth(1);
  for (int r = 0; r < n; ++r) {
    Chunk mine = p.chunk(r, kInput, 0);
    if (r != f) {
      mine.copy(f, kOutput, r);
      continue;
    }
    if (!p.options().inplace) mine.copy(r, kOutput, r);
    for (int q = 0; q < n; ++q)
      if (q != r) mine.copy(q, kOutput, r);
  }
}

}  // namespace

void addAllPairsPrograms(std::vector<ProgramEntry>& out) {
  auto any = [](int n) { return n >= 1; };
  out.push_back({"allpairs_allgather",
                 "every rank sends its block to every other rank directly",
                 "allgather",
                 "any",
                 any,
                 [](const ProgramOptions&) { return 1; },
                 allPairsAllGather,
                 {},
                 allPairsAllGatherRank});
  out.push_back({"allpairs_allreduce_1step",
                 "every rank sends its input to all others and sums everything itself",
                 "allreduce",
                 "any",
                 any,
                 [](const ProgramOptions&) { return 1; },
                 allPairsAllReduce1,
                 {},
                 allPairsAllReduce1Rank});
  out.push_back({"allpairs_allreduce_2step",
                 "all-pairs reduce-scatter (rank r sums chunk r), then all-pairs allgather",
                 "allreduce",
                 "any",
                 any,
                 [](const ProgramOptions& o) { return o.ranks; },
                 allPairsAllReduce2,
                 {},
                 allPairsAllReduce2Rank});
}

}  // namespace chorus::lang
