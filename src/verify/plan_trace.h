// Inside the plan verifier (not a public header): the data operations of
// a verified run of an MSCCL++ plan, in the order the run took them, for
// what is built on the proof (plan_lowering.cc: the plan as a two-sided
// Algorithm).
#pragma once

#include <string>
#include <vector>

#include "ir/mscclpp_plan.h"
#include "verify/plan_verifier.h"

namespace chorus::verify::plan_check {

// A rank's memory as the verifier models it, in units of buffer_alignment
// bytes: input, output, scratch, and the packets kept in scratch (at twice
// their data offset in MSCCL++; apart here).
enum Phys { kIn = 0, kOut = 1, kScratch = 2, kPackets = 3 };

// Where a buffer reference lands: rank, physical buffer, first unit, units.
struct Target {
  int rank = 0, buf = 0;
  size_t first = 0, len = 0;
  ir::mscclpp::BufferType type = ir::mscclpp::BufferType::kInput;  // as named (for messages)
};

// One data operation as it ran: the units each src/dst entry touched (a
// switch entry: one target per member rank), and for each entry the link
// its traffic with another rank takes (3k + type: the k-th channel of that
// type between the two ranks; type 0 memory, 1 port, 2 switch).
struct TracedOp {
  int rank = 0, tb = 0;  // the threadblock's id in its rank
  const ir::mscclpp::Op* op = nullptr;
  int index = 0;  // the op's flattened position (diagnostics)
  std::vector<std::vector<Target>> in, out;
  std::vector<int> inLink, outLink;
  bool paired = false;  // src[i] -> dst[i] (put, get, ppkt)
  bool sums = false;    // the sources are reduced (else the first is taken)
};

class PlanTrace {
 public:
  virtual ~PlanTrace() = default;
  // Before the first op: the run's units per chunk.
  virtual void begin(size_t unitsPerChunk) = 0;
  virtual void dataOp(const TracedOp& op) = 0;
  // After each round of the run (every threadblock that could ran one op).
  virtual void endRound() {}
};

// verifyPlan, telling `trace` every data operation as the run takes it
// (the order is one the plan's synchronisation allows).
PlanReport tracePlan(const ir::mscclpp::Plan& plan, const std::string& file,
                     const PlanOptions& options, PlanTrace* trace);

}  // namespace chorus::verify::plan_check
