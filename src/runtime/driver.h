// Drivers run the executors of all ranks of one call. The deterministic
// driver runs every rank in the calling thread in a seeded order (the order
// tests use to explore interleavings reproducibly) and reports a deadlock,
// with what each threadblock waits for, when a full sweep makes no progress.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "runtime/executor.h"

namespace chorus::runtime {

struct DeterministicOptions {
  enum class Order { kRoundRobin, kReverse, kRandom };
  Order order = Order::kRoundRobin;
  uint64_t seed = 1;      // for kRandom: a new permutation of ranks every sweep
  size_t sliceBytes = 0;  // 0 = the protocol's default (IR.md section 3)
  int slots = 8;          // messages in flight per connection
};

// Runs one call: calls[r] is rank r's arguments. Errors: kInvalidArgument
// (see planCall), kDeadlock (with each rank's waiting threadblocks).
Status runDeterministic(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                        const DeterministicOptions& options = {});

}  // namespace chorus::runtime
