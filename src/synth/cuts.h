// The exact cut machinery that bound.cc and forest.cc share (internal to
// src/synth): integer capacities and the min-ratio cut of a topology.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "synth/bound.h"
#include "topo/topology.h"

namespace chorus::synth {

__extension__ typedef __int128 i128;  // products of two int64 values

// num / den in lowest terms (checks that both fit in 64 bits).
Rational reduced(i128 num, i128 den);
Rational times(Rational a, Rational b);

// Link capacities as integers: bandwidth of link i = cap[i] x unit GB/s.
struct Scaled {
  std::vector<int64_t> cap;
  Rational unit;
};
// kInvalidArgument when a bandwidth needs more than 6 decimals.
Result<Scaled> scaleCapacities(const topo::Topology& t);

struct Ratio {
  int64_t p = 0, q = 1;   // min over S of B+(S) / |S ∩ ranks|, integer units
  std::vector<char> inS;  // the S that attains it (per node)
  int64_t cut = 0;        // its B+(S), integer units
  int rounds = 0, maxflows = 0;
};
// The allgather ratio of the topology (`reversed`: of its reverse, for
// reduce-scatter); kInvalidArgument naming a rank that cannot be reached.
Result<Ratio> shardRatio(const topo::Topology& t, const std::vector<int64_t>& cap, bool reversed);

}  // namespace chorus::synth
