// The alltoall optimum in the bandwidth-only model (docs/synthesis.md):
// every ordered pair of ranks exchanges M/N of each rank's M bytes at once,
// routed anywhere over the topology (a switch forwards, nothing is
// combined), so the best rate is the maximum concurrent multicommodity
// flow: the largest lambda (GB/s per pair) such that every source rank can
// send lambda to every other rank together within the links' bandwidths
// (and the ranks' send / receive caps). A linear program, one commodity
// per source: N x links flow variables. Solved with GLPK's simplex and,
// when small enough, refined by its exact (rational) simplex; algbw* = N
// lambda. Unlike allgather's, no single cut need bind it (multicommodity
// flow and cuts can differ), so it reports the links whose capacity
// constrains the optimum (positive dual) instead.
#pragma once

#include <vector>

#include "core/status.h"
#include "synth/bound.h"
#include "topo/topology.h"

namespace chorus::synth {

struct AllToAllBound {
  double algbw = 0;     // GB/s: M / T*
  double pairRate = 0;  // lambda, GB/s per ordered pair
  // algbw as the simplest fraction with a denominator up to 10^6 within
  // 1e-12 of it (exact = whether one was found; the LP's optimum is a
  // rational, usually with a small denominator).
  bool exact = false;
  Rational algbwExact;
  bool exactSimplex = false;    // refined by GLPK's rational simplex
  std::vector<int> bottleneck;  // topology link ids with a positive dual
  int variables = 0, constraints = 0;
  double seconds = 0;
};

// kInvalidArgument for fewer than two ranks or a rank that cannot reach
// another; kInternal if GLPK fails on the (always feasible) program.
Result<AllToAllBound> allToAllBound(const topo::Topology& t);

}  // namespace chorus::synth
