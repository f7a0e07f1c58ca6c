#include "synth/forest.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_set>

#include "core/check.h"
#include "synth/cuts.h"
#include "synth/maxflow.h"

namespace chorus::synth {

namespace {

// A tree being built: the ranks it reaches so far (just its root before it
// starts) and how many pieces it carries.
struct Pending {
  int root = 0;
  int64_t weight = 0;
  std::vector<char> in;  // per rank
  int size = 1;
  std::vector<std::pair<int, int>> edges;
};

class Packer {
 public:
  // Past `deadline` splitting and packing stop (late()).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  bool late() const { return deadline && std::chrono::steady_clock::now() > *deadline; }

  explicit Packer(const topo::Topology& t) : t_(t), n_(t.ranks()) {
    const size_t v = t.nodes.size();
    m.assign(v, std::vector<int64_t>(v, 0));
    rankOf_.assign(v, -1);
    for (int r = 0; r < n_; ++r) rankOf_[static_cast<size_t>(t.nodeOfRank(r))] = r;
  }

  // Pieces per unit time each node pair can carry (the forest's direction).
  std::vector<std::vector<int64_t>> m;
  int maxflows = 0;

  // Splits by the topology's routes from here on (routedForest): u -> w ->
  // x only where some route between ranks passes u, w and x in that order
  // (from u where u is a rank, to x where x is one), so each rank-to-rank
  // arc left over is carried the way the simulator (and a fabric's
  // routing) sends that pair; the switches nearest the ranks are split
  // first, so an arc into a farther switch still says which way it came.
  void routeBy(bool reversed) {
    routed_.clear();
    for (int a = 0; a < n_; ++a)
      for (int b = 0; b < n_; ++b) {
        if (a == b) continue;
        std::vector<int> nodes{t_.nodeOfRank(a)};
        for (int l : t_.route(a, b)) nodes.push_back(t_.links[static_cast<size_t>(l)].to);
        const size_t last = nodes.size() - 1;
        for (size_t j = 1; j < last; ++j) {
          if (rankOf_[static_cast<size_t>(nodes[j])] >= 0) continue;  // ranks are not split
          for (size_t i = 0; i < j; ++i) {
            if (i > 0 && rankOf_[static_cast<size_t>(nodes[i])] >= 0) continue;
            for (size_t k = j + 1; k <= last; ++k) {
              if (k < last && rankOf_[static_cast<size_t>(nodes[k])] >= 0) continue;
              // The forest's direction: reversed, the data flows x -> w -> u.
              const auto u = static_cast<uint64_t>(reversed ? nodes[k] : nodes[i]);
              const auto x = static_cast<uint64_t>(reversed ? nodes[i] : nodes[k]);
              routed_.insert(splitKey(u, static_cast<uint64_t>(nodes[j]), x));
            }
          }
        }
      }
    byRoutes_ = true;
  }

  // The condition's flow network: the topology's nodes (ids as theirs), a
  // super source, the first tree's node, a node per group of the other
  // trees that reach the same ranks (alike in every cut), each joined from
  // the source by its weight and to every rank it reaches, and a super sink
  // joined from every rank by an arc of capacity 0 (toSink, opened per
  // check).
  struct Network {
    MaxFlow flow{0};
    int source = 0, sink = 0, front = 0;  // front: the first tree's node
    int64_t total = 0;                    // the trees' weight
    std::vector<int> toSink;              // per rank
  };
  Network network(const std::vector<Pending>& trees) {
    const int v = static_cast<int>(m.size());
    std::map<std::vector<char>, int64_t> groups;
    for (size_t i = 1; i < trees.size(); ++i) groups[trees[i].in] += trees[i].weight;
    Network net;
    net.source = v;
    net.front = v + 1;
    net.sink = v + 2 + static_cast<int>(groups.size());
    net.flow = MaxFlow(net.sink + 1);
    for (int a = 0; a < v; ++a)
      for (int b = 0; b < v; ++b)
        if (m[static_cast<size_t>(a)][static_cast<size_t>(b)] > 0)
          net.flow.addArc(a, b, m[static_cast<size_t>(a)][static_cast<size_t>(b)]);
    auto addTrees = [&](int z, const std::vector<char>& in, int64_t weight) {
      net.flow.addArc(net.source, z, weight);
      net.total += weight;
      for (int r = 0; r < n_; ++r)
        if (in[static_cast<size_t>(r)]) net.flow.addArc(z, t_.nodeOfRank(r), weight);
    };
    if (!trees.empty()) addTrees(net.front, trees.front().in, trees.front().weight);
    int z = net.front + 1;
    for (const auto& [in, weight] : groups) addTrees(z++, in, weight);
    for (int r = 0; r < n_; ++r)
      net.toSink.push_back(net.flow.addArc(t_.nodeOfRank(r), net.sink, 0));
    return net;
  }

  // Edmonds' condition: for every set X of nodes holding a rank, the arcs
  // into X carry at least the weight of the trees that have not reached
  // X yet. Checked as one maximum flow per rank (network()).
  bool holds(const std::vector<Pending>& trees) {
    Network net = network(trees);
    for (int r = 0; r < n_; ++r) {
      ++maxflows;
      net.flow.setCapacity(net.toSink[static_cast<size_t>(r)], net.total);
      if (net.flow.run(net.source, net.sink, net.total) < net.total) return false;
      net.flow.setCapacity(net.toSink[static_cast<size_t>(r)], 0);
    }
    return true;
  }

  // How far every cut that has the nodes `in` on its source side and the
  // nodes `out` on its sink side may shrink with the condition kept, up to
  // `most`: the least over ranks r of (such a cut's least capacity - the
  // trees' total weight), one maximum flow per rank with `in` joined to the
  // super source and `out` to the sink by unbounded arcs (node ids as
  // network(); kFront: the first tree's). When `out` holds a rank, every
  // such cut leaves a rank outside and one flow suffices; otherwise the
  // rank that bound the last call is checked first (a change that cannot
  // be made usually fails there).
  static constexpr int kFront = -1;
  int64_t slack(const std::vector<Pending>& trees, const std::vector<int>& in,
                const std::vector<int>& out, int64_t most, std::vector<char>* tight = nullptr) {
    constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max() / 4;
    Network net = network(trees);
    for (int x : in) net.flow.addArc(net.source, x == kFront ? net.front : x, kUnbounded);
    for (int y : out) net.flow.addArc(y == kFront ? net.front : y, net.sink, kUnbounded);
    int64_t least = most;
    // A rank among `out` is outside every cut in question, so one flow
    // (to the sink `out` already reaches) covers every rank's.
    if (std::any_of(out.begin(), out.end(),
                    [&](int y) { return y != kFront && rankOf_[static_cast<size_t>(y)] >= 0; })) {
      ++maxflows;
      const int64_t flow = net.flow.run(net.source, net.sink, net.total + least);
      CHORUS_CHECK(flow >= net.total, "the condition must hold before a change");
      if (flow == net.total && tight != nullptr) {
        // A cut that admits no change: its source side (topology nodes).
        tight->assign(m.size(), 0);
        for (size_t x = 0; x < m.size(); ++x)
          (*tight)[x] = net.flow.sourceSide(static_cast<int>(x));
      }
      return std::min(least, flow - net.total);
    }
    const int start = firstRank_;
    for (int i = 0; i < n_ && least > 0; ++i) {
      const int r = (start + i) % n_;
      if (std::find(in.begin(), in.end(), t_.nodeOfRank(r)) != in.end()) continue;
      net.flow.setCapacity(net.toSink[static_cast<size_t>(r)], kUnbounded);
      ++maxflows;
      const int64_t flow = net.flow.run(net.source, net.sink, net.total + least);
      CHORUS_CHECK(flow >= net.total, "the condition must hold before a change");
      if (flow - net.total < least) {
        least = flow - net.total;
        firstRank_ = r;
      }
      net.flow.setCapacity(net.toSink[static_cast<size_t>(r)], 0);
    }
    return least;
  }

  // Splits `a` pieces of u -> w -> v off into u -> v (u == v: drops them).
  void split(int u, int w, int v, int64_t a) {
    m[static_cast<size_t>(u)][static_cast<size_t>(w)] -= a;
    m[static_cast<size_t>(w)][static_cast<size_t>(v)] -= a;
    if (u != v) m[static_cast<size_t>(u)][static_cast<size_t>(v)] += a;
  }

  // Removes every switch and NIC, fewest neighbours first, keeping the
  // condition; out-neighbours in another box first (a link inside a box is
  // better used by the box's own fabric), each in-arc spread evenly first.
  Status splitSwitches(const std::vector<Pending>& trees) {
    const int v = static_cast<int>(m.size());
    std::vector<int> order;
    for (int w = 0; w < v; ++w)
      if (rankOf_[static_cast<size_t>(w)] < 0) order.push_back(w);
    auto degree = [&](int w) {
      int d = 0;
      for (int u = 0; u < v; ++u)
        d += m[static_cast<size_t>(u)][static_cast<size_t>(w)] > 0 ||
             m[static_cast<size_t>(w)][static_cast<size_t>(u)] > 0;
      return d;
    };
    std::vector<int> deg(static_cast<size_t>(v));
    for (int w : order) deg[static_cast<size_t>(w)] = degree(w);
    // By routes: nearest the ranks first (hops over links either way).
    std::vector<int> hops(static_cast<size_t>(v), 0);
    if (byRoutes_) {
      std::fill(hops.begin(), hops.end(), -1);
      std::vector<int> queue;
      for (int r = 0; r < n_; ++r) {
        hops[static_cast<size_t>(t_.nodeOfRank(r))] = 0;
        queue.push_back(t_.nodeOfRank(r));
      }
      for (size_t head = 0; head < queue.size(); ++head) {
        const int at = queue[head];
        for (int x = 0; x < v; ++x)
          if (hops[static_cast<size_t>(x)] < 0 &&
              (m[static_cast<size_t>(at)][static_cast<size_t>(x)] > 0 ||
               m[static_cast<size_t>(x)][static_cast<size_t>(at)] > 0)) {
            hops[static_cast<size_t>(x)] = hops[static_cast<size_t>(at)] + 1;
            queue.push_back(x);
          }
      }
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return std::pair{hops[static_cast<size_t>(a)], deg[static_cast<size_t>(a)]} <
             std::pair{hops[static_cast<size_t>(b)], deg[static_cast<size_t>(b)]};
    });
    for (int w : order) {
      if (late())
        return Status(StatusCode::kTimeout, "the time budget was spent splitting the switches off");
      // First optimistically: every split at the most it could be, checked
      // once (n flows) at the end. Splitting only lowers cuts, so when the
      // end holds so did every step, and each step's slack (below) would
      // have allowed it: the result is the step-by-step one, which is run
      // (from the saved arcs) only when the end does not hold.
      const std::vector<std::vector<int64_t>> saved = m;
      (void)splitOff(w, trees, /*checked=*/false);  // unchecked: always ok
      if (holds(trees)) continue;
      m = saved;
      Status st = splitOff(w, trees, /*checked=*/true);
      if (!st.isOk()) return st;
    }
    return Status::ok();
  }

  // Splits switch `w` off (splitSwitches); `checked`: each split no larger
  // than the condition allows, else as large as the arcs allow.
  Status splitOff(int w, const std::vector<Pending>& trees, bool checked) {
    const int v = static_cast<int>(m.size());
    auto wi = static_cast<size_t>(w);
    int64_t turn = 0;  // where this in-arc's remainder starts (below)
    for (int u = 0; u < v; ++u) {
      auto ui = static_cast<size_t>(u);
      if (m[ui][wi] == 0) continue;
      std::vector<int> outs;
      for (int x = 0; x < v; ++x)
        if (m[wi][static_cast<size_t>(x)] > 0 && allowed(u, w, x)) outs.push_back(x);
      auto key = [&](int x) {
        return std::pair{x == u, t_.nodes[static_cast<size_t>(x)].box == t_.nodes[ui].box};
      };
      std::stable_sort(outs.begin(), outs.end(), [&](int a, int b) { return key(a) < key(b); });
      // First an even share to every other out-neighbour (a mesh, whose
      // trees can be shallow), then whatever is left, in order.
      // The even share goes to the best group only (another box, if any).
      auto best = outs.empty() ? std::pair{true, true} : key(outs.front());
      // The share is m / others, and one more for m % others of them,
      // starting where the last in-arc's extras ended: the in-arcs' extras
      // rotate, so every out-neighbour gets as many (2 DGX A100 boxes:
      // each NIC sends 2, 2, ..., 1 pieces to the other box's GPUs, the
      // 1 on a different GPU for each sender; without the rotation the
      // last sender's NIC carried 1, ..., 1, 8).
      int64_t others =
          std::count_if(outs.begin(), outs.end(), [&](int x) { return x != u && key(x) == best; });
      const int64_t base = others > 0 ? m[ui][wi] / others : 0;
      const int64_t extra = others > 0 ? m[ui][wi] % others : 0;
      const int64_t start = others > 0 ? turn % others : 0;
      turn += extra;
      for (bool even : {true, false}) {
        int64_t at = 0;  // position among the best group
        for (int x : outs) {
          if (m[ui][wi] == 0) break;
          if (even && (x == u || key(x) != best)) continue;
          int64_t a = std::min(m[ui][wi], m[wi][static_cast<size_t>(x)]);
          if (even) {
            const bool more = (at++ - start + others) % others < extra;
            a = std::min(a, base + (more ? 1 : 0));
          }
          // Splitting d pieces lowers by d exactly the cuts with u and x
          // on one side and w on the other (and only those).
          if (checked && a > 0) a = slack(trees, {u, x}, {w}, a);
          if (checked && a > 0) a = slack(trees, {w}, {u, x}, a);
          if (a > 0) split(u, w, x, a);
        }
      }
      if (m[ui][wi] > 0) {
        // Capacity into the switch that no way out can use: drop it.
        m[ui][wi] = 0;
        if (checked && !holds(trees)) return stuck(w);
      }
    }
    for (int x = 0; x < v; ++x) m[wi][static_cast<size_t>(x)] = 0;  // out, unused
    if (checked && !holds(trees)) return stuck(w);
    return Status::ok();
  }

  Status stuck(int w) const {
    return Status(StatusCode::kInvalidArgument,
                  "switch '" + t_.nodes[static_cast<size_t>(w)].name +
                      "' cannot be split off without lowering the optimum (its links in and out "
                      "differ?)");
  }

  // Grows every tree to span all ranks (Lovász's construction: an arc from
  // the tree to a rank outside it whose use keeps the condition always
  // exists), taking as many of the tree's pieces along each arc as the
  // condition allows; the rest continue as a tree of their own.
  std::vector<Tree> pack(std::vector<Pending> pending) {
    std::vector<Tree> out;
    std::vector<int> depth(static_cast<size_t>(n_));
    // Cuts found tight: rank sets S whose arcs out carry exactly the weight
    // of the trees wholly inside S. Packing never raises a cut's surplus
    // (taking an arc out of S lowers its capacity by what it lowers the
    // weight inside, or by more when the tree was not wholly inside), so a
    // tight cut stays tight to the end. An arc out of one cannot grow a
    // tree that is not wholly inside it: `blocked[a]` holds the ranks such
    // an arc from rank a cannot reach, for the front tree (whose ranks only
    // grow, so what blocks it keeps blocking it until it is done).
    std::vector<RankSet> tightCuts;
    std::vector<RankSet> blocked(static_cast<size_t>(n_), RankSet(words_));
    auto block = [&](const RankSet& cut) {
      for (int a = 0; a < n_; ++a)
        if (has(cut, a))
          for (size_t i = 0; i < words_; ++i) blocked[static_cast<size_t>(a)][i] |= ~cut[i];
    };
    bool newFront = true;
    while (!pending.empty() && !late()) {
      if (pending.front().size == n_) {
        Pending& done = pending.front();
        out.push_back(Tree{done.root, done.weight, std::move(done.edges)});
        pending.erase(pending.begin());
        newFront = true;
        continue;
      }
      const Pending& cur = pending.front();
      if (newFront) {
        newFront = false;
        for (RankSet& b : blocked) std::fill(b.begin(), b.end(), 0);
        const RankSet in = rankSet([&](int r) { return cur.in[static_cast<size_t>(r)] != 0; });
        for (const RankSet& cut : tightCuts) {
          bool inside = true;
          for (size_t i = 0; i < words_ && inside; ++i) inside = (in[i] & ~cut[i]) == 0;
          if (!inside) block(cut);
        }
      }
      // Candidate arcs from the shallowest ranks first (shallow trees pipeline
      // with less delay), then the widest.
      std::fill(depth.begin(), depth.end(), 0);
      for (auto [a, b] : cur.edges)
        depth[static_cast<size_t>(b)] = depth[static_cast<size_t>(a)] + 1;
      struct Cand {
        int64_t width;
        int depth, from, to;
      };
      std::vector<Cand> cands;
      for (int a = 0; a < n_; ++a) {
        if (!cur.in[static_cast<size_t>(a)]) continue;
        for (int b = 0; b < n_; ++b) {
          int64_t w = arc(a, b);
          if (!cur.in[static_cast<size_t>(b)] && w > 0)
            cands.push_back(Cand{w, depth[static_cast<size_t>(a)], a, b});
        }
      }
      std::stable_sort(cands.begin(), cands.end(), [](const Cand& x, const Cand& y) {
        return x.depth != y.depth ? x.depth < y.depth : x.width > y.width;
      });
      bool grown = false;
      std::vector<char> cut;
      for (const Cand& c : cands) {
        if (has(blocked[static_cast<size_t>(c.from)], c.to)) continue;
        // Taking a of the tree's pieces along c (the tree reaches c.to with
        // them; the other weight - a stay behind, last in the list, as a
        // tree of their own) lowers by a exactly the cuts with c.from inside,
        // c.to outside and the tree not wholly inside (its node outside).
        const int64_t weight = pending.front().weight;
        cut.clear();
        const int64_t took = slack(pending, {t_.nodeOfRank(c.from)}, {t_.nodeOfRank(c.to), kFront},
                                   std::min(weight, arc(c.from, c.to)), &cut);
        if (took == 0) {
          if (!cut.empty()) {
            // Tight, and the tree is not wholly inside (its node is not).
            RankSet ranks =
                rankSet([&](int r) { return cut[static_cast<size_t>(t_.nodeOfRank(r))] != 0; });
            block(ranks);
            tightCuts.push_back(std::move(ranks));
          }
          continue;
        }
        arc(c.from, c.to) -= took;
        if (took < weight) {
          pending.push_back(pending.front());
          pending.back().weight = weight - took;
        }
        Pending& grownTree = pending.front();
        grownTree.weight = took;
        grownTree.in[static_cast<size_t>(c.to)] = 1;
        grownTree.edges.push_back({c.from, c.to});
        ++grownTree.size;
        grown = true;
        break;
      }
      CHORUS_CHECK(grown, "Edmonds' condition holds but no arc can grow the tree");
    }
    return out;
  }

  int64_t& arc(int a, int b) {
    return m[static_cast<size_t>(t_.nodeOfRank(a))][static_cast<size_t>(t_.nodeOfRank(b))];
  }

 private:
  using RankSet = std::vector<uint64_t>;  // a bit per rank
  static bool has(const RankSet& s, int r) {
    return (s[static_cast<size_t>(r) / 64] >> (r % 64)) & 1;
  }
  // The ranks r with inside(r).
  template <class Inside>
  RankSet rankSet(Inside inside) const {
    RankSet s(words_);
    for (int r = 0; r < n_; ++r)
      if (inside(r)) s[static_cast<size_t>(r) / 64] |= uint64_t{1} << (r % 64);
    return s;
  }

  const topo::Topology& t_;
  int n_;
  size_t words_ = static_cast<size_t>(n_ + 63) / 64;
  int firstRank_ = 0;
  std::vector<int> rankOf_;
  // routeBy(): the splits the routes allow, (u * nodes + w) * nodes + x.
  bool byRoutes_ = false;
  std::unordered_set<uint64_t> routed_;
  uint64_t splitKey(uint64_t u, uint64_t w, uint64_t x) const {
    const auto v = static_cast<uint64_t>(m.size());
    return (u * v + w) * v + x;
  }
  bool allowed(int u, int w, int x) const {
    if (!byRoutes_ || u == x) return true;  // u == x: a round trip dropped, no arc made
    return routed_.count(splitKey(static_cast<uint64_t>(u), static_cast<uint64_t>(w),
                                  static_cast<uint64_t>(x))) > 0;
  }
};

// The forest's pieces, split arcs and rate, and its trees when `packTrees`.
Result<Forest> buildForest(const topo::Topology& t, bool reversed, int maxPieces, int root,
                           bool packTrees, bool relax = false,
                           std::optional<std::chrono::steady_clock::time_point> deadline = {},
                           bool routed = false) {
  const int n = t.ranks();
  if (n < 2) return Status(StatusCode::kInvalidArgument, "a forest needs at least two ranks");
  auto scaled = scaleCapacities(t);
  if (!scaled.isOk()) return scaled.status();
  // The rate to reach, p/q integer units: per shard (every rank a root), or
  // the root's whole message (one root: its least cut).
  Ratio y;
  if (root < 0) {
    auto ratio = shardRatio(t, scaled.value().cap, reversed);
    if (!ratio.isOk()) return ratio.status();
    y = std::move(ratio).value();
  } else {
    auto b = optimalBound(t, reversed ? CollectiveKind::kReduce : CollectiveKind::kBroadcast, root);
    if (!b.isOk()) return b.status();
    Rational units =
        times(b.value().algbw, Rational{scaled.value().unit.den, scaled.value().unit.num});
    CHORUS_CHECK(units.den == 1, "a root cut is a whole number of capacity units");
    y.p = units.num;
    y.q = 1;
    y.maxflows = b.value().maxflows;
  }
  // Pieces per shard: k with every link's capacity a whole number of pieces
  // per unit time, cap x k x q / p (capacities are coprime after scaling).
  int64_t k = y.p / std::gcd(y.p, y.q);
  // One root's relaxed forest: wider pieces. The root's rate is its least
  // cut, p units (q = 1), so no rate k'/q' with k' <= maxPieces pieces comes
  // near it with unit-rate pieces; instead each of kk pieces is p/kk units
  // wide and a link of c units carries floor(c kk / p) of them (never more
  // than it can). The root's trees then carry as many pieces as its least
  // cut in those counts allows, at most kk: rate min(cut, kk) p / kk. The kk
  // with the best rate (the first on a tie); the loss is the rounding,
  // under one piece per link of a cut.
  std::vector<int64_t> widePieces;  // per link, when chosen
  Rational wideRate{0, 1};
  if (root >= 0 && k > maxPieces && relax) {
    int64_t bestCut = 0, bestKk = 1;
    std::vector<int64_t> best;
    for (int64_t kk = 1; kk <= maxPieces; ++kk) {
      MaxFlow flow(static_cast<int>(t.nodes.size()));
      std::vector<int64_t> pieces(t.links.size());
      for (size_t i = 0; i < t.links.size(); ++i) {
        pieces[i] = static_cast<int64_t>(i128{scaled.value().cap[i]} * kk / y.p);
        int from = t.links[i].from, to = t.links[i].to;
        if (reversed) std::swap(from, to);
        if (pieces[i] > 0) flow.addArc(from, to, pieces[i]);
      }
      int64_t cut = kk;
      for (int r = 0; r < n && cut > 0; ++r)
        if (r != root) cut = std::min(cut, flow.run(t.nodeOfRank(root), t.nodeOfRank(r), cut));
      if (i128{cut} * bestKk > i128{bestCut} * kk) {
        bestCut = cut;
        bestKk = kk;
        best = std::move(pieces);
      }
    }
    if (bestCut == 0)
      return Status(
          StatusCode::kInvalidArgument,
          "no forest of at most " + std::to_string(maxPieces) + " pieces reaches every rank");
    k = bestCut;
    widePieces = std::move(best);
    wideRate = Rational{bestCut * y.p, bestKk};
  } else if (k > maxPieces && relax) {
    // The fastest rate k'/q' <= p/q with k' <= maxPieces: each k' with the
    // least q' that keeps it at or below the optimum.
    int64_t bestK = 0, bestQ = 1;
    for (int64_t kk = 1; kk <= maxPieces; ++kk) {
      const i128 qq = (i128{kk} * y.q + y.p - 1) / y.p;
      if (i128{kk} * bestQ > i128{bestK} * qq) {
        bestK = kk;
        bestQ = static_cast<int64_t>(qq);
      }
    }
    const int64_t g = std::gcd(bestK, bestQ);
    y.p = bestK / g;
    y.q = bestQ / g;
    k = y.p;
  }
  if (k > maxPieces)
    return Status(StatusCode::kInvalidArgument, "the optimum needs " + std::to_string(k) +
                                                    " pieces per shard (more than " +
                                                    std::to_string(maxPieces) + ")");
  Packer packer(t);
  packer.deadline = deadline;
  for (size_t i = 0; i < t.links.size(); ++i) {
    int from = t.links[i].from, to = t.links[i].to;
    if (reversed) std::swap(from, to);
    if (!widePieces.empty()) {
      packer.m[static_cast<size_t>(from)][static_cast<size_t>(to)] += widePieces[i];
      continue;
    }
    i128 pieces = i128{scaled.value().cap[i]} * k * y.q;
    CHORUS_CHECK(pieces % y.p == 0, "capacities must be whole pieces");
    packer.m[static_cast<size_t>(from)][static_cast<size_t>(to)] +=
        static_cast<int64_t>(pieces / y.p);
  }
  std::vector<Pending> roots;
  for (int r = 0; r < n; ++r) {
    if (root >= 0 && r != root) continue;
    Pending p;
    p.root = r;
    p.weight = k;
    p.in.assign(static_cast<size_t>(n), 0);
    p.in[static_cast<size_t>(r)] = 1;
    roots.push_back(std::move(p));
  }
  CHORUS_CHECK(packer.holds(roots), "the optimum must satisfy Edmonds' condition");
  if (routed) packer.routeBy(reversed);
  Status st = packer.splitSwitches(roots);
  if (!st.isOk()) return st;
  Forest f;
  f.k = static_cast<int>(k);
  f.arcs.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b)
      f.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)] = packer.arc(a, b);
  if (packTrees) {
    f.trees = packer.pack(std::move(roots));
    if (packer.late())
      return Status(StatusCode::kTimeout, "the time budget was spent packing the trees");
  }
  f.algbw = times(times(widePieces.empty() ? Rational{y.p, y.q} : wideRate, scaled.value().unit),
                  Rational{root < 0 ? n : 1, 1});
  f.maxflows = y.maxflows + packer.maxflows;
  return f;
}

}  // namespace

Result<Forest> packForest(const topo::Topology& t, bool reversed, int maxPieces, int root,
                          std::optional<std::chrono::steady_clock::time_point> deadline) {
  return buildForest(t, reversed, maxPieces, root, true, false, deadline);
}

bool linksSymmetric(const topo::Topology& t) {
  std::map<std::pair<int, int>, double> each;
  for (const topo::Link& l : t.links) each[{l.from, l.to}] += l.bandwidth;
  for (const auto& [ends, bandwidth] : each) {
    auto back = each.find({ends.second, ends.first});
    if (back == each.end() || back->second != bandwidth) return false;
  }
  return true;
}

Result<Forest> relaxedForest(const topo::Topology& t, bool reversed, int maxPieces, int root,
                             std::optional<std::chrono::steady_clock::time_point> deadline) {
  return buildForest(t, reversed, maxPieces, root, true, true, deadline);
}

Result<Forest> splitTopology(const topo::Topology& t, bool reversed, int maxPieces) {
  return buildForest(t, reversed, maxPieces, -1, false);
}

Forest shortenForest(const Forest& forest) {
  const std::vector<Tree>& trees = forest.trees;
  const std::vector<std::vector<int64_t>>& arcs = forest.arcs;
  const size_t ranks = arcs.size();
  const int n = static_cast<int>(ranks);
  struct Unit {
    int root;
    std::vector<int> parent;  // -1 at the root
    // From parent (index()): each rank's depth, its place in a depth-first
    // walk [in, out), and its subtree's size and sum of depths.
    std::vector<int> depth, in, out, size;
    std::vector<int64_t> depthSum;
  };
  std::vector<std::vector<int>> children(ranks);
  auto index = [&](Unit& u) {
    for (auto& c : children) c.clear();
    for (int v = 0; v < n; ++v)
      if (int p = u.parent[static_cast<size_t>(v)]; p >= 0)
        children[static_cast<size_t>(p)].push_back(v);
    u.depth.assign(ranks, 0);
    u.in.assign(ranks, -1);
    u.out.assign(ranks, -1);
    u.size.assign(ranks, 1);
    u.depthSum.assign(ranks, 0);
    // Iterative depth-first walk: (rank, next child) pairs.
    std::vector<std::pair<int, size_t>> stack{{u.root, 0}};
    int clock = 0;
    u.in[static_cast<size_t>(u.root)] = clock++;
    while (!stack.empty()) {
      auto& [v, next] = stack.back();
      const std::vector<int>& kids = children[static_cast<size_t>(v)];
      if (next < kids.size()) {
        const int c = kids[next++];
        u.depth[static_cast<size_t>(c)] = u.depth[static_cast<size_t>(v)] + 1;
        u.in[static_cast<size_t>(c)] = clock++;
        stack.emplace_back(c, 0);
        continue;
      }
      const auto vi = static_cast<size_t>(v);
      u.out[vi] = clock;
      u.depthSum[vi] += u.depth[vi];
      stack.pop_back();
      if (!stack.empty()) {
        const auto pi = static_cast<size_t>(stack.back().first);
        u.size[pi] += u.size[vi];
        u.depthSum[pi] += u.depthSum[vi];
      }
    }
  };
  std::vector<Unit> units;
  for (const Tree& t : trees) {
    Unit u{t.root, std::vector<int>(ranks, -1), {}, {}, {}, {}, {}};
    for (auto [a, b] : t.edges) u.parent[static_cast<size_t>(b)] = a;
    index(u);
    for (int64_t w = 0; w < t.weight; ++w) units.push_back(u);
  }
  // Spare capacity of every arc, and which units hang z under x.
  std::vector<std::vector<int64_t>> spare = arcs;
  std::vector<std::vector<std::vector<int>>> under(ranks, std::vector<std::vector<int>>(ranks));
  for (size_t i = 0; i < units.size(); ++i)
    for (size_t z = 0; z < ranks; ++z)
      if (int x = units[i].parent[z]; x >= 0) {
        --spare[static_cast<size_t>(x)][z];
        under[z][static_cast<size_t>(x)].push_back(static_cast<int>(i));
      }
  auto depth = [](const Unit& u, int v) { return u.depth[static_cast<size_t>(v)]; };
  auto below = [](const Unit& u, int v, int z) {  // v in the subtree of z
    const auto vi = static_cast<size_t>(v), zi = static_cast<size_t>(z);
    return v == z || (u.in[zi] >= 0 && u.in[vi] >= u.in[zi] && u.in[vi] < u.out[zi]);
  };
  // Change in the sum of depth squared when z's subtree moves by `delta`:
  // the sum over it of (d + delta)^2 - d^2.
  auto cost = [](const Unit& u, int z, int delta) {
    const auto zi = static_cast<size_t>(z);
    return 2 * delta * u.depthSum[zi] + int64_t{delta} * delta * u.size[zi];
  };
  auto reparent = [&](int i, int z, int to) {
    Unit& u = units[static_cast<size_t>(i)];
    std::vector<int>& from =
        under[static_cast<size_t>(z)][static_cast<size_t>(u.parent[static_cast<size_t>(z)])];
    from.erase(std::find(from.begin(), from.end(), i));
    u.parent[static_cast<size_t>(z)] = to;
    under[static_cast<size_t>(z)][static_cast<size_t>(to)].push_back(i);
  };
  // Bounded work: each pass visits every (unit, rank, new parent).
  for (int pass = 0; pass < 8; ++pass) {
    bool moved = false;
    for (int i = 0; i < static_cast<int>(units.size()); ++i)
      for (int z = 0; z < n; ++z) {
        Unit& a = units[static_cast<size_t>(i)];
        const int y = a.parent[static_cast<size_t>(z)];
        if (y < 0 || y == a.root) continue;
        const int dz = depth(a, z);
        for (int x = 0; x < n && a.parent[static_cast<size_t>(z)] == y; ++x) {
          if (x == y || x == z || below(a, x, z)) continue;
          const int delta = depth(a, x) + 1 - dz;
          if (delta >= 0) continue;
          const int64_t gain = cost(a, z, delta);
          int64_t& free = spare[static_cast<size_t>(x)][static_cast<size_t>(z)];
          if (free > 0) {
            --free;
            ++spare[static_cast<size_t>(y)][static_cast<size_t>(z)];
            reparent(i, z, x);
            index(a);
            moved = true;
            break;
          }
          for (int j : under[static_cast<size_t>(z)][static_cast<size_t>(x)]) {
            Unit& b = units[static_cast<size_t>(j)];
            if (j == i || below(b, y, z)) continue;
            if (gain + cost(b, z, depth(b, y) + 1 - depth(b, z)) >= 0) continue;
            reparent(i, z, x);
            reparent(j, z, y);
            index(a);
            index(b);
            moved = true;
            break;
          }
        }
      }
    if (!moved) break;
  }
  // Alike units (same root, same parents) are one tree again, edges in
  // breadth-first order from the root.
  Forest shorter = forest;
  std::vector<Tree>& out = shorter.trees;
  out.clear();
  std::sort(units.begin(), units.end(), [](const Unit& p, const Unit& q) {
    return std::tie(p.root, p.parent) < std::tie(q.root, q.parent);
  });
  for (size_t i = 0; i < units.size();) {
    size_t j = i;
    while (j < units.size() && units[j].root == units[i].root && units[j].parent == units[i].parent)
      ++j;
    Tree t;
    t.root = units[i].root;
    t.weight = static_cast<int64_t>(j - i);
    std::vector<int> frontier{t.root};
    for (size_t f = 0; f < frontier.size(); ++f)
      for (int v = 0; v < n; ++v)
        if (units[i].parent[static_cast<size_t>(v)] == frontier[f]) {
          t.edges.emplace_back(frontier[f], v);
          frontier.push_back(v);
        }
    out.push_back(std::move(t));
    i = j;
  }
  return shorter;
}

namespace {

// Each rank's direct neighbours in the forest's direction: the ranks its
// links reach through switches and NICs alone, ascending.
std::vector<std::vector<int>> directNeighbours(const topo::Topology& t, bool reversed) {
  const int n = t.ranks();
  const size_t v = t.nodes.size();
  std::vector<int> rankOf(v, -1);
  for (int r = 0; r < n; ++r) rankOf[static_cast<size_t>(t.nodeOfRank(r))] = r;
  // next[x]: nodes x's links lead to, in the forest's direction.
  std::vector<std::vector<int>> next(v);
  for (const topo::Link& l : t.links) {
    const int from = reversed ? l.to : l.from, to = reversed ? l.from : l.to;
    next[static_cast<size_t>(from)].push_back(to);
  }
  std::vector<std::vector<int>> near(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    std::vector<char> seen(v, 0);
    std::vector<int> stack{t.nodeOfRank(r)};
    seen[static_cast<size_t>(stack.back())] = 1;
    while (!stack.empty()) {
      const int x = stack.back();
      stack.pop_back();
      for (int y : next[static_cast<size_t>(x)]) {
        if (seen[static_cast<size_t>(y)]) continue;
        seen[static_cast<size_t>(y)] = 1;
        if (rankOf[static_cast<size_t>(y)] >= 0)
          near[static_cast<size_t>(r)].push_back(rankOf[static_cast<size_t>(y)]);
        else
          stack.push_back(y);
      }
    }
    std::sort(near[static_cast<size_t>(r)].begin(), near[static_cast<size_t>(r)].end());
  }
  return near;
}

// A tree being grown one piece wide: which ranks it has reached and how
// many children each has.
struct Growing {
  Tree tree;
  std::vector<char> reached;
  std::vector<int> children;
  Growing(int root, int n)
      : tree{root, 1, {}}, reached(static_cast<size_t>(n), 0), children(static_cast<size_t>(n), 0) {
    reached[static_cast<size_t>(root)] = 1;
  }
  void add(int parent, int child) {
    ++children[static_cast<size_t>(parent)];
    reached[static_cast<size_t>(child)] = 1;
    tree.edges.emplace_back(parent, child);
  }
  // Breadth first from `level` over direct neighbours that `within`
  // admits: every unreached neighbour of a level joins under the parent of
  // that level with the fewest children so far (the fan-out spreads).
  template <typename Within>
  void spread(const std::vector<std::vector<int>>& near, std::vector<int> level, Within within) {
    const size_t n = reached.size();
    while (!level.empty()) {
      std::vector<int> nextLevel;
      std::vector<std::vector<int>> parents(n);
      for (int a : level)
        for (int b : near[static_cast<size_t>(a)])
          if (!reached[static_cast<size_t>(b)] && within(b))
            parents[static_cast<size_t>(b)].push_back(a);
      for (size_t b = 0; b < n; ++b) {
        if (parents[b].empty()) continue;
        int best = parents[b].front();
        for (int a : parents[b])
          if (children[static_cast<size_t>(a)] < children[static_cast<size_t>(best)]) best = a;
        add(best, static_cast<int>(b));
        nextLevel.push_back(static_cast<int>(b));
      }
      level = std::move(nextLevel);
    }
  }
};

// The error for a tree that could not reach every rank.
Status unreachable(const topo::Topology& t, const Growing& g, bool reversed) {
  for (size_t b = 0; b < g.reached.size(); ++b)
    if (!g.reached[b])
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(b) +
                        (reversed ? " cannot reach" : " cannot be reached from") + " rank " +
                        std::to_string(g.tree.root) + " on '" + t.name + "'");
  return Status();
}

// Forest::arcs of `n` ranks: the pieces its trees send over each
// rank-to-rank arc.
void countArcs(Forest& f, int n) {
  f.arcs.assign(static_cast<size_t>(n), std::vector<int64_t>(static_cast<size_t>(n), 0));
  for (const Tree& tree : f.trees)
    for (auto [a, b] : tree.edges)
      f.arcs[static_cast<size_t>(a)][static_cast<size_t>(b)] += tree.weight;
}

// Each box's ranks, ascending, and each rank's position in its box.
std::pair<std::map<int, std::vector<int>>, std::vector<int>> boxesOf(const topo::Topology& t) {
  std::map<int, std::vector<int>> boxes;
  for (int r = 0; r < t.ranks(); ++r)
    boxes[t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box].push_back(r);
  std::vector<int> local(static_cast<size_t>(t.ranks()), 0);
  for (const auto& [b, ranks] : boxes)
    for (size_t i = 0; i < ranks.size(); ++i)
      local[static_cast<size_t>(ranks[i])] = static_cast<int>(i);
  return {std::move(boxes), std::move(local)};
}

Status setRoutedRate(const topo::Topology& t, bool reversed, Forest& f, int roots) {
  Result<Rational> rate = routedRate(t, reversed, f, roots);
  if (!rate.isOk()) return rate.status();
  f.algbw = rate.value();
  return Status::ok();
}

}  // namespace

Result<Forest> shallowForest(const topo::Topology& t, bool reversed, int root) {
  const int n = t.ranks();
  if (n < 2) return Status(StatusCode::kInvalidArgument, "a forest needs at least two ranks");
  const std::vector<std::vector<int>> near = directNeighbours(t, reversed);
  Forest f;
  f.k = 1;
  for (int r = 0; r < n; ++r) {
    if (root >= 0 && r != root) continue;
    Growing g(r, n);
    g.spread(near, {r}, [](int) { return true; });
    if (static_cast<int>(g.tree.edges.size()) != n - 1) return unreachable(t, g, reversed);
    f.trees.push_back(std::move(g.tree));
  }
  countArcs(f, n);
  return f;
}

Result<Forest> hierarchicalForest(const topo::Topology& t, bool reversed) {
  const int n = t.ranks();
  auto box = [&](int r) { return t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box; };
  // (Entries are matched by position in the box first.)
  const auto [boxes, local] = boxesOf(t);
  if (boxes.size() < 2)
    return Status(StatusCode::kInvalidArgument, "a hierarchical forest needs two boxes or more");
  const std::vector<std::vector<int>> near = directNeighbours(t, reversed);
  // Trees entering each rank from another box, and leaving each rank to one.
  std::vector<int> entries(static_cast<size_t>(n), 0), exits(static_cast<size_t>(n), 0);
  Forest f;
  f.k = 1;
  for (int r = 0; r < n; ++r) {
    Growing g(r, n);
    const int home = box(r);
    g.spread(near, {r}, [&](int b) { return box(b) == home; });
    for (const auto& [other, ranks] : boxes) {
      if (other == home) continue;
      // The entry: a direct neighbour in that box, from the root itself
      // where it has one (else from a rank of its box that has), the one
      // the fewest trees enter so far, then the same position in its box.
      int from = -1, to = -1;
      auto better = [&](int a, int x) {
        if (to < 0) return true;
        const auto key = [&](int p, int q) {
          const int size = static_cast<int>(ranks.size());
          return std::tuple{
              p != r, entries[static_cast<size_t>(q)], exits[static_cast<size_t>(p)],
              ((local[static_cast<size_t>(q)] - local[static_cast<size_t>(p)]) % size + size) %
                  size};
        };
        return key(a, x) < key(from, to);
      };
      for (int a = 0; a < n; ++a) {
        if (!g.reached[static_cast<size_t>(a)] || box(a) != home) continue;
        for (int x : near[static_cast<size_t>(a)])
          if (box(x) == other && better(a, x)) from = a, to = x;
      }
      if (to < 0)
        return Status(StatusCode::kInvalidArgument,
                      "no rank of box " + std::to_string(home) + " links directly to box " +
                          std::to_string(other) + " on '" + t.name + "'");
      ++entries[static_cast<size_t>(to)];
      ++exits[static_cast<size_t>(from)];
      g.add(from, to);
      g.spread(near, {to}, [&](int b) { return box(b) == other; });
    }
    if (static_cast<int>(g.tree.edges.size()) != n - 1) return unreachable(t, g, reversed);
    f.trees.push_back(std::move(g.tree));
  }
  countArcs(f, n);
  if (Status s = setRoutedRate(t, reversed, f, t.ranks()); !s.isOk()) return s;
  return f;
}

Result<Forest> railForest(const topo::Topology& t, bool reversed, int maxPieces,
                          std::optional<std::chrono::steady_clock::time_point> deadline) {
  const int n = t.ranks();
  auto box = [&](int r) { return t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box; };
  const auto [boxes, local] = boxesOf(t);
  if (boxes.size() < 2)
    return Status(StatusCode::kInvalidArgument, "a rail forest needs two boxes or more");
  // Each box alone: its ranks (in order), its switches, the links among
  // them; not its NICs, which are for the other boxes.
  auto boxAlone = [&](int b) {
    topo::Topology one;
    one.name = t.name + " box " + std::to_string(b);
    one.memoryBandwidth = t.memoryBandwidth;
    std::vector<int> node(t.nodes.size(), -1);
    for (int r : boxes.at(b)) node[static_cast<size_t>(t.nodeOfRank(r))] = one.addRank(b);
    // (A switch of the box that no rank of it links to, e.g. the network's,
    // is not its inside.)
    auto isRank = [&](int v) {
      return t.nodes[static_cast<size_t>(v)].kind == topo::NodeKind::kRank &&
             t.nodes[static_cast<size_t>(v)].box == b;
    };
    for (const topo::Link& l : t.links)
      for (auto [v, w] : {std::pair{l.from, l.to}, std::pair{l.to, l.from}})
        if (isRank(w) && node[static_cast<size_t>(v)] < 0 &&
            t.nodes[static_cast<size_t>(v)].box == b &&
            t.nodes[static_cast<size_t>(v)].kind == topo::NodeKind::kSwitch)
          node[static_cast<size_t>(v)] =
              one.addNode(t.nodes[static_cast<size_t>(v)].name, topo::NodeKind::kSwitch, b);
    for (const topo::Link& l : t.links)
      if (node[static_cast<size_t>(l.from)] >= 0 && node[static_cast<size_t>(l.to)] >= 0)
        one.addLink(node[static_cast<size_t>(l.from)], node[static_cast<size_t>(l.to)], l.bandwidth,
                    l.latency, l.kind);
    return one;
  };
  // Every box must be the first one's copy, position for position, for its
  // trees to serve them all.
  const topo::Topology first = boxAlone(boxes.begin()->first);
  auto shape = [](const topo::Topology& one) {
    std::vector<std::tuple<int, int, double>> links;
    for (const topo::Link& l : one.links) links.emplace_back(l.from, l.to, l.bandwidth);
    std::sort(links.begin(), links.end());
    return std::pair{one.nodes.size(), links};
  };
  for (auto it = std::next(boxes.begin()); it != boxes.end(); ++it)
    if (const int b = it->first; shape(boxAlone(b)) != shape(first))
      return Status(StatusCode::kInvalidArgument,
                    "a rail forest needs boxes alike; box " + std::to_string(b) + " of '" + t.name +
                        "' differs from box " + std::to_string(boxes.begin()->first));
  Result<Forest> inBox = relaxedForest(first, reversed, maxPieces, -1, deadline);
  if (!inBox.isOk()) return inBox.status();
  // Root r's tree j: the box's tree j of r's position in every box, the
  // other boxes entered from r itself at that position (its rail).
  Forest f;
  f.k = inBox.value().k;
  for (int r = 0; r < n; ++r) {
    const int i = local[static_cast<size_t>(r)];
    for (const Tree& boxTree : inBox.value().trees) {
      if (boxTree.root != i) continue;
      Tree tree{.root = r, .weight = boxTree.weight, .edges = {}};
      auto spread = [&](const std::vector<int>& ranks) {
        for (auto [a, b] : boxTree.edges)
          tree.edges.emplace_back(ranks[static_cast<size_t>(a)], ranks[static_cast<size_t>(b)]);
      };
      spread(boxes.at(box(r)));
      for (const auto& [other, ranks] : boxes) {
        if (other == box(r)) continue;
        const int entry = ranks[static_cast<size_t>(i)];
        if ((reversed ? t.route(entry, r) : t.route(r, entry)).empty())
          return Status(StatusCode::kInvalidArgument,
                        "rank " + std::to_string(r) + " has no route to rank " +
                            std::to_string(entry) + " on '" + t.name + "'");
        tree.edges.emplace_back(r, entry);
        spread(ranks);
      }
      f.trees.push_back(std::move(tree));
    }
  }
  f.maxflows = inBox.value().maxflows;
  countArcs(f, n);
  if (Status s = setRoutedRate(t, reversed, f, t.ranks()); !s.isOk()) return s;
  return f;
}

std::vector<int> linksBetweenBoxes(const topo::Topology& t) {
  // 0: on no route, 1: between boxes only, 2: within a box.
  std::vector<char> use(t.links.size(), 0);
  for (int a = 0; a < t.ranks(); ++a)
    for (int b = 0; b < t.ranks(); ++b) {
      if (a == b) continue;
      const bool apart = t.nodes[static_cast<size_t>(t.nodeOfRank(a))].box !=
                         t.nodes[static_cast<size_t>(t.nodeOfRank(b))].box;
      for (int l : t.route(a, b)) {
        char& u = use[static_cast<size_t>(l)];
        u = apart ? std::max<char>(u, 1) : 2;
      }
    }
  std::vector<int> out;
  for (size_t l = 0; l < use.size(); ++l)
    if (use[l] == 1) out.push_back(static_cast<int>(l));
  return out;
}

topo::Topology withHeadroom(const topo::Topology& t, double keep) {
  CHORUS_CHECK(keep > 0 && keep <= 1, "headroom keeps a fraction of a link in (0, 1]");
  topo::Topology out = t;
  for (int l : linksBetweenBoxes(t))
    out.setBandwidth(l, keep * t.links[static_cast<size_t>(l)].bandwidth);
  return out;
}

Result<Rational> routedRate(const topo::Topology& t, bool reversed, const Forest& f, int roots) {
  auto scaled = scaleCapacities(t);
  if (!scaled.isOk()) return scaled.status();
  std::vector<int64_t> load(t.links.size(), 0);
  for (const Tree& tree : f.trees)
    for (auto [a, b] : tree.edges)
      for (int l : reversed ? t.route(b, a) : t.route(a, b))
        load[static_cast<size_t>(l)] += tree.weight;
  int64_t bestCap = 0, bestLoad = 0;  // min cap / load, as a fraction
  for (size_t l = 0; l < load.size(); ++l)
    if (load[l] > 0 && (bestLoad == 0 || static_cast<i128>(scaled.value().cap[l]) * bestLoad <
                                             static_cast<i128>(bestCap) * load[l])) {
      bestCap = scaled.value().cap[l];
      bestLoad = load[l];
    }
  if (bestLoad == 0) return f.algbw;  // no edges: nothing routed
  return times(scaled.value().unit, reduced(static_cast<i128>(bestCap) * roots * f.k, bestLoad));
}

Result<Forest> routedForest(const topo::Topology& t, bool reversed, int maxPieces, int root,
                            bool relax,
                            std::optional<std::chrono::steady_clock::time_point> deadline) {
  Result<Forest> f = buildForest(t, reversed, maxPieces, root, true, relax, deadline, true);
  if (!f.isOk()) return f;
  // What its arcs' routes allow (the splits followed them, so it is the
  // rate unless the routes that tied differ past a split; never above it).
  Forest& forest = f.value();
  const Rational rate = forest.algbw;
  if (Status s = setRoutedRate(t, reversed, forest, root < 0 ? t.ranks() : 1); !s.isOk()) return s;
  if (i128{rate.num} * forest.algbw.den < i128{forest.algbw.num} * rate.den) forest.algbw = rate;
  return f;
}

}  // namespace chorus::synth
