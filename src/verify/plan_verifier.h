// Proves an MSCCL++ execution plan (ir/mscclpp_plan.h) as the verifier
// proves an MSCCL algorithm, with a one-sided semantics (issue 42):
//
//   1. structure: ids, channels, remote buffers and switch channels resolve;
//      a remote buffer belongs to the channel's peer and lists the op's
//      channel type; ranges lie inside the buffers; chunk counts fit the
//      collective (E703); MSCCL++'s executor limits (W706) and what it
//      ignores (W707);
//   2. execution: every rank's threadblocks run op by op, symbolically (each
//      byte range holds the set of input elements summed into it), in any
//      order their synchronisation allows: a wait takes the k-th signal of
//      its paired channel (the k-th channel r->p of a type pairs with the
//      k-th p->r), a barrier its threadblocks, a semaphore its releases, a
//      packet read the packets' writes. Nothing left able to move while ops
//      remain is a deadlock, reported per stuck op (E704);
//   3. races: vector clocks over those edges; within a threadblock only a
//      nop or a barrier orders one op's threads after another's, and a
//      wait's edge reaches the block at its next nop. Two accesses to the
//      same bytes, one a write, with no order between them are a race
//      (E705); packets are ordered by their flags, for their own bytes only;
//   4. the collective's post-condition on every output byte (E301-E304),
//      for allreduce, allgather, reducescatter and alltoall (in place: the
//      input lies in the output as NCCL lays it out); other collectives
//      are run and checked for 1-3 only (N308).
//
// Locations are rank / threadblock / op index (the op's position in the
// threadblock's list, a pipeline's inner ops numbered after it as the
// parser flattens them). The plan is run at one chunk size, in units of its
// buffer_alignment chosen so that every threadblock group slices evenly
// and pipelines iterate; one launch (use_double_scratch_buffer and
// reuse_resources only matter across launches or past 64 MiB).
#pragma once

#include <optional>
#include <string>

#include "core/diagnostic.h"
#include "ir/mscclpp_plan.h"
#include "ir/xml_reader.h"

namespace chorus::verify {

struct PlanOptions {
  // Alignment units per chunk; 0: the smallest that slices every group
  // evenly, at least leastUnitsPerChunk (rounded up to a power of two).
  int unitsPerChunk = 0;
  int leastUnitsPerChunk = 8;
};

struct PlanReport {
  DiagnosticList diagnostics;
  bool semanticsChecked = false;  // false: a collective without a post-condition
  int unitsPerChunk = 0;          // what it ran at
  bool correct() const { return !diagnostics.hasErrors(); }
};

PlanReport verifyPlan(const ir::mscclpp::Plan& plan, const std::string& file,
                      const PlanOptions& options = {});

// A plan as a two-sided Algorithm that runs, simulates and is served as
// any other (plan_lowering.cc): proven first (the plan's findings are the
// result's diagnostics; any error and there is no algorithm), then each
// data operation of the proven run becomes steps (sends and receives for
// what crosses ranks, on the channel it used; copies and reduces in the
// threadblock's own), ordered by the data they touch. One chunk of the
// plan is unitsPerChunk chunks of the algorithm (the fewest that slice
// every threadblock group evenly). The result is proven again; E708 when
// it cannot be built (data moved between two other ranks, overlapping
// operands).
struct PlanLowering {
  std::optional<ir::Algorithm> algorithm;
  DiagnosticList diagnostics;
  int unitsPerChunk = 0;
};
PlanLowering lowerPlan(const ir::mscclpp::Plan& plan, const std::string& file);

// For ir::ReadOptions::plans: readers that meet a plan lower it.
const ir::PlanFiles& planFiles();

}  // namespace chorus::verify
