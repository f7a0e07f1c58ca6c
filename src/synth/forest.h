// Trees that attain the allgather optimum (docs/synthesis.md), after
// ForestColl: with the optimum y* per shard, cut every shard into k pieces
// so that each link carries a whole number of pieces per unit time; split
// every switch off (replace u -> switch -> v by u -> v) without lowering
// the optimum; then pack, for every rank, out-trees that span all ranks
// and carry its k pieces, using each rank-to-rank arc at most its count.
// Every step is checked with maximum flows (Edmonds' condition), so the
// forest is exact: sending each tree's pieces down it at the rate its
// arcs allow finishes in the optimal time.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "core/status.h"
#include "synth/bound.h"
#include "topo/topology.h"

namespace chorus::synth {

struct Tree {
  int root = 0;        // the rank whose pieces it carries
  int64_t weight = 0;  // how many of the root's k pieces
  // (from, to) ranks, each `to` after its `from` has been reached. For a
  // reversed forest (reduce-scatter) the data flows the other way: from
  // `to` to `from`, toward the root.
  std::vector<std::pair<int, int>> edges;
  bool operator==(const Tree&) const = default;
};

struct Forest {
  int k = 0;                // pieces per shard
  std::vector<Tree> trees;  // each root's weights sum to k
  Rational algbw;           // the optimum it attains, GB/s (algbw of its collective)
  // Rank-to-rank pieces per unit time after splitting: [from][to] (in the
  // forest's direction).
  std::vector<std::vector<int64_t>> arcs;
  int maxflows = 0;
};

// The forest of the topology (`reversed`: of its reverse, for
// reduce-scatter). With `root` >= 0, the trees of that root alone, carrying
// its whole message at its least cut (broadcast; reversed: reduce).
// kInvalidArgument when a rank cannot be reached, when the pieces per shard
// would exceed `maxPieces`, or when a switch cannot be split off entirely
// (a switch whose links in and out differ can leave capacity no
// rank-to-rank arc can use).
// kTimeout when `deadline` passes before the forest is packed.
Result<Forest> packForest(
    const topo::Topology& t, bool reversed, int maxPieces = 64, int root = -1,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// Where the optimum needs more than `maxPieces` pieces per shard: the
// forest of the fastest rate below it that needs at most that many (the
// largest k/q at or below the optimum's rate per shard with k <= maxPieces;
// any slower rate keeps Edmonds' condition). Forest::algbw says what it
// attains. The same as packForest where the optimum fits.
// With `root` >= 0, that root's trees alone (broadcast; reversed: reduce),
// as packForest.
Result<Forest> relaxedForest(
    const topo::Topology& t, bool reversed, int maxPieces, int root = -1,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// packForest (relaxedForest where `relax`) with every switch split off
// along the topology's routes: u -> switch -> v only where a route between
// ranks passes u, the switch and v in that order, switches nearest the
// ranks first. A rank-to-rank arc of the packed forest may stand for
// paths through different switches (a fat tree's two spines) that the
// one route a pair takes cannot all follow (MSCCL's IR names no paths);
// here each arc's pieces took the way its pair is routed. Forest::algbw is
// its rate with every edge routed (at most the optimum). kInvalidArgument
// also where the routes leave too little to keep the optimum (a switch
// cannot be split off).
Result<Forest> routedForest(
    const topo::Topology& t, bool reversed, int maxPieces, int root = -1, bool relax = false,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// Forest::algbw of `f` in the bandwidth model with every edge's pieces
// carried over the links the way the simulator routes its pair: roots (N,
// or 1 for one root's trees) x k x the least over links of capacity /
// pieces carried. Below f.algbw where arcs split over several paths share
// a route (routedForest).
Result<Rational> routedRate(const topo::Topology& t, bool reversed, const Forest& f, int roots);

// Whether every pair of nodes has as much bandwidth each way. Then the
// reverse of the topology is the topology itself to the packer (the same
// matrix of capacities), and packForest and relaxedForest of it are the
// forest itself, bit for bit (Forest.ASymmetricTopologysReverseForestIsItsForest):
// a search needs each only once.
bool linksSymmetric(const topo::Topology& t);

// packForest's first steps alone: the pieces per shard k, the
// rank-to-rank arcs after splitting every switch off (Forest::arcs) and the
// optimum, without trees (blink.h packs its own on these arcs).
Result<Forest> splitTopology(const topo::Topology& t, bool reversed, int maxPieces = 64);

// The same forest with shallower trees and every arc's load unchanged: a
// rank deep in a tree costs a schedule its depth in forwarding hops (the
// pipeline's fill and drain; docs/synthesis.md). On unit trees (one piece
// each, so exchanges move equal loads): rank z with parent y in tree A
// takes a shallower parent x if another tree B has z under x and can take
// z under y (no cycle in either), so arcs x->z and y->z keep their loads,
// or alone where arc x->z has spare capacity; a move is taken when it
// lowers the two trees' sum of squared depths. Alike trees are merged.
Forest shortenForest(const Forest& forest);

// For small messages, where a step's latency costs more than bandwidth:
// one tree per root (k = 1), breadth-first over the ranks' direct
// neighbours (ranks joined by a link or through switches and NICs only), a
// rank taking the reached neighbour with the fewest children as its parent
// so the fan-out spreads. Each rank's data goes the fewest hops, at the
// price of its links' bandwidth (algbw is left 0: the simulator says what
// it reaches). `reversed`: in-trees (reduce-scatter); `root` >= 0: that
// root's tree alone. kInvalidArgument when a rank cannot be reached.
Result<Forest> shallowForest(const topo::Topology& t, bool reversed, int root = -1);

// For several boxes: one tree per root (k = 1) that spreads inside the
// root's box breadth first, and enters every other box once, at a rank
// the root links to directly (its NIC's), the one the fewest trees have
// entered so far (ties: the same position in its box — its rail), to
// spread there the same way. The classic hierarchical allgather as a
// forest: every shard crosses into each box once. algbw is its exact rate
// in the bandwidth model (every edge routed as the simulator routes it):
// the optimum where the boxes' NICs bind (4 or more DGX A100 boxes), a
// little below it where the optimum sends some pieces across twice (2 x
// DGX A100: 342.857 of 346.667 GB/s). kInvalidArgument on one box, or when
// no rank of a box links directly to another box.
Result<Forest> hierarchicalForest(const topo::Topology& t, bool reversed);

// For several boxes alike, made for insides that are no single switch
// (MI250's xGMI mesh, where hierarchicalForest's breadth-first trees load
// a few links with most shards): the box's own forest (packForest of one box alone, or
// relaxedForest's where that needs more than `maxPieces` pieces), used
// in every box; root r's pieces leave its box from r itself, to the rank
// at r's position in each other box (its rail), and spread there by the
// same trees. The in-box trees then carry every box's shard of that
// position: exact where the NICs bind and the box's forest keeps up with
// them (4 x MI250), the box's rate otherwise. algbw: its rate in the
// bandwidth model, as hierarchicalForest's. kInvalidArgument on one box,
// boxes that differ, or a rank with no route to its rail.
Result<Forest> railForest(
    const topo::Topology& t, bool reversed, int maxPieces,
    std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

// The links between boxes: those a route between ranks of different boxes
// (topo::Node::box) crosses and no route within a box does, e.g. the NICs'
// and the network's. Empty for one box.
std::vector<int> linksBetweenBoxes(const topo::Topology& t);

// `t` with the links between boxes at `keep` (0 < keep <= 1) of their
// bandwidth. A forest packed on it leaves those links idle 1 - keep of the
// time: an optimal forest keeps the slow links between boxes busy to the
// end, so what they deliver last must still be forwarded inside a box
// after every other transfer has finished; with headroom they finish
// early and the forwarding overlaps the fast links' last work, for a
// bound at most the links' share of the optimum lower (docs/synthesis.md).
topo::Topology withHeadroom(const topo::Topology& t, double keep);

}  // namespace chorus::synth
