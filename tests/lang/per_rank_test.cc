// Per-rank lowering (docs/scale.md): a rank's part of a registered program,
// compiled from the program's per-rank form, equals that rank's part of the
// whole program's compile, instruction for instruction (type, buffers,
// offsets, count, dependencies, threadblock peers and channels, chunk
// counts; source lines differ: the forms are different code). For every
// program with a per-rank form, at every rank count 1..64 it serves, in
// both call forms, with instances and the options it reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <chorus/lang.hpp>
#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "ir/ir.h"
#include "lang/registry.h"

namespace chorus {
namespace {

// The option sets each program is compared under at `n` ranks.
std::vector<lang::ProgramOptions> variants(const lang::ProgramEntry& e, int n) {
  auto reads = [&e](const char* o) {
    return std::find(e.options.begin(), e.options.end(), o) != e.options.end();
  };
  std::vector<lang::ProgramOptions> out;
  lang::ProgramOptions base;
  base.ranks = n;
  for (bool inplace : {false, true}) {
    lang::ProgramOptions o = base;
    o.inplace = inplace;
    out.push_back(o);
  }
  lang::ProgramOptions twice = base;
  twice.instances = 2;
  out.push_back(twice);
  if (n % 4 == 0) {  // blocked instances (scratch one instance after another)
    lang::ProgramOptions blocked = base;
    blocked.instances = 2;
    blocked.blockedInstances = true;
    out.push_back(blocked);
  }
  if (reads("chunk-factor") && reads("channels")) {
    lang::ProgramOptions piped = base;
    piped.chunkFactor = 3;
    piped.channels = 2;
    out.push_back(piped);
  }
  if (reads("channels") && !reads("chunk-factor") && n % 2 == 0 && n > 2) {
    lang::ProgramOptions parts = base;  // threestep_alltoall: a node pair's message in parts
    parts.channels = 2;
    parts.gpusPerNode = 2;
    out.push_back(parts);
  }
  if (reads("root") && n > 1) {
    lang::ProgramOptions rooted = base;
    rooted.root = n / 2 + (n > 2 ? 1 : 0);
    rooted.inplace = n % 2 == 1;
    out.push_back(rooted);
  }
  if (reads("gpus-per-node"))
    for (int g : {1, 2, 3, 4, 8})
      if (n % g == 0 && g < n)
        for (bool inplace : {false, true}) {
          lang::ProgramOptions nodes = base;
          nodes.gpusPerNode = g;
          nodes.inplace = inplace;
          out.push_back(nodes);
        }
  return out;
}

std::string describe(const lang::ProgramOptions& o) {
  return o.name + " ranks " + std::to_string(o.ranks) + (o.inplace ? " inplace" : "") +
         " instances " + std::to_string(o.instances) + (o.blockedInstances ? " blocked" : "") +
         " chunk-factor " + std::to_string(o.chunkFactor) + " channels " +
         std::to_string(o.channels) + " root " + std::to_string(o.root) + " gpus-per-node " +
         std::to_string(o.gpusPerNode);
}

// The first difference between two parts of rank `r`, or "".
std::string difference(const ir::Rank& whole, const ir::Rank& part) {
  if (whole == part) return "";
  if (whole.inputChunks != part.inputChunks || whole.outputChunks != part.outputChunks ||
      whole.scratchChunks != part.scratchChunks)
    return "chunk counts i/o/s " + std::to_string(whole.inputChunks) + "/" +
           std::to_string(whole.outputChunks) + "/" + std::to_string(whole.scratchChunks) + " vs " +
           std::to_string(part.inputChunks) + "/" + std::to_string(part.outputChunks) + "/" +
           std::to_string(part.scratchChunks);
  if (whole.tbs.size() != part.tbs.size())
    return std::to_string(whole.tbs.size()) + " threadblocks vs " + std::to_string(part.tbs.size());
  for (size_t t = 0; t < whole.tbs.size(); ++t) {
    const ir::Threadblock &a = whole.tbs[t], &b = part.tbs[t];
    const std::string at = "tb " + std::to_string(t) + ": ";
    if (a.sendPeer != b.sendPeer || a.recvPeer != b.recvPeer || a.channel != b.channel)
      return at + "peers/channel " + std::to_string(a.sendPeer) + "," + std::to_string(a.recvPeer) +
             "," + std::to_string(a.channel) + " vs " + std::to_string(b.sendPeer) + "," +
             std::to_string(b.recvPeer) + "," + std::to_string(b.channel);
    for (size_t s = 0; s < std::max(a.steps.size(), b.steps.size()); ++s) {
      if (s >= a.steps.size() || s >= b.steps.size())
        return at + std::to_string(a.steps.size()) + " steps vs " + std::to_string(b.steps.size());
      if (!(a.steps[s] == b.steps[s]))
        return at + "step " + std::to_string(s) + ": " +
               std::string(ir::stepTypeName(a.steps[s].type)) + " vs " +
               std::string(ir::stepTypeName(b.steps[s].type));
    }
  }
  return "differs";
}

std::string text(const DiagnosticList& d) {
  std::string s;
  for (const Diagnostic& x : d.items()) s += x.format() + "\n";
  return s;
}

class PerRank : public testing::TestWithParam<std::string> {};

TEST_P(PerRank, EveryRanksPartEqualsItsPartOfTheWholeCompile) {
  const lang::ProgramEntry* e = lang::findProgram(GetParam());
  ASSERT_NE(e, nullptr);
  int compared = 0;
  // Every count to 17, then non-powers of two, primes and powers up to 64:
  // a rank count of n compiles n parts of n ranks, so the large counts cost
  // the most and a sample of them is what the debug and sanitizer runs afford.
  std::vector<int> counts;
  for (int n = 1; n <= 17; ++n) counts.push_back(n);
  for (int n : {24, 31, 32, 48, 63, 64}) counts.push_back(n);
  for (int n : counts) {
    if (!e->ranksOk(n)) continue;
    for (const lang::ProgramOptions& given : variants(*e, n)) {
      lang::ProgramOptions o;
      std::string problem;
      if (!lang::programOptions(*e, given, &o, &problem)) continue;  // e.g. --gpus-per-node
      lang::Program whole(o);
      e->build(whole);
      compiler::Compiled w = compiler::compile(whole);
      if (!w.ok()) continue;  // the whole program refuses these options (tested in lang_test)
      ASSERT_EQ(w.algo.ranks.size(), static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        lang::ProgramOptions mine = o;
        mine.focus = r;
        compiler::Compiled part = compiler::compileRank(*e, mine);
        ASSERT_TRUE(part.ok()) << describe(o) << " rank " << r << ":\n" << text(part.diagnostics);
        ASSERT_TRUE(part.fromRankForm);
        ASSERT_EQ(part.algo.ranks.size(), 1u);
        const std::string diff =
            difference(w.algo.ranks[static_cast<size_t>(r)], part.algo.ranks.front());
        ASSERT_EQ(diff, "") << describe(o) << " rank " << r;
        EXPECT_EQ(part.algo.nchunksPerLoop, w.algo.nchunksPerLoop);
        EXPECT_LE(part.algo.nchannels, w.algo.nchannels);
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 16) << e->name;
}

// Reading a compact program file assembles it from the ranks' parts
// (compileByRanks): every registered program needs its per-rank form.
TEST(PerRankForms, EveryRegisteredProgramHasOne) {
  for (const lang::ProgramEntry& e : lang::programs())
    EXPECT_TRUE(static_cast<bool>(e.buildRank)) << e.name << " has no per-rank form";
}

std::vector<std::string> withRankForms() {
  std::vector<std::string> out;
  for (const lang::ProgramEntry& e : lang::programs())
    if (e.buildRank) out.push_back(e.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Programs, PerRank, testing::ValuesIn(withRankForms()),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

// The whole algorithm assembled from every rank's part (what reading a
// compact program file does) is the whole compile, header included.
TEST_P(PerRank, TheRanksPartsAssembleIntoTheWholeCompile) {
  const lang::ProgramEntry* e = lang::findProgram(GetParam());
  ASSERT_NE(e, nullptr);
  int compared = 0;
  for (int n : {1, 7, 8, 16, 24, 64}) {
    if (!e->ranksOk(n)) continue;
    for (const lang::ProgramOptions& given : variants(*e, n)) {
      lang::ProgramOptions o;
      std::string problem;
      if (!lang::programOptions(*e, given, &o, &problem)) continue;
      lang::Program whole(o);
      e->build(whole);
      compiler::Compiled w = compiler::compile(whole);
      if (!w.ok()) continue;
      compiler::Compiled assembled = compiler::compileByRanks(*e, o, 2);
      ASSERT_TRUE(assembled.ok()) << describe(o) << "\n" << text(assembled.diagnostics);
      EXPECT_TRUE(assembled.algo == w.algo) << describe(o);
      ++compared;
    }
  }
  EXPECT_GE(compared, 2) << e->name;
}

// A program without a per-rank form (every registered one has one: a
// user's entry may not) still gives a rank its part: compiled whole, the
// rest dropped. And a per-rank form that leaves out a depth is told so at
// its line.
TEST(PerRankFallback, AProgramWithoutAFormCompilesWholeAndKeepsItsRank) {
  lang::ProgramEntry e = *lang::findProgram("hierarchical_allreduce");
  e.buildRank = {};
  lang::ProgramOptions given{.ranks = 12, .gpusPerNode = 4};
  lang::ProgramOptions o;
  std::string problem;
  ASSERT_TRUE(lang::programOptions(e, given, &o, &problem)) << problem;
  lang::Program whole(o);
  e.build(whole);
  compiler::Compiled w = compiler::compile(whole);
  ASSERT_TRUE(w.ok());
  for (int r = 0; r < 12; ++r) {
    o.focus = r;
    compiler::Compiled part = compiler::compileRank(e, o);
    ASSERT_TRUE(part.ok()) << text(part.diagnostics);
    EXPECT_FALSE(part.fromRankForm);
    ASSERT_EQ(part.algo.ranks.size(), 1u);
    EXPECT_EQ(part.algo.ranks.front().id, r);
    EXPECT_EQ(part.algo.ngpus, 12);
    EXPECT_EQ(difference(w.algo.ranks[static_cast<size_t>(r)], part.algo.ranks.front()), "");
  }
}

TEST(PerRankForm, AnOperationWithoutADepthIsAProblemAtItsLine) {
  lang::ProgramOptions o{.name = "no_depth", .collective = "allgather", .ranks = 4};
  o.focus = 1;
  lang::Program p(o);
  p.chunk(0, lang::kInput, 0).copy(1, lang::kOutput, 0);  // line of the problem
  const int line = __LINE__ - 1;
  compiler::Compiled c = compiler::compile(p);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(text(c.diagnostics).find("per_rank_test.cc:" + std::to_string(line)), std::string::npos)
      << text(c.diagnostics);
  EXPECT_NE(text(c.diagnostics).find("Program::depth"), std::string::npos);
}

TEST(PerRankForm, AFocusOutsideTheRanksIsRefused) {
  lang::ProgramOptions o{.name = "far", .collective = "allgather", .ranks = 4};
  o.focus = 4;
  lang::Program p(o);
  ASSERT_EQ(p.problems().size(), 1u);
  EXPECT_NE(p.problems().front().message.find("focus 4 is not a rank of 4"), std::string::npos);
}

}  // namespace
}  // namespace chorus
