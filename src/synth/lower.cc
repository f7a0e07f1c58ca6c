#include "synth/lower.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "core/check.h"

namespace chorus::synth {

namespace {

// MSCCL's executor's channel limit (docs/spec/IR.md section 6).
constexpr int kChannels = 32;

// Pieces of each rank's block: a common refinement of both forests'.
int piecesPerBlock(const Forest* gather, const Forest* scatter) {
  int k = 1;
  if (gather != nullptr) k = std::lcm(k, gather->k);
  if (scatter != nullptr) k = std::lcm(k, scatter->k);
  return k;
}

// The channel of every tree edge, one piece at a time: [forest][tree]
// [piece][edge]. Links are shared equally among the connections using
// them (max-min fairly in the simulator; NVLink and NICs interleave
// channels alike), while the forest wants each rank-to-rank arc to carry its
// pieces at its own rate. So inside a box each piece crossing an arc gets a
// connection of its own where the channels allow (min(kChannels, pieces /
// per connection) connections, pieces split evenly): a link's connections
// then carry equal loads and equal sharing gives every arc its rate. Pieces
// sharing a connection are the ones whose data reaches the sender together
// (by depth in their trees), so a threadblock's steps do not wait on each
// other's data.
// An arc between boxes (a NIC's) gets one connection per depth instead in
// a broadcast forest: with a connection per piece, every piece crossing
// the slow link would deliver its last slice at the very end, all to be
// forwarded at once; queued on one connection they arrive one after
// another, and the forwarding of each overlaps the next's transfer.
// Measured on 2 x DGX A100 allgather at 1 GiB: 74.8 % of the optimum with
// a channel per tree, 84.7 % with a connection per piece everywhere,
// 95.6 % with the boxes' arcs by depth and two chunks per piece
// (docs/synthesis.md). A reduce forest's pieces keep a connection each
// there too: its sums are ready when the box has reduced them, not in
// one queue's order, and a queue holds the ready ones behind the late
// (MI250 reduce-scatter, rail forest: 2 boxes 75.9 -> 82.8 %, 4 boxes
// 61.6 -> 68.1 %; DGX boxes unchanged).
using EdgeChannels = std::vector<std::vector<std::vector<std::vector<int>>>>;

// `forests`: each with whether its data flows up (reduce trees: from `to`
// to `from`, leaves first). `boxes`: each rank's box (empty: one box).
EdgeChannels assignChannels(const std::vector<std::pair<const Forest*, bool>>& forests, int k,
                            int ranks, int perConnection, const std::vector<int>& boxes) {
  struct Use {
    int ready, forest, tree, piece, edge;
  };
  const size_t n = static_cast<size_t>(ranks);
  std::vector<std::vector<Use>> arcs(n * n);
  EdgeChannels out(forests.size());
  for (size_t fi = 0; fi < forests.size(); ++fi) {
    const auto [forest, up] = forests[fi];
    const Forest& f = *forest;
    const int scale = k / f.k;
    out[fi].resize(f.trees.size());
    for (size_t ti = 0; ti < f.trees.size(); ++ti) {
      const Tree& t = f.trees[ti];
      const int pieces = static_cast<int>(t.weight) * scale;
      std::vector<int> depth(n, 0);
      for (auto [a, b] : t.edges) depth[static_cast<size_t>(b)] = depth[static_cast<size_t>(a)] + 1;
      out[fi][ti].assign(static_cast<size_t>(pieces), std::vector<int>(t.edges.size(), 0));
      for (int piece = 0; piece < pieces; ++piece)
        for (size_t e = 0; e < t.edges.size(); ++e) {
          auto [a, b] = t.edges[e];
          const int from = up ? b : a, to = up ? a : b;
          // When its data is ready at `from`: down a tree by a's depth, up
          // one leaves first.
          const int ready = up ? -depth[static_cast<size_t>(b)] : depth[static_cast<size_t>(a)];
          arcs[static_cast<size_t>(from) * n + static_cast<size_t>(to)].push_back(
              {ready, static_cast<int>(fi), static_cast<int>(ti), piece, static_cast<int>(e)});
        }
    }
  }
  auto channelOf = [&out](const Use& u) -> int& {
    return out[static_cast<size_t>(u.forest)][static_cast<size_t>(u.tree)]
              [static_cast<size_t>(u.piece)][static_cast<size_t>(u.edge)];
  };
  for (size_t arc = 0; arc < arcs.size(); ++arc) {
    std::vector<Use>& uses = arcs[arc];
    if (uses.empty()) continue;
    std::stable_sort(uses.begin(), uses.end(), [](const Use& x, const Use& y) {
      return std::tie(x.forest, x.ready) < std::tie(y.forest, y.ready);
    });
    const bool betweenBoxes = !boxes.empty() && boxes[arc / n] != boxes[arc % n];
    const size_t per = static_cast<size_t>(std::max(1, perConnection));
    // uses[begin, end) spread evenly over channels from `base` on, per
    // connection at a time (at most kChannels); returns the last channel.
    auto spreadEvenly = [&](size_t begin, size_t end, int base) {
      const size_t count = end - begin;
      const size_t m = std::min<size_t>(kChannels, (count + per - 1) / per);
      int last = base;
      for (size_t i = begin; i < end; ++i)
        last = channelOf(uses[i]) =
            std::min(base + static_cast<int>((i - begin) * m / count), kChannels - 1);
      return last;
    };
    if (!betweenBoxes) {
      spreadEvenly(0, uses.size(), 0);
      continue;
    }
    // Between boxes, forest after forest: a reduce forest's pieces spread
    // evenly, a broadcast forest's one connection per depth.
    int next = 0;  // the first channel the forest may take
    for (size_t begin = 0; begin < uses.size();) {
      size_t end = begin;
      while (end < uses.size() && uses[end].forest == uses[begin].forest) ++end;
      int last = next;
      if (forests[static_cast<size_t>(uses[begin].forest)].second) {
        last = spreadEvenly(begin, end, next);
      } else {
        int level = next;
        for (size_t i = begin; i < end; ++i) {
          if (i > begin && uses[i].ready != uses[i - 1].ready) ++level;
          last = channelOf(uses[i]) = std::min(level, kChannels - 1);
        }
      }
      next = last + 1;
      begin = end;
    }
  }
  return out;
}

// Calls visit(tree, first piece, channel of each edge) for every piece of
// every tree: the pieces of a root's block are numbered 0.. in units of 1/k.
// A piece is `chunks` consecutive chunks, each sent down the piece's tree
// in turn (visit's `first` counts chunks).
template <typename Visit>
void eachTree(const Forest& f, const std::vector<std::vector<std::vector<int>>>& channels, int k,
              int chunks, int ranks, Visit visit) {
  // Where each tree's pieces start in its root's block.
  std::vector<int> next(static_cast<size_t>(ranks), 0), start(f.trees.size());
  const int scale = k / f.k;
  for (size_t ti = 0; ti < f.trees.size(); ++ti) {
    int& at = next[static_cast<size_t>(f.trees[ti].root)];
    start[ti] = at;
    at += static_cast<int>(f.trees[ti].weight) * scale;
  }
  // Every piece's first chunk, then every piece's second, ...: a
  // connection's threadblock sends in this order, and a piece's later chunk
  // reaches the sender after the other pieces' earlier ones.
  for (int c = 0; c < chunks; ++c)
    for (size_t ti = 0; ti < f.trees.size(); ++ti) {
      const Tree& t = f.trees[ti];
      const int pieces = static_cast<int>(t.weight) * scale;
      for (int piece = 0; piece < pieces; ++piece)
        visit(t, (start[ti] + piece) * chunks + c, channels[ti][static_cast<size_t>(piece)]);
    }
}

// Where `root`'s block starts in a buffer holding every rank's (broadcast
// and reduce have one block, the root's).
int blockOf(const lang::Program& p, int root, int k) {
  const std::string& c = p.options().collective;
  return c == "broadcast" || c == "reduce" ? 0 : root * k;
}

// Copies block pieces down the allgather trees from where `source(root,
// first)` holds them.
template <typename Source>
void broadcastDown(lang::Program& p, const Forest& f, const EdgeChannels::value_type& channels,
                   int k, int chunks, Source source) {
  const int n = p.options().ranks;
  eachTree(f, channels, k, chunks, n,
           [&](const Tree& t, int first, const std::vector<int>& channel) {
             const int index = blockOf(p, t.root, k * chunks) + first;
             std::vector<lang::Chunk> at(static_cast<size_t>(n));
             at[static_cast<size_t>(t.root)] = source(t.root, first);
             // Chunk c of a piece starts at round c (Hints::round): pipelined.
             const int round = first % chunks;
             for (size_t e = 0; e < t.edges.size(); ++e) {
               auto [a, b] = t.edges[e];
               at[static_cast<size_t>(b)] = at[static_cast<size_t>(a)].copy(
                   b, lang::kOutput, index, {.channel = channel[e], .round = round});
             }
           });
}

// Reduces block pieces up the (reversed) reduce-scatter trees; the root's
// sum goes to `result(root, first)` = (buffer, index), the other ranks'
// partial sums to scratch.
template <typename Result>
void reduceUp(lang::Program& p, const Forest& f, const EdgeChannels::value_type& channels, int k,
              int chunks, lang::Buffer input, Result result) {
  const int n = p.options().ranks;
  lang::Buffer partial = p.scratch("partial");
  eachTree(
      f, channels, k, chunks, n, [&](const Tree& t, int first, const std::vector<int>& channel) {
        const int index = blockOf(p, t.root, k * chunks) + first;
        std::vector<lang::Chunk> sum(static_cast<size_t>(n));
        auto current = [&](int r) {
          lang::Chunk& c = sum[static_cast<size_t>(r)];
          return c.valid() ? c : p.chunk(r, input, index, 1);
        };
        // Leaves first: a rank sends its sum once every child has added
        // theirs. Chunk c of a piece starts at round c (Hints::round).
        for (size_t e = t.edges.size(); e-- > 0;) {
          auto [to, from] = t.edges[e];  // the reversed forest: data flows from `from` to `to`
          const lang::Hints h{.channel = channel[e], .round = first % chunks};
          lang::Chunk incoming = current(from);
          lang::Chunk& mine = sum[static_cast<size_t>(to)];
          if (mine.valid()) {
            mine = mine.reduce(incoming, h);
          } else {
            auto [buffer, at] = to == t.root ? result(t.root, first) : std::pair{partial, index};
            mine = p.chunk(to, input, index, 1).reduce(incoming, buffer, at, h);
          }
        }
      });
}

}  // namespace

lang::ProgramOptions forestProgramOptions(CollectiveKind collective, int ranks,
                                          const Forest* gather, const Forest* scatter,
                                          const LowerOptions& options) {
  // Gathering collectives need the gather forest, reducing ones the scatter
  // forest, allreduce both.
  const bool ag =
      collective == CollectiveKind::kAllGather || collective == CollectiveKind::kBroadcast;
  const bool rs =
      collective == CollectiveKind::kReduceScatter || collective == CollectiveKind::kReduce;
  const bool ar = collective == CollectiveKind::kAllReduce;
  CHORUS_CHECK((ag || rs || ar) && (ag || scatter != nullptr) && (rs || gather != nullptr),
               "a forest program needs the forests of its collective");
  const int k = piecesPerBlock(rs ? nullptr : gather, ag ? nullptr : scatter);
  lang::ProgramOptions po;
  po.name = options.name;
  po.collective = std::string(collectiveName(collective));
  po.ranks = ranks;
  po.chunkFactor = (ar ? ranks * k : k) * std::max(1, options.chunksPerPiece);
  po.inplace = options.inplace;
  po.protocol = options.protocol;
  po.instances = options.instances;
  // A threadblock per connection: one connection's pieces waiting for data
  // would otherwise hold up another's (assignChannels).
  po.pairThreadblocks = false;
  if (collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce)
    po.root = (ag ? gather : scatter)->trees.front().root;
  return po;
}

void recordForests(lang::Program& p, const Forest* gather, const Forest* scatter,
                   const LowerOptions& options) {
  const std::string& coll = p.options().collective;
  const bool ag = coll == "allgather" || coll == "broadcast";
  const bool rs = coll == "reducescatter" || coll == "reduce";
  const bool inplace = p.options().inplace;
  const int k = piecesPerBlock(rs ? nullptr : gather, ag ? nullptr : scatter);
  std::vector<std::pair<const Forest*, bool>> forests;
  if (!ag) forests.emplace_back(scatter, true);
  if (!rs) forests.emplace_back(gather, false);
  const EdgeChannels channels =
      assignChannels(forests, k, p.options().ranks, options.piecesPerConnection, options.boxes);
  const int c = std::max(1, options.chunksPerPiece);
  if (ag) {
    // Each root's own block, unless the buffers are one: a copy per piece
    // on a threadblock of its own (0), as the trees send from the input
    // beside it (a copy per chunk would put k x c steps on it, past the
    // executor's 64; one copy of the block, past its count limit).
    if (!inplace) {
      std::vector<char> root(static_cast<size_t>(p.options().ranks), 0);
      for (const Tree& t : gather->trees) root[static_cast<size_t>(t.root)] = 1;
      for (int r = 0; r < p.options().ranks; ++r)
        for (int piece = 0; piece < k && root[static_cast<size_t>(r)]; ++piece)
          p.chunk(r, lang::kInput, piece * c, c)
              .copy(r, lang::kOutput, blockOf(p, r, k * c) + piece * c, {.sendTb = 0});
    }
    broadcastDown(p, *gather, channels[0], k, c,
                  [&](int root, int first) { return p.chunk(root, lang::kInput, first, 1); });
  } else if (rs) {
    reduceUp(p, *scatter, channels[0], k, c, lang::kInput, [&](int, int first) {
      return std::pair{lang::kOutput, first};
    });
  } else {
    // The sums land in the output (in place: the one buffer), where the
    // allgather trees pick them up (their connections after the reduce
    // trees' on each arc: assignChannels).
    reduceUp(p, *scatter, channels[0], k, c, lang::kInput, [&](int root, int first) {
      return std::pair{lang::kOutput, root * k * c + first};
    });
    broadcastDown(p, *gather, channels[1], k, c, [&](int root, int first) {
      return p.chunk(root, lang::kOutput, root * k * c + first, 1);
    });
  }
}

compiler::Compiled lowerForests(CollectiveKind collective, int ranks, const Forest* gather,
                                const Forest* scatter, const LowerOptions& options) {
  lang::Program p(forestProgramOptions(collective, ranks, gather, scatter, options));
  recordForests(p, gather, scatter, options);
  return compiler::compile(p);
}

}  // namespace chorus::synth
