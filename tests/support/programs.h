// `chorus gen` programs compiled and verified as the tests need them.
#pragma once

#include <memory>
#include <optional>

#include "lang/registry.h"
#include "runtime/exec/executor.h"
#include "verify/collective.h"

namespace chorus::testing {

struct BuiltProgram {
  std::shared_ptr<const runtime::VerifiedAlgorithm> va;  // null (and a test failure) if it fails
  std::optional<verify::PostCondition> spec;             // custom collectives' meaning
};

// Program `e` for `ranks` ranks in the given form, with `chorus gen`'s
// default options, compiled and verified.
BuiltProgram buildProgram(const lang::ProgramEntry& e, int ranks, bool inplace);

}  // namespace chorus::testing
