#include "synth/lower.h"

#include <numeric>

#include "core/check.h"

namespace chorus::synth {

namespace {

// Trees take channels in turn: a threadblock runs its steps in order once
// per slice, so trees sharing one wait for each other's data; on channels
// of their own they pipeline independently (measured on the simulator:
// docs/synthesis.md).
constexpr int kChannels = 32;

// Pieces of each rank's block: a common refinement of both forests'.
int piecesPerBlock(const Forest* gather, const Forest* scatter) {
  int k = 1;
  if (gather != nullptr) k = std::lcm(k, gather->k);
  if (scatter != nullptr) k = std::lcm(k, scatter->k);
  return k;
}

// Calls visit(tree, first piece, pieces, hints) for every tree, on channels
// in turn from `channel`: the pieces of a root's block are numbered 0.. in
// units of 1/k.
template <typename Visit>
void eachTree(const Forest& f, int k, int ranks, int channel, Visit visit) {
  std::vector<int> next(static_cast<size_t>(ranks), 0);
  const int scale = k / f.k;
  for (const Tree& t : f.trees) {
    int& at = next[static_cast<size_t>(t.root)];
    const int pieces = static_cast<int>(t.weight) * scale;
    visit(t, at, pieces, lang::Hints{.channel = channel++ % kChannels});
    at += pieces;
  }
}

// Where `root`'s block starts in a buffer holding every rank's (broadcast
// and reduce have one block, the root's).
int blockOf(const lang::Program& p, int root, int k) {
  const std::string& c = p.options().collective;
  return c == "broadcast" || c == "reduce" ? 0 : root * k;
}

// Copies block pieces down the allgather trees from where `source(root,
// first, pieces)` holds them.
template <typename Source>
void broadcastDown(lang::Program& p, const Forest& f, int k, int channel, Source source) {
  const int n = p.options().ranks;
  eachTree(f, k, n, channel, [&](const Tree& t, int first, int pieces, lang::Hints h) {
    const int index = blockOf(p, t.root, k) + first;
    std::vector<lang::Chunk> at(static_cast<size_t>(n));
    at[static_cast<size_t>(t.root)] = source(t.root, first, pieces);
    for (auto [a, b] : t.edges)
      at[static_cast<size_t>(b)] = at[static_cast<size_t>(a)].copy(b, lang::kOutput, index, h);
  });
}

// Reduces block pieces up the (reversed) reduce-scatter trees; the root's
// sum goes to `result(root, first)` = (buffer, index), the other ranks'
// partial sums to scratch.
template <typename Result>
void reduceUp(lang::Program& p, const Forest& f, int k, lang::Buffer input, Result result) {
  const int channel = 0;
  const int n = p.options().ranks;
  lang::Buffer partial = p.scratch("partial");
  eachTree(f, k, n, channel, [&](const Tree& t, int first, int pieces, lang::Hints h) {
    const int index = blockOf(p, t.root, k) + first;
    std::vector<lang::Chunk> sum(static_cast<size_t>(n));
    auto current = [&](int r) {
      lang::Chunk& c = sum[static_cast<size_t>(r)];
      return c.valid() ? c : p.chunk(r, input, index, pieces);
    };
    // Leaves first: a rank sends its sum once every child has added theirs.
    for (auto e = t.edges.rbegin(); e != t.edges.rend(); ++e) {
      auto [to, from] = *e;  // the reversed forest: data flows from `from` to `to`
      lang::Chunk incoming = current(from);
      lang::Chunk& mine = sum[static_cast<size_t>(to)];
      if (mine.valid()) {
        mine = mine.reduce(incoming, h);
      } else {
        auto [buffer, at] = to == t.root ? result(t.root, first) : std::pair{partial, index};
        mine = p.chunk(to, input, index, pieces).reduce(incoming, buffer, at, h);
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
  po.chunkFactor = ar ? ranks * k : k;
  po.inplace = options.inplace;
  po.protocol = options.protocol;
  po.instances = options.instances;
  if (collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce)
    po.root = (ag ? gather : scatter)->trees.front().root;
  return po;
}

void recordForests(lang::Program& p, const Forest* gather, const Forest* scatter) {
  const std::string& coll = p.options().collective;
  const bool ag = coll == "allgather" || coll == "broadcast";
  const bool rs = coll == "reducescatter" || coll == "reduce";
  const bool inplace = p.options().inplace;
  const int k = piecesPerBlock(rs ? nullptr : gather, ag ? nullptr : scatter);
  if (ag) {
    broadcastDown(p, *gather, k, 0, [&](int root, int first, int pieces) {
      lang::Chunk c = p.chunk(root, lang::kInput, first, pieces);
      // Its own block, unless the buffers are one.
      if (!inplace) c = c.copy(root, lang::kOutput, blockOf(p, root, k) + first);
      return c;
    });
  } else if (rs) {
    reduceUp(p, *scatter, k, lang::kInput, [&](int, int first) {
      return std::pair{lang::kOutput, first};
    });
  } else {
    // The sums land in the output (in place: the one buffer), where the
    // allgather trees pick them up.
    reduceUp(p, *scatter, k, lang::kInput, [&](int root, int first) {
      return std::pair{lang::kOutput, root * k + first};
    });
    // On the channels after the reduce-scatter trees': a threadblock would
    // otherwise wait for a reduction before it forwards a finished sum.
    broadcastDown(p, *gather, k, static_cast<int>(scatter->trees.size()),
                  [&](int root, int first, int pieces) {
                    return p.chunk(root, lang::kOutput, root * k + first, pieces);
                  });
  }
}

compiler::Compiled lowerForests(CollectiveKind collective, int ranks, const Forest* gather,
                                const Forest* scatter, const LowerOptions& options) {
  lang::Program p(forestProgramOptions(collective, ranks, gather, scatter, options));
  recordForests(p, gather, scatter);
  return compiler::compile(p);
}

}  // namespace chorus::synth
