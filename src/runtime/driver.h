// Drivers run the executors of all ranks of one call. The deterministic
// driver runs every rank in the calling thread in a seeded order (the order
// tests use to explore interleavings reproducibly) and reports a deadlock,
// with what each threadblock waits for, when a full sweep makes no progress.
// The threaded driver runs each rank on its own thread; a blocked rank
// sleeps on a doorbell that its peers ring, so it never spins.
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

struct ThreadedOptions {
  size_t sliceBytes = 0;       // 0 = the protocol's default
  int slots = 8;               // messages in flight per connection
  int yieldsBeforeSleep = 16;  // yields of a blocked rank before it sleeps
  int watchdogMs = 50;         // deadlock check period (two quiet checks = deadlock)
};

// Runs one call with one thread per rank; returns when all ranks finish.
// Errors as runDeterministic.
Status runThreaded(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                   const ThreadedOptions& options = {});

}  // namespace chorus::runtime
