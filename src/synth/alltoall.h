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

#include "compiler/compiler.h"
#include "core/status.h"
#include "synth/bound.h"
#include "synth/lower.h"
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
  // The optimal flow: [source rank][link], GB/s (every other rank receives
  // pairRate of it).
  std::vector<std::vector<double>> flow;
};

// kInvalidArgument for fewer than two ranks or a rank that cannot reach
// another; kInternal if GLPK fails on the (always feasible) program.
Result<AllToAllBound> allToAllBound(const topo::Topology& t);

// A way for a block from ranks.front() to ranks.back(): the ranks it
// visits in order (the ones between relay it), and the rate it carries.
struct BlockPath {
  std::vector<int> ranks;
  double rate = 0;  // GB/s of the pair's pairRate
};

// The optimal flow of every source split into paths to each destination
// ([source][destination], empty on the diagonal), each path the rank-to-
// rank hops of a walk along links that carry the source's flow (switches
// and NICs forward; a rank on the way relays). Cycles in the flow are
// dropped; every pair's paths carry its pairRate (to rounding).
std::vector<std::vector<std::vector<BlockPath>>> allToAllPaths(const topo::Topology& t,
                                                               const AllToAllBound& b);

// The paths as an alltoall program (out of place): every block cut into
// `pieces` chunks shared among its paths in proportion to their rates
// (largest remainders), each share copied hop by hop, relayed through a
// scratch buffer. Options: name, protocol, instances.
using AllToAllPaths = std::vector<std::vector<std::vector<BlockPath>>>;
lang::ProgramOptions allToAllProgramOptions(int ranks, int pieces, const LowerOptions& options);
void recordAllToAll(lang::Program& p, const AllToAllPaths& paths);
compiler::Compiled lowerAllToAll(int ranks, const AllToAllPaths& paths, int pieces,
                                 const LowerOptions& options);

}  // namespace chorus::synth
