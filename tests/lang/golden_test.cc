// Golden files of the compiler's printed forms: a change in what a pass
// produces for a known program shows up as a diff against
// tests/data/lang/. Regenerate with the command in each file's name, e.g.
//   chorus gen ring_allreduce --ranks 3 --print-after=fuse >
//   tests/data/lang/ring_allreduce_3.fuse.txt
// and review the diff: it is the compiler's behaviour changing.
#include <gtest/gtest.h>

#include <chorus/gen.hpp>

#include "lang/registry.h"
#include "tests/support/files.h"

namespace chorus {
namespace {

struct Golden {
  const char* program;
  int ranks;
  bool inplace;
  const char* pass;
  const char* file;
};

TEST(LangGolden, PrintedPassesMatchTheFiles) {
  const Golden cases[] = {
      {"ring_allreduce", 3, false, "fuse", "ring_allreduce_3.fuse.txt"},
      {"halving_doubling_allreduce", 4, false, "dependencies",
       "halving_doubling_allreduce_4.dependencies.txt"},
      {"allpairs_alltoall", 3, true, "emit", "allpairs_alltoall_3_inplace.xml"},
  };
  for (const Golden& g : cases) {
    SCOPED_TRACE(g.file);
    const lang::ProgramEntry* e = lang::findProgram(g.program);
    ASSERT_NE(e, nullptr);
    lang::ProgramOptions options{
        .name = g.program, .collective = e->collective, .ranks = g.ranks, .inplace = g.inplace};
    options.chunkFactor = e->chunkFactor(options);
    lang::Program p(options);
    e->build(p);
    GenerateOptions o;
    o.printAfter = g.pass;
    Generated out = generate(p, o);
    ASSERT_TRUE(out.ok) << out.diagnostics;
    EXPECT_EQ(out.printed,
              testing::readText(std::string(CHORUS_SOURCE_DIR) + "/tests/data/lang/" + g.file));
  }
}

}  // namespace
}  // namespace chorus
