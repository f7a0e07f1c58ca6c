// Binomial trees: partial sums flow up a binomial tree to rank 0 (in step d
// the ranks at odd multiples of d send to the rank d below), then the sum
// flows back down the same tree. Any rank count.
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

}  // namespace

void addTreePrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"binomial_allreduce",
                 "reduce up a binomial tree to rank 0, then broadcast down the same tree",
                 "allreduce", "any", [](int n) { return n >= 1; },
                 [](const ProgramOptions&) { return 1; }, binomialAllReduce});
}

}  // namespace chorus::lang
