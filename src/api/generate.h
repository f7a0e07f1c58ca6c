// Inside chorus::generate (include/chorus/gen.hpp), for tests that drive the
// compiler themselves.
#pragma once

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

}  // namespace chorus
