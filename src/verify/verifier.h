// The verifier: an independent oracle that decides whether an algorithm
// implements its collective. It depends on core and ir only (no compiler
// code), so it can judge the compiler's output as well as anyone's file.
//
// Stages, each gated on the previous one being clean of errors:
//   1. structure (docs/spec/IR.md 1, 4, 6)          ir::validateStructure, E1xx
//      executor limits                     ir::checkExecutorLimits, W5xx
//   2. matching and deadlock              StepGraph, E2xx
//   3. races, per call form               checkRaces, E401
//   4. semantics, per call form           checkSemantics, E3xx
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"
#include "verify/collective.h"

namespace chorus::verify {

struct Options {
  // Treat MSCCL executor limits (W5xx) as errors.
  bool targetMscclExecutor = false;
  // Post-condition for a custom collective (not owned).
  const PostCondition* spec = nullptr;
};

struct FormVerdict {
  bool inplace = false;
  bool proven = false;  // semantics proven correct for this form
};

struct Report {
  DiagnosticList diagnostics;
  std::vector<FormVerdict> forms;  // the call forms the algorithm claims
  bool semanticsChecked = false;   // false: custom collective without a spec
  int root = -1;                   // inferred root of a rooted collective

  bool correct() const { return !diagnostics.hasErrors(); }
};

// Verifies `algo`. Never aborts on bad input; all findings are diagnostics,
// sorted in a deterministic order.
Report verifyAlgorithm(const ir::Algorithm& algo, const Options& options = {});

}  // namespace chorus::verify
