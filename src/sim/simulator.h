// The simulator (docs/simulator.md): runs an algorithm's IR on a topology
// at the level of transfers, with the runtime's semantics — every
// threadblock runs its steps in order once per slice iteration, waits for
// its dependencies, a receive for its message, a send for a free slot on
// its connection — and predicts the time:
//   - a send is a flow over the topology's route from sender to receiver;
//     flows share each link max-min fairly;
//   - every transfer pays a per-step latency (the protocol's, plus the
//     links' own) before its bytes move;
//   - LL carries 8 useful bytes in 16, LL128 120 in 128, Simple all 16;
//   - local copies and reductions cost bytes / the rank's memory bandwidth
//     (free when the topology gives none);
//   - a rank's send / receive caps (topo::Node) bound the sum of its flows
//     out / in, as links do.
// Results: time, algbw and busbw (nccl-tests' factors), bytes per link, the
// critical path, and optionally a Chrome trace (Perfetto opens it).
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "ir/ir.h"
#include "topo/topology.h"

namespace chorus::sim {

struct Options {
  size_t bytes = 1 << 20;  // nccl-tests' size: count = bytes / (element size x m)
  size_t elementSize = 4;
  bool inplace = false;   // which call form (an algorithm may serve only one)
  size_t sliceBytes = 0;  // per chunk per iteration; 0 = the protocol's (docs/spec/IR.md section 3)
  // Parts each step moves its slice in, forwarded part by part (a receive
  // that sends passes part 1 on while part 2 arrives); 0 = the protocol's:
  // Simple 2 (MSCCL's slices per chunk), LL and LL128 1.
  size_t partsPerSlice = 0;
  int slots = 8;  // messages (parts) in flight per connection (NCCL_STEPS)
  // Each threadblock run as this many instances, as the step engine and the
  // CUDA executor run them (runtime::FlatPlan::lower): instance i runs
  // slice iterations i, i + instances, ... over connections of its own,
  // with slices cut by ir::Slicing::splitForInstances.
  int instances = 1;
  // The slots' layout the algorithm runs on (an ir::Protocol), as the step
  // engine's protocol option and the C API's LL for small GPU calls:
  // latency, wire overhead and parts are that layout's, the slices stay the
  // algorithm's protocol's (as the executor cuts them). -1: the algorithm's.
  int protocol = -1;
  // Seconds every transfer step costs before its bytes move, besides the
  // links' latencies; < 0: the protocol's (LL 0.6 us, LL128 1.9 us,
  // Simple 3.4 us: NCCL's ring figures for NVLink).
  double stepLatency = -1;
  bool trace = false;  // fill Result::trace (Chrome trace JSON)
  bool criticalPath = true;
  bool recordOrder = false;  // fill Result::order
  bool stepTimes = false;    // fill Result::steps
  // Seconds per bucket of Result::timeline; 0: no timeline.
  double timelineStep = 0;
  // Rates are recomputed only for the routes a change can affect (those
  // sharing a link that can fill with a route whose flows changed); false
  // recomputes every route's rate over every link on each change, the
  // slow reference the tests hold the fast way to.
  bool incrementalRates = true;
  // Past it the simulation stops with kTimeout (a search's time budget).
  std::optional<std::chrono::steady_clock::time_point> deadline;
  // Once it reads true the simulation stops with kAborted (a search that
  // wants the core for another).
  const std::atomic<bool>* abort = nullptr;
};

struct PathStep {
  int rank = 0, tb = 0, step = 0, iteration = 0;
  ir::StepType type = ir::StepType::kNop;
  double start = 0, end = 0;  // seconds
  // What it waited for last: "start", "order" (its threadblock's previous
  // step), "dependency", "data" (its message), "slot" (a free slot).
  const char* waited = "start";
  // The step instance it waited for (none for "start"; for "data" and
  // "slot" the peer's send or receive).
  int byRank = -1, byTb = -1, byStep = -1, byIteration = -1;
};

struct Result {
  double time = 0;                 // seconds
  double algbw = 0, busbw = 0;     // GB/s
  size_t count = 0;                // elements per rank as nccl-tests counts them
  size_t iterations = 0;           // slice iterations per threadblock
  size_t transfers = 0;            // messages sent
  std::vector<double> linkBytes;   // per topology link, wire bytes carried
  std::vector<PathStep> critical;  // first to last
  // Options::stepTimes: every step's first slice iteration, rank by rank,
  // threadblock by threadblock (the algorithm's order), step by step.
  std::vector<PathStep> steps;
  std::string trace;  // Options::trace
  // Options::recordOrder: every step instance in the order it completed (a
  // send when its message has arrived, a receive when its work is done).
  // The runtime can run the algorithm in exactly this order
  // (runtime::PreparedCall::runInOrder): both follow docs/spec/IR.md's rules.
  std::vector<ir::StepInstance> order;
  // Options::timelineStep > 0: per topology link, the wire bytes it carried
  // in each bucket of that many seconds from the start (what a link's
  // utilization was over time: bytes / (bandwidth x step)).
  std::vector<std::vector<double>> timeline;
};

// kInvalidArgument when the algorithm's ranks exceed the topology's, a
// rank cannot reach a peer, or the size does not split into its chunks;
// kDeadlock when the ranks wait on each other (with `slots` slots).
chorus::Result<Result> simulate(const ir::Algorithm& algo, const topo::Topology& topo,
                                const Options& options);

// The algbw (GB/s) no simulation of `algo` with `options` can pass: every
// link, and every rank's send and receive cap, carries the wire bytes its
// routes put on it at its bandwidth at most, so the busiest bounds the
// time from below. Without running anything (steps, latencies and memory
// are left out), so a candidate that cannot beat one simulated already
// need not be simulated. Infinite where nothing crosses a link; the errors
// are simulate()'s for a bad size or an unreachable peer.
chorus::Result<double> linkBound(const ir::Algorithm& algo, const topo::Topology& topo,
                                 const Options& options);

// The fastest of `algos` with `options`, simulating as few as it can: by
// their linkBound, highest first (the first alone, then `threads` at a
// time), until the next one's bound is below the fastest simulated so far.
// Each simulation stops after `each` or at options.deadline, and none
// starts past the deadline once one has served. Returns every algorithm's
// algbw: 0 where it was not simulated (it could not have been the
// fastest), could not run (no bound), or stopped.
std::vector<double> fastestByBound(const std::vector<const ir::Algorithm*>& algos,
                                   const topo::Topology& topo, const Options& options, int threads,
                                   std::chrono::steady_clock::duration each);

}  // namespace chorus::sim
