#include "synth/bound.h"

#include <cmath>
#include <numeric>
#include <utility>

#include "synth/cuts.h"
#include "synth/maxflow.h"

namespace chorus::synth {

Rational reduced(i128 num, i128 den) {
  CHORUS_CHECK(den > 0 && num >= 0, "bad rational");
  i128 a = num, b = den;
  while (b != 0) a = std::exchange(b, a % b);
  num /= a;
  den /= a;
  CHORUS_CHECK(num <= INT64_MAX && den <= INT64_MAX, "rational overflow");
  return Rational{static_cast<int64_t>(num), static_cast<int64_t>(den)};
}

Rational times(Rational a, Rational b) { return reduced(i128{a.num} * b.num, i128{a.den} * b.den); }

Result<Scaled> scaleCapacities(const topo::Topology& t) {
  Scaled out;
  int64_t pow10 = 1;
  for (int digits = 0;; ++digits, pow10 *= 10) {
    bool exact = true;
    for (const topo::Link& l : t.links) {
      double v = l.bandwidth * static_cast<double>(pow10);
      if (std::abs(v - std::round(v)) > 1e-9 * v) exact = false;
    }
    if (exact) break;
    if (digits == 6)
      return Status(StatusCode::kInvalidArgument,
                    "link bandwidths need more than 6 decimals to be exact integers");
  }
  int64_t g = 0;
  for (const topo::Link& l : t.links) {
    double v = std::round(l.bandwidth * static_cast<double>(pow10));
    if (v > 1e12)
      return Status(StatusCode::kInvalidArgument, "a link bandwidth is too large to scale");
    out.cap.push_back(static_cast<int64_t>(v));
    g = std::gcd(g, out.cap.back());
  }
  if (g == 0) g = 1;
  for (int64_t& c : out.cap) c /= g;
  out.unit = reduced(g, pow10);
  return out;
}

namespace {

// One orientation of the topology as a flow network, with one extra node
// (the super source) joined to every rank.
class Network {
 public:
  Network(const topo::Topology& t, const std::vector<int64_t>& cap, bool reversed)
      : t_(t), cap_(cap), reversed_(reversed), flow_(static_cast<int>(t.nodes.size()) + 1) {
    for (const topo::Link& l : t.links)
      linkArc_.push_back(reversed ? flow_.addArc(l.to, l.from, 0) : flow_.addArc(l.from, l.to, 0));
    for (int r = 0; r < t.ranks(); ++r)
      sourceArc_.push_back(flow_.addArc(source(), t.nodeOfRank(r), 0));
  }
  int source() const { return static_cast<int>(t_.nodes.size()); }
  MaxFlow& flow() { return flow_; }
  void setScale(int64_t linkFactor, int64_t sourceCap) {
    for (size_t i = 0; i < linkArc_.size(); ++i)
      flow_.setCapacity(linkArc_[i], cap_[i] * linkFactor);
    for (int a : sourceArc_) flow_.setCapacity(a, sourceCap);
  }
  // Capacity (integer units) of the links leaving `inS` in this orientation.
  int64_t leaving(const std::vector<char>& inS) const {
    int64_t sum = 0;
    for (size_t i = 0; i < t_.links.size(); ++i) {
      int from = t_.links[i].from, to = t_.links[i].to;
      if (reversed_) std::swap(from, to);
      if (inS[static_cast<size_t>(from)] && !inS[static_cast<size_t>(to)]) sum += cap_[i];
    }
    return sum;
  }
  int64_t entering(int node) const {
    int64_t sum = 0;
    for (size_t i = 0; i < t_.links.size(); ++i)
      if ((reversed_ ? t_.links[i].from : t_.links[i].to) == node) sum += cap_[i];
    return sum;
  }

 private:
  const topo::Topology& t_;
  const std::vector<int64_t>& cap_;
  bool reversed_;
  MaxFlow flow_;
  std::vector<int> linkArc_, sourceArc_;
};

std::string unreachable(const topo::Topology& t, int rank, bool reversed) {
  return "rank " + std::to_string(rank) + (reversed ? " cannot reach" : " cannot be reached from") +
         " the other ranks of '" + t.name + "'";
}

}  // namespace

// Dinkelbach's iteration: with y = p/q, a maximum flow from the super source
// (y to every rank, links scaled by q) to rank v is below N p exactly when
// some S without v has q B+(S) < p |S ∩ ranks|; the worst such S gives the
// next, strictly smaller y. When every rank receives N p, y is the minimum.
Result<Ratio> shardRatio(const topo::Topology& t, const std::vector<int64_t>& cap, bool reversed) {
  const int n = t.ranks();
  Network net(t, cap, reversed);
  Ratio r;
  // Start from S = all nodes but the rank with the least capacity in.
  int first = 0;
  int64_t least = INT64_MAX;
  for (int v = 0; v < n; ++v)
    if (int64_t in = net.entering(t.nodeOfRank(v)); in < least) {
      least = in;
      first = v;
    }
  if (least == 0) return Status(StatusCode::kInvalidArgument, unreachable(t, first, reversed));
  r.inS.assign(t.nodes.size(), 1);
  r.inS[static_cast<size_t>(t.nodeOfRank(first))] = 0;
  Rational y = reduced(least, n - 1);
  r.cut = least;
  r.p = y.num;
  r.q = y.den;
  std::vector<char> side(t.nodes.size());
  for (;;) {
    ++r.rounds;
    net.setScale(r.q, r.p);
    const int64_t need = static_cast<int64_t>(n) * r.p;
    int64_t worst = need;
    for (int v = 0; v < n; ++v) {
      int64_t f = net.flow().run(net.source(), t.nodeOfRank(v), worst);
      ++r.maxflows;
      if (f < worst) {
        worst = f;
        for (size_t u = 0; u < side.size(); ++u)
          side[u] = net.flow().sourceSide(static_cast<int>(u));
      }
    }
    if (worst >= need) break;
    int ranksIn = 0;
    for (int v = 0; v < n; ++v) ranksIn += side[static_cast<size_t>(t.nodeOfRank(v))];
    int64_t out = net.leaving(side);
    CHORUS_CHECK(ranksIn > 0 && i128{out} * r.q < i128{r.p} * ranksIn,
                 "a violated cut must lower the ratio");
    if (out == 0) {
      for (int v = 0; v < n; ++v)
        if (!side[static_cast<size_t>(t.nodeOfRank(v))])
          return Status(StatusCode::kInvalidArgument, unreachable(t, v, reversed));
    }
    Rational next = reduced(out, ranksIn);
    r.p = next.num;
    r.q = next.den;
    r.cut = out;
    r.inS = side;
  }
  return r;
}

namespace {

// Broadcast from (reduce to) `root`: the least maximum flow between the
// root and another rank.
Result<Ratio> rootRatio(const topo::Topology& t, const std::vector<int64_t>& cap, bool reversed,
                        int root) {
  Network net(t, cap, reversed);
  net.setScale(1, 0);
  Ratio r;
  r.rounds = 1;
  r.p = INT64_MAX;
  for (int v = 0; v < t.ranks(); ++v) {
    if (v == root) continue;
    int64_t f = net.flow().run(t.nodeOfRank(root), t.nodeOfRank(v), r.p);
    ++r.maxflows;
    if (f == 0)
      return Status(StatusCode::kInvalidArgument,
                    "rank " + std::to_string(v) +
                        (reversed ? " cannot reach" : " cannot be reached from") + " root " +
                        std::to_string(root) + " on '" + t.name + "'");
    if (f < r.p) {
      r.p = f;
      r.cut = f;
      r.inS.assign(t.nodes.size(), 0);
      for (size_t u = 0; u < t.nodes.size(); ++u)
        r.inS[u] = net.flow().sourceSide(static_cast<int>(u));
    }
  }
  return r;
}

}  // namespace

std::string Rational::str() const {
  return den == 1 ? std::to_string(num) : std::to_string(num) + "/" + std::to_string(den);
}

Result<Bound> optimalBound(const topo::Topology& topo, CollectiveKind collective, int root) {
  const int n = topo.ranks();
  if (n < 2) return Status(StatusCode::kInvalidArgument, "a bound needs at least two ranks");
  bool rooted = collective == CollectiveKind::kBroadcast || collective == CollectiveKind::kReduce;
  if (rooted && (root < 0 || root >= n))
    return Status(StatusCode::kInvalidArgument,
                  "root " + std::to_string(root) + " is not a rank of '" + topo.name + "'");
  if (collective != CollectiveKind::kAllGather && collective != CollectiveKind::kReduceScatter &&
      collective != CollectiveKind::kAllReduce && !rooted)
    return Status(StatusCode::kInvalidArgument,
                  "no bandwidth bound for " + std::string(collectiveName(collective)) +
                      " here (allgather, reducescatter, allreduce, broadcast, reduce; alltoall: "
                      "allToAllBound)");
  auto scaled = scaleCapacities(topo);
  if (!scaled.isOk()) return scaled.status();
  const Scaled& sc = scaled.value();
  Bound b;
  b.collective = collective;
  auto fill = [&](const Ratio& r) {
    b.cut.clear();
    b.cutRanks = 0;
    for (size_t u = 0; u < topo.nodes.size(); ++u)
      if (r.inS[u]) {
        b.cut.push_back(static_cast<int>(u));
        b.cutRanks += topo.nodes[u].kind == topo::NodeKind::kRank;
      }
    b.cutCapacity = times(Rational{r.cut, 1}, sc.unit);
    b.rounds += r.rounds;
    b.maxflows += r.maxflows;
  };
  if (rooted) {
    bool reversed = collective == CollectiveKind::kReduce;
    auto r = rootRatio(topo, sc.cap, reversed, root);
    if (!r.isOk()) return r.status();
    fill(r.value());
    b.algbw = times(Rational{r.value().p, 1}, sc.unit);
  } else {
    // Per-shard rates y (GB/s): allgather on the topology, reduce-scatter
    // on its reverse; algbw = N y.
    Rational ag, rs;
    for (bool reversed : {true, false}) {
      if (reversed && collective == CollectiveKind::kAllGather) continue;
      if (!reversed && collective == CollectiveKind::kReduceScatter) continue;
      auto r = shardRatio(topo, sc.cap, reversed);
      if (!r.isOk()) return r.status();
      fill(r.value());
      Rational y = times(Rational{r.value().p, r.value().q}, sc.unit);
      (reversed ? rs : ag) = times(y, Rational{n, 1});
    }
    if (collective == CollectiveKind::kAllReduce) {
      // T = M / rs + M / ag.
      b.algbw = reduced(i128{ag.num} * rs.num, i128{ag.num} * rs.den + i128{rs.num} * ag.den);
    } else {
      b.algbw = collective == CollectiveKind::kAllGather ? ag : rs;
    }
  }
  b.busbw = b.algbw.value() * busBandwidthFactor(collective, n);
  return b;
}

}  // namespace chorus::synth
