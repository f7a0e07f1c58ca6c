// Rings: every chunk travels once around the ranks, reduced on the way
// (reduce-scatter), copied on the way (allgather), or both (allreduce: the
// reduce-scatter of each chunk ends where its allgather starts). With one
// chunk per rank's share, rank r's chunk k starts at rank k + 1 and its sum
// is complete at rank k.
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

int next(int r, int step, int n) { return (r + step) % n; }

void ringAllGather(Program& p) {
  const int n = p.options().ranks;
  for (int r = 0; r < n; ++r) {
    Chunk c = p.chunk(r, kInput, 0);
    if (!p.options().inplace) c.copy(r, kOutput, r);  // my own block
    for (int step = 1; step < n; ++step) c = c.copy(next(r, step, n), kOutput, r);
  }
}

// Partial sums of chunk k travel from rank k + 1 to rank k; `last` says
// where each rank keeps what it reduced (the final rank: the result).
template <typename Where>
Chunk reduceAround(Program& p, Buffer from, int k, Where where) {
  const int n = p.options().ranks;
  int start = next(k, 1, n);
  Chunk c = p.chunk(start, from, k);
  for (int step = 1; step < n; ++step) {
    int r = next(start, step, n);
    auto [buffer, index] = where(r);
    c = p.chunk(r, from, k).reduce(c, buffer, index);
  }
  if (n == 1) {  // nothing to reduce: the result is the chunk itself
    auto [buffer, index] = where(k);
    if (!(buffer == from && index == k) && !(p.options().inplace && buffer == kOutput))
      c = c.copy(k, buffer, index);
  }
  return c;
}

void ringReduceScatter(Program& p) {
  const int n = p.options().ranks;
  Buffer partial = p.scratch("partial");
  for (int k = 0; k < n; ++k)
    reduceAround(p, kInput, k, [&](int r) {
      return r == k ? std::pair{kOutput, 0} : std::pair{partial, k};
    });
}

void ringAllReduce(Program& p) {
  const int n = p.options().ranks;
  for (int k = 0; k < n; ++k) {
    // The sums accumulate in the output (in place: the one buffer).
    Chunk c = reduceAround(p, kInput, k, [&](int) { return std::pair{kOutput, k}; });
    for (int step = 1; step < n; ++step) c = c.copy(next(k, step, n), kOutput, k);
  }
}

bool any(int n) { return n >= 1; }
int one(int) { return 1; }
int perRank(int n) { return n; }

}  // namespace

void addRingPrograms(std::vector<ProgramEntry>& out) {
  out.push_back({"ring_allgather", "each rank's block travels once around the ring", "allgather",
                 "any", any, one, ringAllGather});
  out.push_back({"ring_reducescatter",
                 "each block is summed around the ring, ending at its owner (partial sums in "
                 "scratch)",
                 "reducescatter", "any", any, one, ringReduceScatter});
  out.push_back({"ring_allreduce",
                 "reduce-scatter then allgather around one ring, one chunk per rank", "allreduce",
                 "any", any, perRank, ringAllReduce});
}

}  // namespace chorus::lang
