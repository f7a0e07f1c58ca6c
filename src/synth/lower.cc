#include "synth/lower.h"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <tuple>

#include "core/check.h"
#include "ir/validate.h"
#include "lang/collectives.h"

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

// The channel of every tree edge, one piece at a time, and how many pieces
// share that connection: [forest][tree][piece][edge]. Links are shared equally among the
// connections using them (max-min fairly in the simulator; NVLink and NICs interleave channels
// alike), while the forest wants each rank-to-rank arc to carry its pieces at its own rate. So
// inside a box each piece crossing an arc gets a connection of its own where the channels allow
// (min(kChannels, pieces / per connection) connections, pieces split evenly): a link's connections
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
struct Lane {
  int channel = 0;
  int sharing = 1;  // pieces on the connection (this arc, this channel)
  int group = 1;    // chunks per step (chunksPerStep)
};
using EdgeChannels = std::vector<std::vector<std::vector<std::vector<Lane>>>>;

// Chunks per step on an edge: one, unless its connection's pieces would
// then pass the target's steps per threadblock (maxSteps; none for
// Chorus's runtimes); then the fewest that fit.
// A step of g chunks moves g consecutive chunks of its piece (cnt = g), so
// a piece keeps its fine chunks on the arcs where few pieces share a
// connection and takes coarser ones only where many do. A hop takes about
// (chunk bytes) / (the connection's share of its link) either way, and the
// fill and drain of a deep tree cost a few hops: with one chunk size for
// all, the busiest connection's 64 steps set it for every arc (4 x MI250:
// 3 pieces per connection on the 200 GB/s links, 20 chunks, where the 50
// GB/s links' connections, one piece each, could take 64).
int chunksPerStep(int sharing, int chunks, int maxSteps) {
  int g = 1;
  while (maxSteps > 0 && g < chunks && sharing * ((chunks + g - 1) / g) > maxSteps) ++g;
  return g;
}

// Whether `root`, `from` and `to` are in one box.
bool inBox(const std::vector<int>& boxes, int root, int from, int to) {
  const int box = boxes[static_cast<size_t>(root)];
  return boxes[static_cast<size_t>(from)] == box && boxes[static_cast<size_t>(to)] == box;
}

// Whether an edge's ends are in two boxes.
bool betweenBoxes(const std::vector<int>& boxes, std::pair<int, int> edge) {
  return boxes[static_cast<size_t>(edge.first)] != boxes[static_cast<size_t>(edge.second)];
}

// `forests`: each with whether its data flows up (reduce trees: from `to`
// to `from`, leaves first). From `o`: the pieces per connection, each
// rank's box (`boxes`, empty: one box), and where a box's own pieces (of
// roots in the box, on arcs inside it) go:
// - `laterLocalSums`: inside a box, each connection takes a reduce
//   forest's sums bound for other boxes first and the box's own last, the
//   connections in turn rather than one after another, so that most
//   connections carry both;
// - `fewerLocalConnections` = d: a broadcast forest's own pieces take 1/d
//   of an arc's connections, the pieces from other boxes the rest.
EdgeChannels assignChannels(const std::vector<std::pair<const Forest*, bool>>& forests, int k,
                            int ranks, const LowerOptions& o) {
  const std::vector<int>& boxes = o.boxes;
  const bool localLast = o.laterLocalSums > 0 && !boxes.empty();
  const size_t fewer =
      boxes.empty() ? 0 : static_cast<size_t>(std::max(0, o.fewerLocalConnections));
  struct Use {
    int ready, forest, tree, piece, edge;
    bool local;  // a piece of a root in its sender's box, inside the box (see above)
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
      out[fi][ti].assign(static_cast<size_t>(pieces), std::vector<Lane>(t.edges.size()));
      for (int piece = 0; piece < pieces; ++piece)
        for (size_t e = 0; e < t.edges.size(); ++e) {
          auto [a, b] = t.edges[e];
          const int from = up ? b : a, to = up ? a : b;
          // When its data is ready at `from`: down a tree by a's depth, up
          // one leaves first.
          const int ready = up ? -depth[static_cast<size_t>(b)] : depth[static_cast<size_t>(a)];
          const bool local = (up ? localLast : fewer > 0) && inBox(boxes, t.root, from, to);
          arcs[static_cast<size_t>(from) * n + static_cast<size_t>(to)].push_back(
              {ready, static_cast<int>(fi), static_cast<int>(ti), piece, static_cast<int>(e),
               local});
        }
    }
  }
  auto laneOf = [&out](const Use& u) -> Lane& {
    return out[static_cast<size_t>(u.forest)][static_cast<size_t>(u.tree)]
              [static_cast<size_t>(u.piece)][static_cast<size_t>(u.edge)];
  };
  auto channelOf = [&](const Use& u) -> int& { return laneOf(u).channel; };
  for (size_t arc = 0; arc < arcs.size(); ++arc) {
    std::vector<Use>& uses = arcs[arc];
    if (uses.empty()) continue;
    std::stable_sort(uses.begin(), uses.end(), [](const Use& x, const Use& y) {
      return std::tie(x.forest, x.local, x.ready) < std::tie(y.forest, y.local, y.ready);
    });
    const bool betweenBoxes = !boxes.empty() && boxes[arc / n] != boxes[arc % n];
    const size_t per = static_cast<size_t>(std::max(1, o.piecesPerConnection));
    // uses[begin, end) spread evenly over channels from `base` on, per
    // connection at a time (at most `most`), or dealt out in turn
    // (`localLast`); returns the last channel.
    auto spreadEvenly = [&](size_t begin, size_t end, int base, int most) {
      const size_t count = end - begin;
      size_t m = std::min<size_t>(static_cast<size_t>(std::max(1, most)), (count + per - 1) / per);
      // The pieces from (or sums for) other boxes: the first `others`.
      const size_t others = static_cast<size_t>(std::count_if(
          uses.begin() + static_cast<std::ptrdiff_t>(begin),
          uses.begin() + static_cast<std::ptrdiff_t>(end), [](const Use& u) { return !u.local; }));
      if (fewer > 0 && others > 0 && others < count && m >= 2) {
        // The box's own pieces on the last 1/d of the connections.
        const size_t mine = std::min(count - others, std::max<size_t>(1, m / fewer));
        const size_t theirs = std::min(others, m - mine);
        for (size_t i = begin; i < end; ++i) {
          const size_t j = i - begin;
          channelOf(uses[i]) = std::min(
              base + static_cast<int>(j < others ? j * theirs / others
                                                 : theirs + (j - others) * mine / (count - others)),
              kChannels - 1);
        }
        return std::min(base + static_cast<int>(theirs + mine) - 1, kChannels - 1);
      }
      // As many connections as sums bound for other boxes at most, so that
      // each of the box's own sums follows one of those on its connection.
      if (localLast && others > 0) m = std::min(m, others);
      for (size_t i = begin; i < end; ++i)
        channelOf(uses[i]) =
            std::min(base + static_cast<int>(localLast ? (i - begin) % m : (i - begin) * m / count),
                     kChannels - 1);
      return std::min(base + static_cast<int>(m) - 1, kChannels - 1);
    };
    if (!betweenBoxes) {
      // Halves in turn: each forest over all the channels, as if alone.
      for (size_t begin = 0, end = 0; begin < uses.size(); begin = end) {
        end = o.halvesInTurn ? begin : uses.size();
        while (end < uses.size() && uses[end].forest == uses[begin].forest) ++end;
        spreadEvenly(begin, end, 0, kChannels);
      }
      continue;
    }
    // Between boxes, forest after forest: a reduce forest's pieces spread
    // evenly, a broadcast forest's one connection per depth. A depth of
    // more pieces than the executor's steps per threadblock takes another
    // connection every so many, and a reduce forest leaves the channels a
    // broadcast forest after it needs (asym6's allreduce: the reduce
    // forest took all 32, and the broadcast forest's depths all landed on
    // the last, 81 pieces on one connection).
    // (64 pieces a connection at most for every target: a depth of more is
    // slow on one connection whatever the executor allows.)
    std::vector<int> level(uses.size(), 0);  // a broadcast forest's uses: the connection's
    std::vector<size_t> ends;
    for (size_t begin = 0; begin < uses.size();) {
      size_t end = begin;
      while (end < uses.size() && uses[end].forest == uses[begin].forest) ++end;
      for (size_t i = begin + 1, onLevel = 1; i < end; ++i, ++onLevel) {
        level[i] = level[i - 1];
        if (uses[i].ready != uses[i - 1].ready || onLevel == ir::kMscclMaxSteps) {
          ++level[i];
          onLevel = 0;
        }
      }
      ends.push_back(end);
      begin = end;
    }
    int next = 0;  // the first channel the forest may take
    for (size_t f = 0, begin = 0; f < ends.size(); begin = ends[f++]) {
      const size_t end = ends[f];
      int last = next;
      if (forests[static_cast<size_t>(uses[begin].forest)].second) {
        int later = 0;  // connections the broadcast forests after it take
        for (size_t g = f + 1; g < ends.size() && !o.halvesInTurn; ++g)
          if (!forests[static_cast<size_t>(uses[ends[g - 1]].forest)].second)
            later += level[ends[g] - 1] + 1;
        last = spreadEvenly(begin, end, next, kChannels - next - later);
      } else {
        for (size_t i = begin; i < end; ++i)
          last = channelOf(uses[i]) = std::min(next + level[i], kChannels - 1);
      }
      next = o.halvesInTurn ? 0 : last + 1;  // in turn: each forest from channel 0
    }
  }
  // How many pieces each connection carries, and so its chunks per step.
  const int chunks = std::max(1, o.chunksPerPiece);
  for (const std::vector<Use>& uses : arcs) {
    std::vector<int> count(kChannels, 0);
    for (const Use& u : uses) ++count[static_cast<size_t>(channelOf(u))];
    for (const Use& u : uses) {
      Lane& lane = laneOf(u);
      lane.sharing = count[static_cast<size_t>(lane.channel)];
      lane.group = chunksPerStep(lane.sharing, chunks, maxSteps(o.target));
    }
  }
  return out;
}

// A tree's edges next to each edge: those into its upper end `a`
// (feeding it, in a broadcast) and those out of its lower end `b` (its
// sources, in a reduction).
struct TreeLinks {
  std::vector<int> into;                   // per edge: the edge ending at its a, or -1
  std::vector<std::vector<int>> children;  // per edge: edges starting at its b
};

TreeLinks linksOf(const Tree& t, int ranks) {
  TreeLinks l;
  std::vector<int> into(static_cast<size_t>(ranks), -1);
  std::vector<std::vector<int>> out(static_cast<size_t>(ranks));
  for (size_t e = 0; e < t.edges.size(); ++e) {
    into[static_cast<size_t>(t.edges[e].second)] = static_cast<int>(e);
    out[static_cast<size_t>(t.edges[e].first)].push_back(static_cast<int>(e));
  }
  for (auto [a, b] : t.edges) {
    l.into.push_back(into[static_cast<size_t>(a)]);
    l.children.push_back(out[static_cast<size_t>(b)]);
  }
  return l;
}

// One piece on its way: the chunks each edge has moved, in steps of
// `group[e]` chunks (chunksPerStep). In a reduction each rank's first sum
// comes from one edge into it, `maker[e]` for every edge into the same
// rank: the one of finest steps (the first of them leaves first), or
// where the own sums lag (reduceUp) one from another box; the others add
// to it, the chunks it has made only.
struct PieceRun {
  const Tree* tree = nullptr;
  const TreeLinks* links = nullptr;
  const std::vector<Lane>* lanes = nullptr;
  int first = 0;  // the piece's first chunk in its root's block
  std::vector<int> group, moved, maker;
};

// Calls visit(run, c) for chunk c = 0, 1, ... of every piece of every tree,
// every piece's chunk c before any piece's chunk c + 1: a connection's
// threadblock sends in this order, and a piece's later chunk reaches the
// sender after the other pieces' earlier ones. The pieces of a root's block
// are numbered 0.. in units of 1/k, a piece is `chunks` consecutive chunks.
// `crossFirst`: each rank's box, where an edge between boxes makes the sum
// of its upper end (null: the finest steps do).
template <typename Visit>
void eachTree(const Forest& f, const std::vector<std::vector<std::vector<Lane>>>& lanes, int k,
              int chunks, int ranks, const std::vector<int>* crossFirst, Visit visit) {
  std::vector<TreeLinks> links;
  for (const Tree& t : f.trees) links.push_back(linksOf(t, ranks));
  std::vector<int> maker(static_cast<size_t>(ranks), -1);  // per upper end, while a run is made
  // Where each tree's pieces start in its root's block.
  std::vector<int> next(static_cast<size_t>(ranks), 0);
  std::vector<PieceRun> runs;
  const int scale = k / f.k;
  for (size_t ti = 0; ti < f.trees.size(); ++ti) {
    const Tree& t = f.trees[ti];
    int& at = next[static_cast<size_t>(t.root)];
    for (int piece = 0; piece < static_cast<int>(t.weight) * scale; ++piece) {
      PieceRun r{&t,
                 &links[ti],
                 &lanes[ti][static_cast<size_t>(piece)],
                 (at + piece) * chunks,
                 {},
                 std::vector<int>(t.edges.size(), 0),
                 {}};
      for (const Lane& lane : *r.lanes) r.group.push_back(lane.group);
      auto crosses = [&](size_t e) {
        return crossFirst != nullptr && betweenBoxes(*crossFirst, t.edges[e]);
      };
      for (size_t e = t.edges.size(); e-- > 0;) {
        int& m = maker[static_cast<size_t>(t.edges[e].first)];
        const auto mi = static_cast<size_t>(m);
        if (m < 0 || (crosses(e) && !crosses(mi)) ||
            (crosses(e) == crosses(mi) && r.group[e] < r.group[mi]))
          m = static_cast<int>(e);
      }
      for (auto [a, b] : t.edges) r.maker.push_back(maker[static_cast<size_t>(a)]);
      for (auto [a, b] : t.edges) maker[static_cast<size_t>(a)] = -1;
      runs.push_back(std::move(r));
    }
    at += static_cast<int>(t.weight) * scale;
  }
  for (int c = 0; c < chunks; ++c)
    for (PieceRun& r : runs) visit(r, c);
}

// Moves edge e's next steps of `run` whose chunks are below `ready`:
// move(first chunk, chunks) for each.
template <typename Move>
bool advance(PieceRun& run, size_t e, int ready, int chunks, Move move) {
  bool any = false;
  for (int& moved = run.moved[e]; moved < ready;) {
    const int size = std::min(run.group[e], chunks - moved);
    if (moved + size > ready) break;
    move(moved, size);
    moved += size;
    any = true;
  }
  return any;
}

// Where `root`'s block starts in a buffer holding every rank's (broadcast
// and reduce have one block, the root's).
int blockOf(const lang::Program& p, int root, int k) {
  const std::string& c = p.options().collective;
  return c == "broadcast" || c == "reduce" ? 0 : root * k;
}

// Copies block pieces down the allgather trees from where `source(root,
// first, size)` holds them.
// `lag`: every step's (LowerOptions::callBytes).
template <typename Source>
void broadcastDown(lang::Program& p, const Forest& f, const EdgeChannels::value_type& lanes, int k,
                   int chunks, int firstRound, int lag, Source source) {
  const int n = p.options().ranks;
  eachTree(f, lanes, k, chunks, n, nullptr, [&](PieceRun& run, int c) {
    const Tree& t = *run.tree;
    const int block = blockOf(p, t.root, k * chunks) + run.first;
    // Parents first: an edge moves what its upper end has (the root: all
    // chunks up to c).
    for (size_t e = 0; e < t.edges.size(); ++e) {
      auto [a, b] = t.edges[e];
      const int from = run.links->into[e];
      const int ready = from < 0 ? c + 1 : run.moved[static_cast<size_t>(from)];
      advance(run, e, ready, chunks, [&](int at, int size) {
        lang::Chunk src = a == t.root ? source(t.root, run.first + at, size)
                                      : p.chunk(a, lang::kOutput, block + at, size);
        // Chunk c of a piece starts at round c (Hints::round): pipelined.
        src.copy(b, lang::kOutput, block + at,
                 {.channel = (*run.lanes)[e].channel, .round = firstRound + at, .lag = lag});
      });
    }
  });
}

// Reduces block pieces up the (reversed) reduce-scatter trees; the root's
// sum goes to `result(root, first)` = (buffer, index), the other ranks'
// partial sums to scratch. A sum for a root in its sender's box is `later`
// rounds behind (LowerOptions::laterLocalSums), and with `lag` (slices:
// LowerOptions::callBytes) the box's own sums, those whose way to the root
// stays inside its box, lag by it: a rank adds what came over a NIC first
// (it makes the sum), then its own children's, so the data's lag never
// falls along its way (the compiler's E601).
template <typename Result>
void reduceUp(lang::Program& p, const Forest& f, const EdgeChannels::value_type& lanes, int k,
              int chunks, lang::Buffer input, Result result, const LowerOptions& options, int lag) {
  const int later = options.boxes.empty() ? 0 : options.laterLocalSums;
  const bool lags = later > 0 && lag > 0;
  const int n = p.options().ranks;
  lang::Buffer partial = p.scratch("partial");
  std::vector<char> lagged;  // per edge of the tree visited
  eachTree(f, lanes, k, chunks, n, lags ? &options.boxes : nullptr, [&](PieceRun& run, int c) {
    const Tree& t = *run.tree;
    const int block = blockOf(p, t.root, k * chunks) + run.first;
    lagged.assign(t.edges.size(), 0);
    for (size_t e = 0; e < t.edges.size() && lags; ++e) {
      bool own = inBox(options.boxes, t.root, t.edges[e].second, t.edges[e].first);
      for (int up = run.links->into[e]; own && up >= 0;
           up = run.links->into[static_cast<size_t>(up)])
        own = !betweenBoxes(options.boxes, t.edges[static_cast<size_t>(up)]);
      lagged[e] = own ? 1 : 0;
    }
    // Leaves first: a rank sends a chunk's sum once every child has added
    // theirs; a pass again while one moved something a sibling waits for.
    for (bool again = true; again;) {
      again = false;
      for (size_t e = t.edges.size(); e-- > 0;) {
        auto [to, from] = t.edges[e];  // the reversed forest: data flows from `from` to `to`
        const std::vector<int>& below = run.links->children[e];
        int ready = c + 1;
        for (int child : below) ready = std::min(ready, run.moved[static_cast<size_t>(child)]);
        const int maker = run.maker[e];
        const bool makes = maker == static_cast<int>(e);
        if (!makes) ready = std::min(ready, run.moved[static_cast<size_t>(maker)]);
        // A lagging sum after every sum into the same rank that does not.
        for (size_t other = 0; other < t.edges.size() && lagged[e] != 0; ++other)
          if (t.edges[other].first == to && lagged[other] == 0)
            ready = std::min(ready, run.moved[other]);
        again |= advance(run, e, ready, chunks,
                         [&](int at, int size) {
                           const int index = block + at;
                           lang::Chunk incoming =
                               p.chunk(from, below.empty() ? input : partial, index, size);
                           auto [buffer, where] = to == t.root ? result(t.root, run.first + at)
                                                               : std::pair{partial, index};
                           // Chunk c of a piece starts at round c (Hints::round).
                           const bool local = later > 0 && inBox(options.boxes, t.root, from, to);
                           const lang::Hints h{.channel = (*run.lanes)[e].channel,
                                               .round = at + (local ? later : 0),
                                               .lag = lagged[e] != 0 ? lag : 0};
                           if (makes)
                             p.chunk(to, input, index, size).reduce(incoming, buffer, where, h);
                           else
                             p.chunk(to, buffer, where, size).reduce(incoming, h);
                         }) &&
                 makes;
      }
    }
  });
}

// Gathering collectives need the gather forest alone, reducing ones the
// scatter forest alone, allreduce both.
bool gathersOnly(CollectiveKind c) {
  return c == CollectiveKind::kAllGather || c == CollectiveKind::kBroadcast;
}
bool reducesOnly(CollectiveKind c) {
  return c == CollectiveKind::kReduceScatter || c == CollectiveKind::kReduce;
}

// The forests of a collective, each with whether its data flows up
// (assignChannels' order).
std::vector<std::pair<const Forest*, bool>> forestsOf(bool ag, bool rs, const Forest* gather,
                                                      const Forest* scatter) {
  std::vector<std::pair<const Forest*, bool>> forests;
  if (!ag) forests.emplace_back(scatter, true);
  if (!rs) forests.emplace_back(gather, false);
  return forests;
}

}  // namespace

bool targetAllows(Target target, DiagCode limit) {
  return target == Target::kChorus &&
         (limit == DiagCode::kLimitSteps || limit == DiagCode::kLimitCount ||
          limit == DiagCode::kLimitOffset || limit == DiagCode::kSliceIgnored ||
          limit == DiagCode::kLagIgnored);
}

uint64_t wholeCallIterations(const lang::ProgramOptions& po, const LowerOptions& options) {
  if (options.sliceBytes == 0 || options.callBytes == 0) return 0;
  const lang::Shape shape = lang::shapeOf(po.collective, po.ranks, po.chunkFactor);
  const auto chunks = static_cast<uint64_t>(std::max({shape.input, shape.output, 1}));
  // A chunk holds callBytes / chunks bytes at most (ir::Slicing), a slice
  // of it an iteration.
  const uint64_t chunkBytes = (options.callBytes + chunks - 1) / chunks;
  return std::max<uint64_t>(1, (chunkBytes + options.sliceBytes - 1) / options.sliceBytes);
}

int wholeCallLag(const lang::ProgramOptions& po, const LowerOptions& options) {
  return static_cast<int>(std::min(wholeCallIterations(po, options), kMostLag));
}

lang::ProgramOptions forestProgramOptions(CollectiveKind collective, int ranks,
                                          const Forest* gather, const Forest* scatter,
                                          const LowerOptions& options) {
  const bool ag = gathersOnly(collective), rs = reducesOnly(collective);
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
  po.sliceBytes = options.sliceBytes;
  // A threadblock per connection: one connection's pieces waiting for data
  // would otherwise hold up another's (assignChannels).
  po.pairThreadblocks = false;
  if (collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce)
    po.root = (ag ? gather : scatter)->trees.front().root;
  return po;
}

int busiestConnection(CollectiveKind collective, int ranks, const Forest* gather,
                      const Forest* scatter, const LowerOptions& options) {
  const bool ag = gathersOnly(collective), rs = reducesOnly(collective);
  const int k = piecesPerBlock(rs ? nullptr : gather, ag ? nullptr : scatter);
  int most = 0;
  for (const auto& forest : assignChannels(forestsOf(ag, rs, gather, scatter), k, ranks, options))
    for (const auto& tree : forest)
      for (const auto& piece : tree)
        for (const Lane& lane : piece) most = std::max(most, lane.sharing);
  return most;
}

void recordForests(lang::Program& p, const Forest* gather, const Forest* scatter,
                   const LowerOptions& options) {
  const std::string& coll = p.options().collective;
  const bool ag = coll == "allgather" || coll == "broadcast";
  const bool rs = coll == "reducescatter" || coll == "reduce";
  const bool inplace = p.options().inplace;
  const int k = piecesPerBlock(rs ? nullptr : gather, ag ? nullptr : scatter);
  const EdgeChannels channels =
      assignChannels(forestsOf(ag, rs, gather, scatter), k, p.options().ranks, options);
  const int c = std::max(1, options.chunksPerPiece);
  const int lag = wholeCallLag(p.options(), options);
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
    broadcastDown(p, *gather, channels[0], k, c, 0, 0, [&](int root, int first, int size) {
      return p.chunk(root, lang::kInput, first, size);
    });
  } else if (rs) {
    reduceUp(
        p, *scatter, channels[0], k, c, lang::kInput,
        [&](int, int first) {
          return std::pair{lang::kOutput, first};
        },
        options, lag);
  } else {
    // The sums land in the output (in place: the one buffer), where the
    // allgather trees pick them up (their connections after the reduce
    // trees' on each arc, or from channel 0 too with the halves in turn:
    // assignChannels).
    reduceUp(
        p, *scatter, channels[0], k, c, lang::kInput,
        [&](int root, int first) {
          return std::pair{lang::kOutput, root * k * c + first};
        },
        options, lag);
    // Halves in turn: the allgather's first round after every
    // reduce-scatter step's (a chunk's round plus its depth in the tree,
    // below the ranks; the box's own sums `laterLocalSums` behind).
    const int firstRound =
        options.halvesInTurn ? c + std::max(0, options.laterLocalSums) + p.options().ranks : 0;
    // By slices, the allgather lags the whole call (LowerOptions::callBytes).
    broadcastDown(p, *gather, channels[1], k, c, firstRound, options.halvesInTurn ? lag : 0,
                  [&](int root, int first, int size) {
                    return p.chunk(root, lang::kOutput, root * k * c + first, size);
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
