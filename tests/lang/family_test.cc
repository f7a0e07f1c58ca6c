// Program families (docs/scale.md): a registered program is a family of
// algorithms, one per rank count. The verifier proves one member at a time;
// CI proves every program at a sample of rank counts, non-powers of two and
// primes included, in both call forms (and on nodes of 4 for the programs
// that know nodes). Per-rank forms are checked against these whole
// compiles in per_rank_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/lang.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/generate.h"
#include "compiler/compiler.h"
#include "lang/registry.h"
#include "verify/verifier.h"

namespace chorus {
namespace {

const int kSample[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 24, 31, 32, 48, 63, 64, 96, 100, 128};

class Family : public testing::TestWithParam<std::string> {};

TEST_P(Family, IsProvenAtEverySampledRankCount) {
  const lang::ProgramEntry* e = lang::findProgram(GetParam());
  ASSERT_NE(e, nullptr);
  const bool nodes =
      std::find(e->options.begin(), e->options.end(), "gpus-per-node") != e->options.end();
  int proven = 0;
  for (int n : kSample) {
    if (!e->ranksOk(n)) continue;
    for (bool inplace : {false, true})
      for (int g : {0, 4}) {
        if (g != 0 && (!nodes || n % g != 0 || n == g)) continue;
        lang::ProgramOptions given{.ranks = n, .inplace = inplace, .gpusPerNode = g};
        lang::ProgramOptions o;
        std::string problem;
        if (!lang::programOptions(*e, given, &o, &problem)) continue;
        lang::Program p(o);
        e->build(p);
        compiler::Compiled c = compiler::compile(p);
        ASSERT_TRUE(c.ok()) << e->name << " at " << n << " ranks";
        // A custom collective (alltonext) is proven against its own postconditions.
        std::optional<verify::PostCondition> spec = postconditionOf(p, c);
        verify::Options vo;
        vo.spec = spec ? &*spec : nullptr;
        verify::Report r = verify::verifyAlgorithm(c.algo, vo);
        ASSERT_TRUE(r.correct()) << e->name << " at " << n << " ranks"
                                 << (inplace ? " in place" : "") << " gpus-per-node " << g;
        ++proven;
      }
  }
  EXPECT_GE(proven, 2) << e->name;
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const lang::ProgramEntry& e : lang::programs()) out.push_back(e.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Programs, Family, testing::ValuesIn(names()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace chorus
