// Blink's approach to allgather trees (docs/synthesis.md): approximate
// packing by multiplicative weights, then rounding to a few trees per root,
// when fewer trees matter more than the last percent of bandwidth. Works on
// the rank-to-rank arcs left after splitting the switches off (forest.h,
// splitTopology), so it sees the same capacities as the exact forest.
//   1. Garg-Koenemann: every arc starts with a small length per capacity;
//      in rounds, each root in turn routes its demand along its minimum-
//      length spanning out-tree (Chu-Liu/Edmonds), as much as the tree's
//      narrowest arc allows, and every arc it uses grows longer by
//      (1 + eps x amount / capacity). Scaled to fit every arc, the trees
//      carry every root at a common rate within a few eps of the optimum.
//   2. Rounding: each root keeps its `trees` heaviest distinct trees and
//      splits its shard among them in whole pieces (pieces = 4 x trees),
//      in proportion to their weights; the rate those integer weights
//      reach is computed exactly (the arc most loaded for its capacity).
#pragma once

#include "core/status.h"
#include "synth/forest.h"
#include "topo/topology.h"

namespace chorus::synth {

struct BlinkOptions {
  int treesPerRoot = 4;
  double epsilon = 0.05;  // multiplicative-weights step
};

// The rounded forest: k = pieces per shard, trees with whole weights
// summing to k per root, algbw the exact rate it reaches (at most the
// optimum's), arcs the pieces each arc carries per unit time.
// `reversed`: in-trees (reduce-scatter). kInvalidArgument as splitTopology.
Result<Forest> blinkForest(const topo::Topology& t, bool reversed, const BlinkOptions& options,
                           int maxPieces = 64);

}  // namespace chorus::synth
