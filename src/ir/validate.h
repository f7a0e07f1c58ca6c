// Structural validation of the IR: every rule of docs/spec/IR.md sections 1, 4 and 6
// that can be checked on one rank at a time, each with its own diagnostic
// code. Later stages (matching, semantics) may assume an algorithm that
// passes validateStructure has well-formed ids, peers, offsets and
// dependencies.
#pragma once

#include "core/diagnostic.h"
#include "ir/ir.h"

namespace chorus::ir {

// Appends E1xx errors to `out`.
void validateStructure(const Algorithm& algo, DiagnosticList& out);

// Steps per threadblock the current MSCCL executor runs (W506; older ones
// ran 256).
inline constexpr int kMscclMaxSteps = 64;
// Messages in flight per connection in MSCCL's executor (NCCL_STEPS), and
// by default in Chorus's runtimes: the verifier's bounded-buffer deadlock
// check (E205) uses it.
inline constexpr int kMscclSlots = 8;

// MSCCL executor limits (docs/spec/IR.md section 6): W5xx warnings. Repeated findings
// of one code are folded into one diagnostic (the first) with a count.
void checkExecutorLimits(const Algorithm& algo, DiagnosticList& out);
bool isExecutorLimit(DiagCode code);

// A location for rank/tb/step (any may be -1), with the file position of
// the innermost element given.
Location siteLocation(const Algorithm& algo, int rank, int tb = -1, int step = -1);

}  // namespace chorus::ir
