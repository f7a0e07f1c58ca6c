// The bandwidth-optimal time of a collective on a topology
// (docs/synthesis.md), in the bandwidth-only model: links move their
// bandwidth, switches forward without replicating or reducing, latency is
// ignored. For allgather on N ranks with output M per rank,
//   T* = (M/N) * max over node sets S holding some but not all ranks of
//        |S ∩ ranks| / B+(S),
// B+(S) the capacity of the links leaving S (every shard held in S must
// leave it at least once); algbw* = M / T*. Reduce-scatter is allgather on
// the reversed graph; allreduce is reduce-scatter then allgather (the
// optimum among such algorithms); broadcast and reduce from a root are the
// minimum cut between the root and another rank.
//
// Computed exactly: capacities are scaled to integers, the ratio is found
// by Dinkelbach's iteration with one maximum flow per rank per round (at
// most N rounds, usually two or three), and the result is a rational.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/types.h"
#include "topo/topology.h"

namespace chorus::synth {

// A non-negative rational num / den in lowest terms.
struct Rational {
  int64_t num = 0, den = 1;
  double value() const { return static_cast<double>(num) / static_cast<double>(den); }
  std::string str() const;  // "1040/3", or "300" when den is 1
};

struct Bound {
  CollectiveKind collective = CollectiveKind::kAllGather;
  Rational algbw;    // GB/s (nccl-tests' algbw: bytes / time)
  double busbw = 0;  // GB/s (nccl-tests' factor for the collective)
  // The binding cut: the nodes of S (topology node ids). For allgather the
  // shards of S's ranks leave S through `cutCapacity` GB/s; for
  // reduce-scatter the shards of the ranks outside S enter through it; for
  // broadcast / reduce the root is on one side and `cutRanks` ranks on the
  // other. Allreduce reports its allgather cut.
  std::vector<int> cut;
  int cutRanks = 0;      // ranks in S
  Rational cutCapacity;  // GB/s
  int rounds = 0;        // Dinkelbach rounds
  int maxflows = 0;      // maximum flows computed
};

// kInvalidArgument for a topology with fewer than two ranks, a root out of
// range, a rank that cannot be reached, capacities that do not scale to
// integers (more than 9 significant decimal digits), or a collective with
// no bound here (send/recv, custom; alltoall's is allToAllBound in
// alltoall.h).
Result<Bound> optimalBound(const topo::Topology& topo, CollectiveKind collective, int root = 0);

}  // namespace chorus::synth
