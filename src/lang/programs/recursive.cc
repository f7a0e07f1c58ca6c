// Recursive doubling and halving (powers of two): in step k every rank
// exchanges with the rank whose number differs in one bit.
//   allgather: the block range a rank holds doubles each step;
//   allreduce: recursive halving reduce-scatter (each step a rank keeps half
//              of its range, summed with its partner's), then recursive
//              doubling allgather of the sums.
#include <algorithm>

#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

bool powerOfTwo(int n) { return n >= 1 && (n & (n - 1)) == 0; }

void recursiveDoublingAllGather(Program& p) {
  const int n = p.options().ranks;
  if (!p.options().inplace)
    for (int r = 0; r < n; ++r) p.chunk(r, kInput, 0).copy(r, kOutput, r);
  for (int d = 1; d < n; d *= 2)
    for (int r = 0; r < n; ++r) {
      int base = r & ~(d - 1);
      p.chunk(r, kOutput, base, d).copy(r ^ d, kOutput, base);
    }
}

void halvingDoublingAllReduce(Program& p) {
  const int n = p.options().ranks;
  if (n == 1) {
    if (!p.options().inplace) p.chunk(0, kInput, 0).copy(0, kOutput, 0);
    return;
  }
  // Reduce-scatter: ranges of 2d chunks, halved each step; rank r keeps
  // the half its bit d selects. Step one reads the inputs, later ones the
  // partial sums in the output.
  std::vector<int> lo(static_cast<size_t>(n), 0);
  Buffer from = kInput;
  for (int d = n / 2; d >= 1; d /= 2) {
    for (int r = 0; r < n; ++r) {
      int keep = lo[static_cast<size_t>(r)] + ((r & d) != 0 ? d : 0);
      p.chunk(r, from, keep, d).reduce(p.chunk(r ^ d, from, keep, d), kOutput, keep);
    }
    for (int r = 0; r < n; ++r) lo[static_cast<size_t>(r)] += (r & d) != 0 ? d : 0;
    from = kOutput;
  }
  // Allgather of the sums: rank r holds chunk r, then ranges that double.
  for (int d = 1; d < n; d *= 2)
    for (int r = 0; r < n; ++r) {
      int base = r & ~(d - 1);
      p.chunk(r, kOutput, base, d).copy(r ^ d, kOutput, base);
    }
}

// Per-rank forms (docs/scale.md). Each exchange step is one depth after
// the one before; a rank's step touches it twice (its send, its partner's),
// recorded in rank order as the whole program's loop does.
void doublingRank(Program& p, int first) {
  const int n = p.options().ranks, f = p.focus();
  for (int d = 1, j = 0; d < n; d *= 2, ++j) {
    p.depth(first + j + 1);
    for (int r : {std::min(f, f ^ d), std::max(f, f ^ d)}) {
      int base = r & ~(d - 1);
      p.chunk(r, kOutput, base, d).copy(r ^ d, kOutput, base);
    }
  }
}

void recursiveDoublingAllGatherRank(Program& p) {
  const int f = p.focus();
  if (!p.options().inplace) {
    p.depth(1);
    p.chunk(f, kInput, 0).copy(f, kOutput, f);
  }
  doublingRank(p, p.options().inplace ? 0 : 1);
}

void halvingDoublingAllReduceRank(Program& p) {
  const int n = p.options().ranks, f = p.focus();
  if (n == 1) return aloneRank(p);
  int lo = 0, steps = 0;  // f and its partner share lo (their higher bits agree)
  Buffer from = kInput;
  for (int d = n / 2; d >= 1; d /= 2, ++steps) {
    p.depth(steps + 1);
    for (int r : {std::min(f, f ^ d), std::max(f, f ^ d)}) {
      int keep = lo + ((r & d) != 0 ? d : 0);
      p.chunk(r, from, keep, d).reduce(p.chunk(r ^ d, from, keep, d), kOutput, keep);
    }
    lo += (f & d) != 0 ? d : 0;
    from = kOutput;
  }
  doublingRank(p, steps);
}

}  // namespace

void addRecursivePrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"recursive_doubling_allgather",
                 "log2(n) exchanges with partners one bit apart; the held range doubles",
                 "allgather",
                 "powers of two",
                 powerOfTwo,
                 [](const ProgramOptions&) { return 1; },
                 recursiveDoublingAllGather,
                 {},
                 recursiveDoublingAllGatherRank});
  out.push_back({"halving_doubling_allreduce",
                 "recursive halving reduce-scatter, then recursive doubling allgather",
                 "allreduce",
                 "powers of two",
                 powerOfTwo,
                 [](const ProgramOptions& o) { return o.ranks; },
                 halvingDoublingAllReduce,
                 {},
                 halvingDoublingAllReduceRank});
}

}  // namespace chorus::lang
