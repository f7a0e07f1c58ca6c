// Symbolic execution of chunks (docs/spec/IR.md section 5). Every input chunk starts as
// the symbol in_r[k]; output and scratch chunks start as "garbage"; a
// reduction is the multiset union of its operands' contributions. Running the
// steps in a happens-before order and comparing every output chunk with the
// collective's post-condition proves the algorithm for all call sizes and
// slice sizes: slicing and batching move the same element range of every
// chunk together, so each element position evolves like its chunk.
//
// Race detection lives here too, since it works on the same chunk slots.
#pragma once

#include <map>
#include <optional>

#include "core/diagnostic.h"
#include "verify/collective.h"
#include "verify/graph.h"

namespace chorus::verify {

struct SemanticsResult {
  bool correct = false;
  int root = -1;  // the root that satisfies a rooted collective, else -1
};

// Checks one call form. Appends E301..E306 (prefixed with the form) to `diags`.
// Requires a fully matched, acyclic graph.
SemanticsResult checkSemantics(const StepGraph& g, const CallModel& model, DiagnosticList& diags);

// Reports E401 for each pair of steps on one rank, unordered by
// happens-before, that touch the same chunk slot with at least one write.
// Computes the graph's clocks for the threadblocks involved; returns false
// (checking nothing) when they would be too large. Requires g.acyclic().
bool checkRaces(StepGraph& g, const CallModel& model, DiagnosticList& diags);

}  // namespace chorus::verify
