// The bandwidth-optimal bounds against docs/spec/TOPOLOGIES.md's known optima (exact
// to 1e-9 relative), closed forms, and a brute force over every node set
// on small topologies.
#include "synth/bound.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "synth/alltoall.h"
#include "synth/maxflow.h"
#include "topo/presets.h"

namespace chorus::synth {
namespace {

topo::Topology preset(const std::string& name) {
  auto t = topo::makePreset(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? t.value() : topo::Topology{};
}

Bound mustBound(const std::string& name, CollectiveKind c, int root = 0) {
  auto b = optimalBound(preset(name), c, root);
  EXPECT_TRUE(b.isOk()) << name << ": " << b.status().toString();
  return b.isOk() ? b.value() : Bound{};
}

TEST(Bound, KnownAllGatherOptima) {
  struct Case {
    const char* topo;
    double algbw;
  };
  // docs/spec/TOPOLOGIES.md, "Known optima" (bandwidth-only allgather algbw, GB/s).
  for (auto [name, want] :
       {Case{"dgx-a100", 342.857142857}, Case{"dgx1", 171.428571429}, Case{"dgx1@0,1,4,5", 100.0},
        Case{"mi250", 342.857142857}, Case{"dgx-a100x2", 346.666666667},
        Case{"dgx-h100x2", 533.333333333}, Case{"ndv2x2", 25.0}, Case{"dgx2x2", 129.032258065},
        Case{"ring:8", 57.142857143}, Case{"torus:4", 106.666666667}}) {
    Bound b = mustBound(name, CollectiveKind::kAllGather);
    EXPECT_NEAR(b.algbw.value(), want, want * 1e-9) << name << " = " << b.algbw.str();
    // Allreduce is half on these symmetric machines.
    Bound ar = mustBound(name, CollectiveKind::kAllReduce);
    EXPECT_NEAR(ar.algbw.value(), want / 2, want * 1e-9) << name;
  }
  // Exact rationals and the cut that binds.
  Bound two = mustBound("dgx-a100x2", CollectiveKind::kAllGather);
  EXPECT_EQ(two.algbw.str(), "1040/3");
  EXPECT_EQ(two.cutRanks, 15);  // every GPU but one, receiving 300 + 25
  EXPECT_EQ(two.cutCapacity.str(), "325");
}

// A ring of n at b per direction: N y with y = 2b / (n - 1) (S = n - 1
// ranks, two links out); a root's broadcast: 2b (two neighbours).
TEST(Bound, ClosedForms) {
  for (int n : {2, 3, 5, 8, 16})
    for (double bw : {12.5, 25.0, 100.0}) {
      std::string name = "ring:" + std::to_string(n) + ":" + std::to_string(bw);
      double links = n == 2 ? 1 : 2;
      Bound ag = mustBound(name, CollectiveKind::kAllGather);
      EXPECT_NEAR(ag.algbw.value(), n * links * bw / (n - 1), 1e-9 * bw) << name;
      Bound rs = mustBound(name, CollectiveKind::kReduceScatter);
      EXPECT_NEAR(rs.algbw.value(), ag.algbw.value(), 1e-9 * bw) << name;
      for (int root : {0, n - 1}) {
        Bound bc = mustBound(name, CollectiveKind::kBroadcast, root);
        EXPECT_NEAR(bc.algbw.value(), links * bw, 1e-9 * bw) << name;
        Bound rd = mustBound(name, CollectiveKind::kReduce, root);
        EXPECT_NEAR(rd.algbw.value(), links * bw, 1e-9 * bw) << name;
      }
    }
  // Fully connected: every rank receives (n - 1) b, so y = b, algbw = n b.
  Bound full = mustBound("full:6", CollectiveKind::kAllGather);
  EXPECT_EQ(full.algbw.str(), "150");
}

// Brute force: every subset S of the nodes holding some but not all ranks.
double bruteAllGather(const topo::Topology& t, bool reversed) {
  const size_t v = t.nodes.size();
  double best = INFINITY;
  for (uint32_t mask = 1; mask < (1u << v) - 1; ++mask) {
    int ranksIn = 0;
    for (int r = 0; r < t.ranks(); ++r) ranksIn += (mask >> t.nodeOfRank(r)) & 1;
    if (ranksIn == 0 || ranksIn == t.ranks()) continue;
    double out = 0;
    for (const topo::Link& l : t.links) {
      int from = reversed ? l.to : l.from, to = reversed ? l.from : l.to;
      if (((mask >> from) & 1) && !((mask >> to) & 1)) out += l.bandwidth;
    }
    best = std::min(best, out / ranksIn);
  }
  return best * t.ranks();
}

// Random directed graphs with switches and uneven capacities (not
// symmetric, so reduce-scatter differs from allgather) against the brute
// force.
TEST(Bound, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    topo::Topology t;
    t.name = "random" + std::to_string(trial);
    int ranks = 2 + static_cast<int>(rng() % 5), switches = static_cast<int>(rng() % 4);
    for (int r = 0; r < ranks; ++r) t.addRank();
    for (int s = 0; s < switches; ++s) t.addNode("sw" + std::to_string(s), topo::NodeKind::kSwitch);
    int nodes = ranks + switches;
    // A ring through all nodes keeps everything reachable; random arcs on top.
    for (int u = 0; u < nodes; ++u)
      t.addLink(u, (u + 1) % nodes, 1 + rng() % 8, 0, topo::LinkKind::kGeneric);
    for (int k = 0; k < nodes * 2; ++k) {
      int a = static_cast<int>(rng() % nodes), b = static_cast<int>(rng() % nodes);
      if (a != b) t.addLink(a, b, 0.5 * (1 + rng() % 16), 0, topo::LinkKind::kGeneric);
    }
    SCOPED_TRACE(t.name);
    auto ag = optimalBound(t, CollectiveKind::kAllGather);
    auto rs = optimalBound(t, CollectiveKind::kReduceScatter);
    ASSERT_TRUE(ag.isOk() && rs.isOk());
    EXPECT_NEAR(ag.value().algbw.value(), bruteAllGather(t, false), 1e-9);
    EXPECT_NEAR(rs.value().algbw.value(), bruteAllGather(t, true), 1e-9);
    // The reported cut attains the bound.
    double out = 0;
    std::vector<char> in(t.nodes.size(), 0);
    for (int u : ag.value().cut) in[static_cast<size_t>(u)] = 1;
    for (const topo::Link& l : t.links)
      if (in[static_cast<size_t>(l.from)] && !in[static_cast<size_t>(l.to)]) out += l.bandwidth;
    EXPECT_NEAR(out, ag.value().cutCapacity.value(), 1e-9);
  }
}

TEST(Bound, BadInputIsAnError) {
  topo::Topology one = preset("ring:1");
  EXPECT_EQ(optimalBound(one, CollectiveKind::kAllGather).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(optimalBound(preset("ring:4"), CollectiveKind::kAllToAll).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(optimalBound(preset("ring:4"), CollectiveKind::kBroadcast, 4).status().code(),
            StatusCode::kInvalidArgument);
  // A rank nothing reaches.
  topo::Topology cut;
  cut.name = "oneway";
  int a = cut.addRank(), b = cut.addRank();
  cut.addLink(a, b, 10, 0, topo::LinkKind::kGeneric);
  auto r = optimalBound(cut, CollectiveKind::kAllGather);
  ASSERT_FALSE(r.isOk());
  EXPECT_NE(r.status().message().find("rank 0 cannot be reached"), std::string::npos)
      << r.status().message();
}

// Alltoall (the multicommodity LP) against closed forms: full:N moves
// every pair over its own link (N c); an even bidirectional ring carries
// N x (N^2 / 4) pair-hops over 2N links (8c / N); a 4x4 torus 16 x 32
// pair-hops over 64 links of 25 (50); B DGX A100 boxes send 8 x 8(B-1)
// pairs per box out through 8 NICs of 25 (25B / (B-1)); one box, 7 pairs
// per 300 GB/s port (2400/7); two NDv2 boxes, 64 pairs over one 12.5 arc.
// A send cap on one rank of full:4 limits its 3 pairs; a rank nobody can
// reach is an error.
TEST(Bound, AllToAllClosedForms) {
  struct Case {
    const char* topo;
    const char* exact;
  };
  for (auto [name, exact] :
       {Case{"full:4", "100"}, Case{"full:5:10", "50"}, Case{"ring:4", "50"}, Case{"ring:8", "25"},
        Case{"torus:4", "50"}, Case{"dgx-a100x2", "50"}, Case{"dgx-a100x4", "100/3"},
        Case{"dgx-a100x8", "200/7"}, Case{"dgx-a100", "2400/7"}, Case{"ndv2x2", "25/8"},
        Case{"dgx-h100x2", "100"}}) {
    auto b = allToAllBound(preset(name));
    ASSERT_TRUE(b.isOk()) << name << ": " << b.status().toString();
    ASSERT_TRUE(b.value().exact) << name << ": " << b.value().algbw;
    EXPECT_EQ(b.value().algbwExact.str(), exact) << name;
    EXPECT_NEAR(b.value().algbw, b.value().algbwExact.value(), 1e-9 * b.value().algbw) << name;
    EXPECT_NEAR(b.value().pairRate * preset(name).ranks(), b.value().algbw, 1e-9) << name;
    EXPECT_FALSE(b.value().bottleneck.empty()) << name;
  }
  topo::Topology capped = preset("full:4");
  capped.nodes[static_cast<size_t>(capped.nodeOfRank(0))].sendCap = 30;  // 3 pairs x 10
  auto c = allToAllBound(capped);
  ASSERT_TRUE(c.isOk());
  EXPECT_NEAR(c.value().algbw, 40.0, 1e-9);
  topo::Topology cut = preset("ring:4");
  std::erase_if(cut.links, [&](const topo::Link& l) { return l.to == cut.nodeOfRank(2); });
  auto bad = allToAllBound(cut);
  ASSERT_FALSE(bad.isOk());
  EXPECT_NE(bad.status().message().find("cannot reach"), std::string::npos);
}

TEST(MaxFlow, SmallNetworks) {
  // Wide arcs out of 0, narrow ones into 3 (5 + 2), and a cross arc.
  MaxFlow f(4);
  f.addArc(0, 1, 10);
  f.addArc(0, 2, 10);
  f.addArc(1, 3, 5);
  f.addArc(2, 3, 2);
  f.addArc(2, 1, 9);
  EXPECT_EQ(f.run(0, 3), 7);
  EXPECT_EQ(f.run(0, 3, 5), 5);  // stops at the limit
  EXPECT_EQ(f.run(0, 3), 7);     // starts from zero again
  // The only minimum cut: {0, 1, 2} | {3}.
  EXPECT_TRUE(f.sourceSide(1) && f.sourceSide(2));
  EXPECT_FALSE(f.sourceSide(3));
}

}  // namespace
}  // namespace chorus::synth
