// Inside chorus::generate (include/chorus/gen.hpp), for tests that drive the
// compiler themselves.
#pragma once

#include <chorus/gen.hpp>
#include <chorus/lang.hpp>
#include <optional>

#include "compiler/compiler.h"
#include "verify/collective.h"

namespace chorus {

// A custom collective's meaning for the verifier and the runtime check: the
// compiled program's postconditions (all instances); nullopt for the
// collectives the verifier knows.
std::optional<verify::PostCondition> postconditionOf(const lang::Program& program,
                                                     const compiler::Compiled& compiled);

// What chorus::generate does, with the findings as diagnostics (for front
// ends that hand them on as objects: the Python package). `diagnostics`:
// the compiler's, then the verifier's errors and warnings; ok when neither
// found an error (with options.verify, the algorithm is proven).
struct CheckedProgram {
  compiler::Compiled compiled;
  std::optional<verify::PostCondition> spec;
  DiagnosticList diagnostics;
  bool ok = false;
};
CheckedProgram compileAndVerify(const lang::Program& program, const GenerateOptions& options = {});

}  // namespace chorus
