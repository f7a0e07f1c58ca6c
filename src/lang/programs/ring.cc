// Rings: every chunk travels once around the ranks, reduced on the way
// (reduce-scatter), copied on the way (allgather), or both (allreduce: the
// reduce-scatter of each chunk ends where its allgather starts). Rank r's
// block k starts at rank k + 1 and its sum is complete at rank k.
//
// Every ring program reads two options: `--chunk-factor K` cuts each block
// into K pieces that follow one another around the ring (a pipelined ring:
// a rank forwards piece j while piece j + 1 arrives), and `--channels C`
// puts piece index i on channel i % C (C channels per ring, as MSCCLang's
// A100 rings do; each channel gets its own threadblocks).
#include "lang/programs/programs.h"

namespace chorus::lang {

namespace {

int next(int r, int step, int n) { return (r + step) % n; }

// The pieces of each rank's block, and the channel of chunk `index`.
int pieces(const Program& p, int base) { return p.options().chunkFactor / base; }
Hints on(const Program& p, int index) {
  const int c = p.options().channels;
  return c > 1 ? Hints{.channel = index % c} : Hints{};
}

void ringAllGather(Program& p) {
  const int n = p.options().ranks, k = pieces(p, 1);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < k; ++j) {
      const int index = r * k + j;
      Chunk c = p.chunk(r, kInput, j);
      if (!p.options().inplace) c.copy(r, kOutput, index);  // my own block
      for (int step = 1; step < n; ++step)
        c = c.copy(next(r, step, n), kOutput, index, on(p, index));
    }
}

// Partial sums of chunk `index` of `from` travel from rank `start` around
// the ring; `where(r)` says where rank r keeps what it reduced (the final
// rank: the result).
template <typename Where>
Chunk reduceAround(Program& p, Buffer from, int index, int start, Hints h, Where where) {
  const int n = p.options().ranks;
  Chunk c = p.chunk(start, from, index);
  for (int step = 1; step < n; ++step) {
    int r = next(start, step, n);
    auto [buffer, at] = where(r);
    c = p.chunk(r, from, index).reduce(c, buffer, at, h);
  }
  if (n == 1) {  // nothing to reduce: the result is the chunk itself
    auto [buffer, at] = where(start);
    if (!(buffer == from && at == index) && !(p.options().inplace && buffer == kOutput))
      c = c.copy(start, buffer, at);
  }
  return c;
}

void ringReduceScatter(Program& p) {
  const int n = p.options().ranks, k = pieces(p, 1);
  Buffer partial = p.scratch("partial");
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < k; ++j) {
      const int index = b * k + j;
      reduceAround(p, kInput, index, next(b, 1, n), on(p, index), [&](int r) {
        return r == b ? std::pair{kOutput, j} : std::pair{partial, index};
      });
    }
}

void ringAllReduce(Program& p) {
  const int n = p.options().ranks, k = pieces(p, n);
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < k; ++j) {
      // The sums accumulate in the output (in place: the one buffer).
      const int index = b * k + j;
      Chunk c = reduceAround(p, kInput, index, next(b, 1, n), on(p, index), [&](int) {
        return std::pair{kOutput, index};
      });
      for (int step = 1; step < n; ++step)
        c = c.copy(next(b, step, n), kOutput, index, on(p, index));
    }
}

// Rooted: each piece goes down the chain root, root + 1, ..., root - 1
// (broadcast), or is summed up it in the other direction, ending at the
// root (reduce; partial sums in scratch).
void ringBroadcast(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  for (int j = 0; j < p.options().chunkFactor; ++j) {
    Chunk c = p.chunk(root, kInput, j);
    if (!p.options().inplace) c.copy(root, kOutput, j);
    for (int step = 1; step < n; ++step) c = c.copy(next(root, step, n), kOutput, j, on(p, j));
  }
}

void ringReduce(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  Buffer partial = p.scratch("partial");
  for (int j = 0; j < p.options().chunkFactor; ++j)
    reduceAround(p, kInput, j, next(root, 1, n), on(p, j), [&](int r) {
      return r == root ? std::pair{kOutput, j} : std::pair{partial, j};
    });
}

// Per-rank forms (docs/scale.md, rank_ring.cc): what rank p.focus() does
// in each program above, each chunk in the order the whole program takes
// them, with the depth its schedule gives each hop.

// The ranks in ring order (member i is rank i).
RingOf ranksRing(const Program& p) {
  return {p.options().ranks, [](int i) { return i; }, p.focus()};
}

// reduceAround's n == 1 case: the result copied where it belongs.
template <typename Where>
void reduceAloneRank(Program& p, Buffer from, int index, Where where) {
  auto [buffer, at] = where(0);
  if (p.options().ranks != 1 || (buffer == from && at == index) ||
      (p.options().inplace && buffer == kOutput))
    return;
  p.depth(1);
  p.chunk(0, from, index).copy(0, buffer, at);
}

void ringAllGatherRank(Program& p) {
  const int n = p.options().ranks, k = pieces(p, 1), f = p.focus();
  p.reserve(2 * static_cast<size_t>(n) * static_cast<size_t>(k) + 1);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < k; ++j) {
      const int index = r * k + j;
      if (r == f && !p.options().inplace) {
        p.depth(1);
        p.chunk(r, kInput, j).copy(r, kOutput, index);
      }
      copyAroundRank(p, ranksRing(p), {r, kInput, j}, index, 1, on(p, index), 0);
    }
}

void ringReduceScatterRank(Program& p) {
  const int n = p.options().ranks, k = pieces(p, 1);
  p.reserve(2 * static_cast<size_t>(n) * static_cast<size_t>(k) + 1);
  Buffer partial = p.scratch("partial", n >= 3 ? n * k : 0);
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < k; ++j) {
      const int index = b * k + j;
      auto where = [&](int r) {
        return r == b ? std::pair{kOutput, j} : std::pair{partial, index};
      };
      reduceAroundRank(p, ranksRing(p), kInput, index, 1, next(b, 1, n), on(p, index), where, 0);
      reduceAloneRank(p, kInput, index, where);
    }
}

void ringAllReduceRank(Program& p) {
  const int n = p.options().ranks, k = pieces(p, n);
  p.reserve(4 * static_cast<size_t>(n) * static_cast<size_t>(k));  // two hops each way a chunk
  for (int b = 0; b < n; ++b)
    for (int j = 0; j < k; ++j) {
      const int index = b * k + j;
      auto where = [&](int) { return std::pair{kOutput, index}; };
      reduceAroundRank(p, ranksRing(p), kInput, index, 1, next(b, 1, n), on(p, index), where, 0);
      reduceAloneRank(p, kInput, index, where);
      copyAroundRank(p, ranksRing(p), {b, kOutput, index}, index, 1, on(p, index), n - 1);
    }
}

void ringBroadcastRank(Program& p) {
  const int root = p.options().root;
  for (int j = 0; j < p.options().chunkFactor; ++j) {
    if (p.focus() == root && !p.options().inplace) {
      p.depth(1);
      p.chunk(root, kInput, j).copy(root, kOutput, j);
    }
    copyAroundRank(p, ranksRing(p), {root, kInput, j}, j, 1, on(p, j), 0);
  }
}

void ringReduceRank(Program& p) {
  const int n = p.options().ranks, root = p.options().root;
  Buffer partial = p.scratch("partial", n >= 3 ? p.options().chunkFactor : 0);
  for (int j = 0; j < p.options().chunkFactor; ++j) {
    auto where = [&](int r) { return r == root ? std::pair{kOutput, j} : std::pair{partial, j}; };
    reduceAroundRank(p, ranksRing(p), kInput, j, 1, next(root, 1, n), on(p, j), where, 0);
    reduceAloneRank(p, kInput, j, where);
  }
}

bool any(int n) { return n >= 1; }
const std::vector<std::string> kRingOptions = {"chunk-factor", "channels"};
const std::vector<std::string> kRootedOptions = {"chunk-factor", "channels", "root"};

}  // namespace

void addRingPrograms(std::vector<ProgramEntry>& out) {
  auto times = [](int base) {
    return [base](const ProgramOptions& o) { return base == 0 ? o.ranks : base; };
  };
  out.push_back({"ring_allgather", "each rank's block travels once around the ring", "allgather",
                 "any", any, times(1), ringAllGather, kRingOptions, ringAllGatherRank});
  out.push_back({"ring_reducescatter",
                 "each block is summed around the ring, ending at its owner (partial sums in "
                 "scratch)",
                 "reducescatter", "any", any, times(1), ringReduceScatter, kRingOptions,
                 ringReduceScatterRank});
  out.push_back({"ring_allreduce",
                 "reduce-scatter then allgather around one ring, one chunk per rank", "allreduce",
                 "any", any, times(0), ringAllReduce, kRingOptions, ringAllReduceRank});
  out.push_back({"ring_broadcast",
                 "the root's buffer goes down the chain of ranks from the root, pipelined in "
                 "--chunk-factor pieces",
                 "broadcast", "any", any, times(1), ringBroadcast, kRootedOptions,
                 ringBroadcastRank});
  out.push_back({"ring_reduce",
                 "pieces are summed up the chain of ranks, ending at the root, pipelined in "
                 "--chunk-factor pieces",
                 "reduce", "any", any, times(1), ringReduce, kRootedOptions, ringReduceRank});
}

}  // namespace chorus::lang
