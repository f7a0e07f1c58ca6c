#include "tests/support/programs.h"

#include <gtest/gtest.h>

#include "api/generate.h"
#include "compiler/compiler.h"

namespace chorus::testing {

BuiltProgram buildProgram(const lang::ProgramEntry& e, int ranks, bool inplace) {
  lang::ProgramOptions o;
  o.name = e.name;
  o.collective = e.collective;
  o.ranks = ranks;
  o.inplace = inplace;
  o.chunkFactor *= e.chunkFactor(o);
  lang::Program p(o);
  e.build(p);
  compiler::Compiled c = compiler::compile(p);
  BuiltProgram b;
  EXPECT_TRUE(c.ok()) << e.name;
  if (!c.ok()) return b;
  b.spec = postconditionOf(p, c);
  auto va = runtime::VerifiedAlgorithm::make(std::move(c.algo));
  EXPECT_TRUE(va.isOk()) << va.status().toString();
  if (va.isOk()) b.va = va.value();
  return b;
}

}  // namespace chorus::testing
