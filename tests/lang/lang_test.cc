// The Chorus language and its compiler: every registered program compiles,
// is proven by the (independent) verifier and runs with real data, at
// several rank counts, instances, both call forms and two protocols; misuse
// is reported at the program's line; the passes do what they promise
// (fusion, store-less reductions, threadblock pairing, dependencies).
#include <gtest/gtest.h>

#include <chorus/gen.hpp>
#include <chorus/lang.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "api/generate.h"
#include "compiler/compiler.h"
#include "core/io.h"
#include "ir/validate.h"
#include "lang/registry.h"
#include "runtime/exec/check.h"
#include "tests/support/collective_check.h"
#include "verify/verifier.h"

namespace chorus {
namespace {

using lang::Chunk;
using lang::kInput;
using lang::kOutput;
using lang::Program;

// A compiled program proven by the verifier (against its postconditions
// when the collective is custom), ready to run.
struct Built {
  std::shared_ptr<const runtime::VerifiedAlgorithm> va;
  std::optional<verify::PostCondition> spec;
};

Built compileAndVerify(const Program& p) {
  compiler::Compiled c = compiler::compile(p);
  for (const Diagnostic& d : c.diagnostics.items()) ADD_FAILURE() << d.format();
  if (!c.ok()) return {};
  Built b;
  b.spec = postconditionOf(p, c);
  verify::Options vo;
  vo.spec = b.spec ? &*b.spec : nullptr;
  verify::Report rep = verify::verifyAlgorithm(c.algo, vo);
  for (const Diagnostic& d : rep.diagnostics.items())
    if (d.severity == Severity::kError) ADD_FAILURE() << d.format();
  EXPECT_TRUE(rep.semanticsChecked);
  auto va = runtime::VerifiedAlgorithm::make(std::move(c.algo));
  EXPECT_TRUE(va.isOk()) << va.status().message();
  if (va.isOk() && rep.correct()) b.va = va.value();
  return b;
}

void runBothWays(const Built& b, bool inplace, uint64_t seed) {
  for (size_t slice : {size_t{0}, size_t{4}}) {
    testing::Case c;
    c.count = testing::unitCount(b.va->algo()) * 3;
    c.inplace = inplace;
    c.type = DataType::kInt32;
    c.options.sliceBytes = slice;
    c.options.order = runtime::DeterministicOptions::Order::kRandom;
    c.options.seed = seed;
    c.spec = b.spec ? &*b.spec : nullptr;
    testing::runAndCheck(*b.va, c);
  }
}

// The options `chorus gen` gives a registered program (o.chunkFactor: the
// --chunk-factor multiplier).
lang::ProgramOptions optionsFor(const lang::ProgramEntry& e, lang::ProgramOptions o) {
  o.name = e.name;
  o.collective = e.collective;
  o.chunkFactor *= e.chunkFactor(o);
  return o;
}

TEST(Lang, EveryProgramCompilesVerifiesAndRuns) {
  for (const lang::ProgramEntry& e : lang::programs())
    for (int n : {1, 2, 3, 4, 5, 8}) {
      if (!e.ranksOk(n)) continue;
      for (auto [instances, blocked] : {std::pair{1, false}, {2, false}, {2, true}})
        for (bool inplace : {false, true})
          for (const char* protocol : {"Simple", "LL"}) {
            SCOPED_TRACE(e.name + " n=" + std::to_string(n) +
                         " instances=" + std::to_string(instances) + (blocked ? " blocked" : "") +
                         (inplace ? " in place " : " ") + protocol);
            Program p(optionsFor(e, {.ranks = n,
                                     .inplace = inplace,
                                     .protocol = protocol,
                                     .instances = instances,
                                     .blockedInstances = blocked}));
            e.build(p);
            Built b = compileAndVerify(p);
            ASSERT_NE(b.va, nullptr);
            EXPECT_EQ(b.va->algo().inplace, inplace);
            EXPECT_EQ(ir::protocolName(b.va->algo().protocol), protocol);
            runBothWays(b, inplace, static_cast<uint64_t>(n * 7 + instances));
          }
    }
}

// Hierarchical allreduce on nodes x GPUs: intra-node rings and the
// inter-node ring (channel 1) together compute the sum; two-step alltoall
// on the same shapes.
TEST(Lang, HierarchicalAllReduceOnNodesOfGpus) {
  const lang::ProgramEntry* e = lang::findProgram("hierarchical_allreduce");
  ASSERT_NE(e, nullptr);
  for (auto [nodes, gpus] : {std::pair{2, 2}, {2, 3}, {3, 2}, {4, 2}, {2, 4}, {3, 1}})
    for (int instances : {1, 2})
      for (bool inplace : {false, true}) {
        int n = nodes * gpus;
        SCOPED_TRACE(std::to_string(nodes) + "x" + std::to_string(gpus) + " instances " +
                     std::to_string(instances) + (inplace ? " in place" : ""));
        Program p(optionsFor(
            *e, {.ranks = n, .inplace = inplace, .instances = instances, .gpusPerNode = gpus}));
        e->build(p);
        Built b = compileAndVerify(p);
        ASSERT_NE(b.va, nullptr);
        EXPECT_EQ(b.va->algo().nchannels, nodes > 1 ? 2 * instances : instances);
        runBothWays(b, inplace, static_cast<uint64_t>(n));
      }
  for (const char* name : {"twostep_alltoall", "threestep_alltoall"}) {
    const lang::ProgramEntry* a2a = lang::findProgram(name);
    ASSERT_NE(a2a, nullptr);
    for (auto [nodes, gpus] : {std::pair{2, 2}, {2, 3}, {3, 2}, {1, 4}, {4, 1}, {3, 3}})
      for (bool inplace : {false, true}) {
        SCOPED_TRACE(std::string(name) + " " + std::to_string(nodes) + "x" + std::to_string(gpus) +
                     (inplace ? " in place" : ""));
        Program p(optionsFor(
            *a2a,
            {.ranks = nodes * gpus, .inplace = inplace, .instances = 2, .gpusPerNode = gpus}));
        a2a->build(p);
        Built b = compileAndVerify(p);
        ASSERT_NE(b.va, nullptr);
        runBothWays(b, inplace, static_cast<uint64_t>(nodes * 10 + gpus));
      }
  }
  Program bad(
      {.name = "h", .collective = "allreduce", .ranks = 6, .chunkFactor = 6, .gpusPerNode = 4});
  e->build(bad);
  ASSERT_EQ(bad.problems().size(), 1u);
  EXPECT_NE(bad.problems()[0].message.find("--gpus-per-node 4 does not divide 6 ranks"),
            std::string::npos);
}

// The topology programs of MSCCLang's paper on more than one node, and the
// ring programs' channels, pieces (pipelining) and roots.
TEST(Lang, ProgramOptionsAndNodeShapes) {
  struct Case {
    const char* name;
    lang::ProgramOptions options;
  };
  std::vector<Case> cases;
  for (int n : {16, 24}) cases.push_back({"dgx1_allreduce", {.ranks = n}});
  for (const char* ring : {"ring_allreduce", "ring_allgather", "ring_reducescatter"})
    for (int channels : {1, 2, 3})
      for (int pieces : {1, 2, 3})
        cases.push_back({ring, {.ranks = 4, .chunkFactor = pieces, .channels = channels}});
  for (const char* rooted : {"ring_broadcast", "ring_reduce"})
    for (int root = 0; root < 5; ++root)
      cases.push_back({rooted, {.ranks = 5, .chunkFactor = 1 + root % 3, .root = root}});
  for (const char* rooted : {"binomial_gather", "binomial_scatter"})
    for (int n : {5, 6})
      for (int root = 0; root < n; ++root) cases.push_back({rooted, {.ranks = n, .root = root}});
  for (const char* name : {"alltonext_forward", "alltonext_backward"})
    for (auto [nodes, gpus] : {std::pair{1, 4}, {2, 1}, {2, 3}, {3, 2}, {4, 2}})
      cases.push_back({name, {.ranks = nodes * gpus, .gpusPerNode = gpus}});
  cases.push_back({"threestep_alltoall", {.ranks = 8, .gpusPerNode = 2, .channels = 2}});
  for (const Case& k : cases)
    for (int instances : {1, 2})
      for (bool inplace : {false, true}) {
        lang::ProgramOptions o = k.options;
        o.instances = instances;
        o.inplace = inplace;
        SCOPED_TRACE(std::string(k.name) + " ranks " + std::to_string(o.ranks) + " pieces " +
                     std::to_string(o.chunkFactor) + " channels " + std::to_string(o.channels) +
                     " root " + std::to_string(o.root) + " gpus " + std::to_string(o.gpusPerNode) +
                     " instances " + std::to_string(instances) + (inplace ? " in place" : ""));
        const lang::ProgramEntry* e = lang::findProgram(k.name);
        ASSERT_NE(e, nullptr);
        Program p(optionsFor(*e, o));
        e->build(p);
        Built b = compileAndVerify(p);
        ASSERT_NE(b.va, nullptr);
        if (o.channels > 1) {
          EXPECT_EQ(b.va->algo().nchannels, o.channels * instances);
        }
        runBothWays(b, inplace, static_cast<uint64_t>(o.ranks + instances));
      }
}

// A custom collective written by hand: rank r's output holds the sum of its
// left neighbour's chunk 0 and its own chunk 1; rank 2 holds no chunk 0.
// The verifier proves it, the runtime computes it, and a wrong claim about
// the result is caught by the verifier.
TEST(Lang, CustomCollectiveWithPreAndPostconditions) {
  for (bool wrongClaim : {false, true}) {
    Program p(
        {.name = "neighbour_sum", .collective = "neighboursum", .ranks = 3, .chunkFactor = 2});
    p.precondition({{0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 1}});
    for (int r = 0; r < 3; ++r) {
      int left = (r + 2) % 3;
      if (left == 2) continue;  // nothing to send
      p.chunk(left, kInput, 0)
          .copy(r, p.scratch("in"), 0)
          .reduce(p.chunk(r, kInput, 1), kOutput, 0);
      p.postcondition(r, 0, {{left, 0}, {r, wrongClaim ? 0 : 1}});
    }
    compiler::Compiled c = compiler::compile(p);
    ASSERT_TRUE(c.ok());
    std::optional<verify::PostCondition> spec = postconditionOf(p, c);
    ASSERT_TRUE(spec.has_value());
    EXPECT_EQ(spec->entries.size(), 2u);
    verify::Options vo;
    vo.spec = &*spec;
    verify::Report rep = verify::verifyAlgorithm(c.algo, vo);
    EXPECT_EQ(rep.correct(), !wrongClaim) << rep.diagnostics.size();
    // The runtime's check of real data agrees (run regardless of the proof).
    auto va = runtime::VerifiedAlgorithm::make(c.algo);
    ASSERT_TRUE(va.isOk()) << va.status().message();
    auto data = runtime::CollectiveData::make(*va.value(), 2 * 5, DataType::kInt32, ReduceOp::kSum,
                                              false, &*spec);
    ASSERT_TRUE(data.isOk()) << data.status().message();
    ASSERT_TRUE(runtime::runDeterministic(*va.value(), data.value().calls(), {}).isOk());
    EXPECT_EQ(data.value().countWrong() > 0, wrongClaim);
  }
  Program p({.name = "x", .collective = "mine", .ranks = 2});
  p.precondition({{0, 0}});
  int withheld = __LINE__ + 1;
  p.chunk(1, kInput, 0);
  p.chunk(0, kInput, 0).copy(1, kOutput, 0);
  int late = __LINE__ + 1;
  p.precondition({});
  int outside = __LINE__ + 1;
  p.postcondition(1, 0, {{0, 1}});
  ASSERT_EQ(p.problems().size(), 3u);
  EXPECT_EQ(p.problems()[0].line, withheld);
  EXPECT_EQ(p.problems()[1].line, late);
  EXPECT_EQ(p.problems()[2].line, outside);
  Program known({.name = "x", .collective = "allreduce", .ranks = 2});
  known.postcondition(0, 0, {{0, 0}});
  ASSERT_EQ(known.problems().size(), 1u);
  EXPECT_NE(known.problems()[0].message.find("for custom collectives"), std::string::npos);
}

// A front end that knows better than std::source_location (the Python
// package) names the file and line itself; problems and the compiler's
// diagnostics point there, and the program keeps the file's text.
TEST(Lang, FrontEndsNameTheirOwnSourceLines) {
  std::string file = "ring.py";
  Program p({.name = "x", .collective = "allgather", .ranks = 2}, lang::Where(file.c_str(), 3));
  Chunk c = p.chunk(0, kInput, 0, 1, lang::Where(file.c_str(), 7, 5));
  c.copy(0, kOutput, 0, {}, lang::Where(file.c_str(), 8));
  p.chunk(1, kOutput, 0, 1, lang::Where(file.c_str(), 9));  // nothing there yet
  file = "overwritten";
  EXPECT_EQ(p.line(), 3);
  EXPECT_EQ(p.file(), "ring.py");
  ASSERT_EQ(p.problems().size(), 1u);
  EXPECT_EQ(p.problems()[0].file, "ring.py");
  EXPECT_EQ(p.problems()[0].line, 9);
  ASSERT_EQ(p.operations().size(), 1u);
  EXPECT_STREQ(p.operations()[0].file, "ring.py");
  EXPECT_EQ(p.operations()[0].line, 8);
  // The compiler's diagnostic for the unfinished program names a line of it.
  Program q({.name = "y", .collective = "allgather", .ranks = 2}, lang::Where("ag.py", 1));
  q.chunk(0, kInput, 0, 1, lang::Where("ag.py", 2))
      .copy(0, kOutput, 0, {}, lang::Where("ag.py", 2));
  Generated g = generate(q);
  EXPECT_FALSE(g.ok);
  EXPECT_NE(g.diagnostics.find("ag.py:"), std::string::npos) << g.diagnostics;
}

// The JSON a custom program's postconditions are written as reads back the same.
TEST(Lang, PostconditionJsonRoundTrips) {
  const lang::ProgramEntry* e = lang::findProgram("alltonext_forward");
  ASSERT_NE(e, nullptr);
  Program p(optionsFor(*e, {.ranks = 4, .instances = 2, .gpusPerNode = 2}));
  e->build(p);
  compiler::Compiled c = compiler::compile(p);
  ASSERT_TRUE(c.ok());
  std::optional<verify::PostCondition> spec = postconditionOf(p, c);
  ASSERT_TRUE(spec.has_value());
  EXPECT_EQ(spec->inputChunks, 4);  // 2 chunks x 2 instances
  EXPECT_EQ(spec->entries.size(), 3u * 4u);
  std::string path = ::testing::TempDir() + "alltonext.spec.json";
  ASSERT_TRUE(writeTextFile(verify::writePostCondition(*spec), path).isOk());
  DiagnosticList diags;
  std::optional<verify::PostCondition> back = verify::readPostCondition(path, diags);
  ASSERT_TRUE(back.has_value()) << (diags.size() ? diags.items()[0].format() : "");
  EXPECT_EQ(back->collective, "alltonext");
  ASSERT_EQ(back->entries.size(), spec->entries.size());
  for (size_t i = 0; i < spec->entries.size(); ++i) {
    EXPECT_EQ(back->entries[i].rank, spec->entries[i].rank);
    EXPECT_EQ(back->entries[i].chunk, spec->entries[i].chunk);
    EXPECT_EQ(back->entries[i].holds, spec->entries[i].holds);
  }
}

int count(const ir::Algorithm& a, ir::StepType t) {
  int k = 0;
  for (const ir::Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& s : tb.steps) k += s.type == t;
  return k;
}

compiler::Compiled compileRegistered(const std::string& name, int n, bool inplace = false) {
  const lang::ProgramEntry* e = lang::findProgram(name);
  EXPECT_NE(e, nullptr) << name;
  Program p(optionsFor(*e, {.ranks = n, .inplace = inplace}));
  e->build(p);
  return compiler::compile(p);
}

// Blocked instances keep each instance's chunks together, so multi-chunk
// operations stay multi-chunk steps; interleaved instances cut them apart.
TEST(Lang, BlockedInstancesKeepMultiChunkSteps) {
  const lang::ProgramEntry* e = lang::findProgram("hierarchical_allreduce");
  ASSERT_NE(e, nullptr);
  for (bool blocked : {false, true}) {
    Program p(optionsFor(
        *e, {.ranks = 4, .instances = 2, .blockedInstances = blocked, .gpusPerNode = 2}));
    e->build(p);
    compiler::Compiled c = compiler::compile(p);
    ASSERT_TRUE(c.ok());
    int widest = 0;
    for (const ir::Rank& r : c.algo.ranks)
      for (const ir::Threadblock& tb : r.tbs)
        for (const ir::Step& st : tb.steps) widest = std::max(widest, st.count);
    EXPECT_EQ(widest, blocked ? 2 : 1);
  }
}

// A ring allreduce on n ranks: per chunk one send, n - 2 rrcs and one rrcs
// at the owner (reduce-scatter), then n - 2 rcs and one recv (allgather),
// all on one threadblock per rank (one peer each way).
TEST(Lang, RingAllReduceFusesIntoTheClassicSchedule) {
  for (int n : {3, 4, 8}) {
    compiler::Compiled c = compileRegistered("ring_allreduce", n);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(count(c.algo, ir::StepType::kSend), n);
    EXPECT_EQ(count(c.algo, ir::StepType::kRecvReduceCopySend), n * (n - 1));
    EXPECT_EQ(count(c.algo, ir::StepType::kRecvCopySend), n * (n - 2));
    EXPECT_EQ(count(c.algo, ir::StepType::kRecv), n);
    EXPECT_EQ(count(c.algo, ir::StepType::kRecvReduceCopy), 0);
    for (const ir::Rank& r : c.algo.ranks) {
      ASSERT_EQ(r.tbs.size(), 1u);
      EXPECT_EQ(r.tbs[0].sendPeer, (r.id + 1) % n);
      EXPECT_EQ(r.tbs[0].recvPeer, (r.id + n - 1) % n);
    }
  }
}

// Partial sums that live in scratch and are only sent on need no store.
TEST(Lang, ScratchPartialSumsBecomeRecvReduceSend) {
  compiler::Compiled c = compileRegistered("ring_reducescatter", 4);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(count(c.algo, ir::StepType::kRecvReduceSend), 4 * 2);
  EXPECT_EQ(count(c.algo, ir::StepType::kRecvReduceCopy), 4);
  EXPECT_EQ(c.algo.ranks[0].scratchChunks, 4);
}

// All-pairs alltoall: a send-only and a receive-only threadblock per peer
// pair up, so a rank has n - 1 threadblocks (plus none for its own block:
// the local copy rides along).
TEST(Lang, SendOnlyAndReceiveOnlyThreadblocksPairUp) {
  compiler::Compiled c = compileRegistered("allpairs_alltoall", 5);
  ASSERT_TRUE(c.ok());
  for (const ir::Rank& r : c.algo.ranks) {
    EXPECT_EQ(r.tbs.size(), 4u);
    for (const ir::Threadblock& tb : r.tbs) EXPECT_EQ(tb.sendPeer, tb.recvPeer);
  }
}

// Kept apart (ProgramOptions::pairThreadblocks off), every connection has
// a threadblock of its own: 2 (n - 1) per rank, each one way.
TEST(Lang, UnpairedThreadblocksKeepOneConnectionEach) {
  const lang::ProgramEntry* e = lang::findProgram("allpairs_alltoall");
  ASSERT_NE(e, nullptr);
  Program p(optionsFor(*e, {.ranks = 5, .pairThreadblocks = false}));
  e->build(p);
  compiler::Compiled c = compiler::compile(p);
  ASSERT_TRUE(c.ok());
  for (const ir::Rank& r : c.algo.ranks) {
    EXPECT_EQ(r.tbs.size(), 8u);
    for (const ir::Threadblock& tb : r.tbs) EXPECT_NE(tb.sendPeer < 0, tb.recvPeer < 0);
  }
  Built b = compileAndVerify(p);
  ASSERT_NE(b.va, nullptr);
  runBothWays(b, false, 11);
}

// A local copy with a threadblock hint runs there, alone, beside the
// sends (an allgather whose ranks send from their input).
TEST(Lang, HintedLocalCopiesRunOnTheirThreadblock) {
  const int n = 4;
  Program p({.name = "own_block_apart", .collective = "allgather", .ranks = n});
  for (int r = 0; r < n; ++r) {
    Chunk c = p.chunk(r, kInput, 0);
    c.copy(r, kOutput, r, {.sendTb = 0});
    for (int q = 0; q < n; ++q)
      if (q != r) c.copy(q, kOutput, r);
  }
  compiler::Compiled c = compiler::compile(p);
  ASSERT_TRUE(c.ok());
  for (const ir::Rank& r : c.algo.ranks) {
    ASSERT_GE(r.tbs.size(), 1u);
    const ir::Threadblock& tb0 = r.tbs[0];
    EXPECT_EQ(tb0.sendPeer, -1);
    EXPECT_EQ(tb0.recvPeer, -1);
    ASSERT_EQ(tb0.steps.size(), 1u);
    EXPECT_EQ(tb0.steps[0].type, ir::StepType::kCopy);
    for (size_t t = 1; t < r.tbs.size(); ++t)
      for (const ir::Step& s : r.tbs[t].steps) EXPECT_NE(s.type, ir::StepType::kCopy);
  }
  Built b = compileAndVerify(p);
  ASSERT_NE(b.va, nullptr);
  runBothWays(b, false, 12);
}

TEST(Lang, PrintAfterShowsEachPass) {
  const lang::ProgramEntry* e = lang::findProgram("ring_allgather");
  ASSERT_NE(e, nullptr);
  Program p({.name = "ring_allgather", .collective = "allgather", .ranks = 3});
  e->build(p);
  compiler::CompileOptions o;
  o.printAfter = "fuse";
  o.timePasses = true;
  compiler::Compiled c = compiler::compile(p, o);
  ASSERT_TRUE(c.ok());
  // Rank 1: its block out (s), rank 0's block forwarded (rcs), rank 2's
  // block stored (r), its own block copied (cpy).
  EXPECT_NE(c.printed.find("rank 1\n"), std::string::npos) << c.printed;
  EXPECT_NE(c.printed.find("rcs - -> o[0] from 0 to 2 chan 0"), std::string::npos) << c.printed;
  EXPECT_NE(c.printed.find("cpy i[0] -> o[1] chan 0"), std::string::npos) << c.printed;
  for (const std::string& pass : compiler::passNames())
    EXPECT_NE(c.timings.find(pass), std::string::npos) << c.timings;
}

// Each misuse is reported at the line that made it (E601), and compiling
// stops there.
TEST(Lang, MisuseIsReportedAtItsLine) {
  Program p({.name = "bad", .collective = "allgather", .ranks = 3});
  int readBeforeWrite = __LINE__ + 1;
  Chunk nothing = p.chunk(1, kOutput, 2);
  EXPECT_FALSE(nothing.valid());
  int outOfRange = __LINE__ + 1;
  p.chunk(0, kInput, 0).copy(1, kOutput, 3);
  int badRank = __LINE__ + 1;
  p.chunk(0, kInput, 0).copy(7, kOutput, 0);
  int overlap = __LINE__ + 1;
  p.chunk(0, kInput, 0).copy(0, kInput, 0);
  int badSplit = __LINE__ + 1;
  p.chunk(0, kInput, 0).split(2);
  nothing.copy(0, kOutput, 1);  // dropped silently: the first problem is the one reported
  std::vector<int> lines;
  for (const lang::Problem& pr : p.problems()) {
    lines.push_back(pr.line);
    EXPECT_NE(pr.file.find("lang_test.cc"), std::string::npos);
  }
  EXPECT_EQ(lines, (std::vector<int>{readBeforeWrite, outOfRange, badRank, overlap, badSplit}));
  EXPECT_NE(p.problems()[0].message.find("rank 1 output chunk 2 is read before anything"),
            std::string::npos)
      << p.problems()[0].message;
  EXPECT_NE(p.problems()[1].message.find("outside the buffer (3 chunks per rank)"),
            std::string::npos)
      << p.problems()[1].message;
  compiler::Compiled c = compiler::compile(p);
  ASSERT_FALSE(c.ok());
  ASSERT_EQ(c.diagnostics.size(), 5u);
  EXPECT_EQ(c.diagnostics.items()[0].code, DiagCode::kProgramMisuse);
  EXPECT_NE(
      c.diagnostics.items()[0].format().find("lang_test.cc:" + std::to_string(readBeforeWrite)),
      std::string::npos)
      << c.diagnostics.items()[0].format();
}

TEST(Lang, BadOptionsAreReportedAtTheProgram) {
  int line = __LINE__ + 1;
  Program p({.name = "x", .collective = "all gather", .ranks = 3});
  ASSERT_EQ(p.problems().size(), 1u);
  EXPECT_EQ(p.problems()[0].line, line);
  EXPECT_FALSE(p.chunk(0, kInput, 0).valid());
  // Any other name is a custom collective, which must say what it computes.
  line = __LINE__ + 1;
  Program typo({.name = "x", .collective = "allgatherv", .ranks = 3});
  EXPECT_TRUE(typo.problems().empty());
  typo.chunk(0, kInput, 0).copy(1, kOutput, 0);
  compiler::Compiled c = compiler::compile(typo);
  ASSERT_EQ(c.diagnostics.size(), 1u);
  EXPECT_EQ(c.diagnostics.items()[0].loc.line, line);
  EXPECT_NE(c.diagnostics.items()[0].message.find("'allgatherv' has no postcondition()"),
            std::string::npos)
      << c.diagnostics.items()[0].message;
  Program q({.name = "x", .collective = "broadcast", .ranks = 3, .root = 3});
  ASSERT_EQ(q.problems().size(), 1u);
  EXPECT_NE(q.problems()[0].message.find("root 3"), std::string::npos);
}

// Rank 0 forwards two chunks that come from rank 1, one to rank 2 and one
// to rank 3: one threadblock cannot receive from 1 and send to both, so the
// second forward stays a receive then a send (any number of forwards
// compile). Threadblock hints that ask one threadblock for two send peers
// are an error naming both lines (E602).
TEST(Lang, ForwardsThatCannotShareAThreadblockAreSplit) {
  Program p({.name = "fan", .collective = "allgather", .ranks = 4});
  p.chunk(1, kInput, 0).copy(0, kOutput, 1).copy(2, kOutput, 1);
  p.chunk(2, kInput, 0).copy(1, kOutput, 2).copy(0, kOutput, 2).copy(3, kOutput, 2);
  compiler::Compiled out = compiler::compile(p);
  ASSERT_TRUE(out.ok());
  const ir::Rank& r0 = out.algo.ranks[0];
  int rcs = 0, r = 0, s = 0;
  for (const ir::Threadblock& tb : r0.tbs)
    for (const ir::Step& st : tb.steps) {
      rcs += st.type == ir::StepType::kRecvCopySend;
      r += st.type == ir::StepType::kRecv;
      s += st.type == ir::StepType::kSend;
    }
  EXPECT_EQ(rcs, 1);
  EXPECT_EQ(r, 1);
  EXPECT_EQ(s, 1);
}

// A rank whose receive and send connections would share a threadblock of
// more than the executor's 64 steps, each alone 40: the forwards are split
// into a receive and a send, and the send-only and receive-only
// threadblocks with one peer are not paired either. Every threadblock
// stays within the limit; the program still verifies and runs.
TEST(Lang, ThreadblocksPastTheExecutorsStepsAreNotJoined) {
  constexpr int kChunks = 40, kForwarded = 10;
  // In place: no local copies, which would run on these threadblocks too.
  Program p({.name = "relay",
             .collective = "allgather",
             .ranks = 3,
             .chunkFactor = kChunks,
             .inplace = true});
  for (int k = 0; k < kChunks; ++k) {
    // Rank 0's chunks reach 2 through 1 (the first ten) or directly; rank
    // 1's reach 2 directly (the first thirty) or through 0; rank 2's go
    // directly.
    lang::Chunk at1 = p.chunk(0, kInput, k).copy(1, kOutput, k);
    if (k < kForwarded)
      at1.copy(2, kOutput, k);
    else
      p.chunk(0, kInput, k).copy(2, kOutput, k);
    lang::Chunk at0 = p.chunk(1, kInput, k).copy(0, kOutput, kChunks + k);
    if (k < kChunks - kForwarded)
      p.chunk(1, kInput, k).copy(2, kOutput, kChunks + k);
    else
      at0.copy(2, kOutput, kChunks + k);
    p.chunk(2, kInput, k).copy(0, kOutput, 2 * kChunks + k);
    p.chunk(2, kInput, k).copy(1, kOutput, 2 * kChunks + k);
  }
  Built b = compileAndVerify(p);
  ASSERT_NE(b.va, nullptr);
  DiagnosticList limits;
  ir::checkExecutorLimits(b.va->algo(), limits);
  EXPECT_TRUE(limits.items().empty()) << limits.items().front().format();
  for (const ir::Rank& r : b.va->algo().ranks)
    for (const ir::Threadblock& tb : r.tbs)
      EXPECT_LE(tb.steps.size(), 64u) << "rank " << r.id << " tb " << tb.id;
  // Ranks 0 and 1 forward; their forwards are receives and sends now.
  for (int rank : {0, 1}) {
    int rcs = 0;
    for (const ir::Threadblock& tb : b.va->algo().ranks[static_cast<size_t>(rank)].tbs)
      for (const ir::Step& st : tb.steps) rcs += st.type == ir::StepType::kRecvCopySend;
    EXPECT_EQ(rcs, 0) << "rank " << rank;
  }
  runBothWays(b, true, 17);
}

TEST(Lang, ContradictingThreadblockHintsNameTheLines) {
  Program p({.name = "hints", .collective = "allgather", .ranks = 3});
  int first = __LINE__ + 1;
  p.chunk(0, kInput, 0).copy(1, kOutput, 0, {.sendTb = 0});
  int second = __LINE__ + 1;
  p.chunk(0, kInput, 0).copy(2, kOutput, 0, {.sendTb = 0});
  compiler::Compiled out = compiler::compile(p);
  ASSERT_FALSE(out.ok());
  const Diagnostic& d = out.diagnostics.items()[0];
  EXPECT_EQ(d.code, DiagCode::kAssignmentConflict);
  EXPECT_EQ(d.loc.line, second) << d.format();
  EXPECT_NE(d.message.find("send to ranks 1 and 2"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("line " + std::to_string(first)), std::string::npos) << d.message;
}

// Hints::lag becomes each step's lag (ir::Step::lag), the same on a send
// and its receive: a ring allgather whose odd blocks lag a slice behind
// the even ones on every connection proves and runs in that order. An
// operation on data a step of a larger lag makes is refused at its line.
TEST(Lang, LagsReachTheStepsAndMayNotDecreaseAlongTheData) {
  const int n = 4;
  Program p({.name = "lagged_ring", .collective = "allgather", .ranks = n});
  for (int r = 0; r < n; ++r) {
    p.chunk(r, kInput, 0).copy(r, kOutput, r);
    for (int hop = 1; hop < n; ++hop)
      p.chunk((r + hop - 1) % n, kOutput, r).copy((r + hop) % n, kOutput, r, {.lag = r % 2});
  }
  compiler::Compiled c = compiler::compile(p);
  ASSERT_TRUE(c.ok());
  int lagged = 0;
  for (const ir::Rank& r : c.algo.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& s : tb.steps) lagged += s.lag == 1;
  EXPECT_EQ(lagged, 2 * n);  // two odd blocks: a send, n - 2 forwards and a receive each
  EXPECT_TRUE(ir::hasLags(c.algo));
  Built b = compileAndVerify(p);
  ASSERT_NE(b.va, nullptr);
  runBothWays(b, false, 13);

  Program bad({.name = "lag_down", .collective = "allgather", .ranks = 3});
  for (int r = 0; r < 3; ++r) bad.chunk(r, kInput, 0).copy(r, kOutput, r);
  bad.chunk(0, kOutput, 0).copy(1, kOutput, 0, {.lag = 2});
  const int line = __LINE__ + 1;
  bad.chunk(1, kOutput, 0).copy(2, kOutput, 0, {.lag = 1});
  compiler::Compiled refused = compiler::compile(bad);
  ASSERT_FALSE(refused.ok());
  const Diagnostic& d = refused.diagnostics.items()[0];
  EXPECT_EQ(d.code, DiagCode::kProgramMisuse);
  EXPECT_EQ(d.loc.line, line) << d.format();
  EXPECT_NE(d.message.find("(lag 1) touches output chunk 0 after a step of lag 2"),
            std::string::npos)
      << d.message;
  Program outOfRange({.name = "lag_range", .collective = "allgather", .ranks = 2});
  outOfRange.chunk(0, kInput, 0).copy(1, kOutput, 0, {.lag = -1});
  EXPECT_FALSE(compiler::compile(outOfRange).ok());
}

// Property: random journeys that implement an allgather (each block takes
// its own random route through every rank, sometimes by way of scratch)
// compile, verify and run, for random rank counts and instances.
TEST(Lang, RandomAllGatherJourneysCompileVerifyAndRun) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 40; ++trial) {
    int n = 2 + static_cast<int>(rng() % 6);
    int instances = 1 + static_cast<int>(rng() % 2);
    SCOPED_TRACE("trial " + std::to_string(trial) + " n=" + std::to_string(n));
    Program p({.name = "random", .collective = "allgather", .ranks = n, .instances = instances});
    lang::Buffer hop = p.scratch("hop");
    for (int r = 0; r < n; ++r) {
      std::vector<int> route;
      for (int q = 0; q < n; ++q)
        if (q != r) route.push_back(q);
      std::shuffle(route.begin(), route.end(), rng);
      Chunk c = p.chunk(r, kInput, 0);
      c.copy(r, kOutput, r);
      for (int q : route) {
        if (rng() % 3 == 0) {
          c = c.copy(q, hop, r).copy(q, kOutput, r);  // via scratch, then local
        } else {
          c = c.copy(q, kOutput, r);
        }
        if (rng() % 4 == 0) c = p.chunk(q, kOutput, r);  // continue from the copy (same data)
      }
    }
    Built b = compileAndVerify(p);
    ASSERT_NE(b.va, nullptr);
    runBothWays(b, false, static_cast<uint64_t>(trial));
  }
}

// Property: random programs of other collectives compile, verify and run:
// alltoall blocks and the chunks of a custom permutation take random routes
// through scratch on other ranks; allreduce chunks are summed along a random
// order of the ranks and spread back from random ranks that have the sum.
TEST(Lang, RandomJourneysOfOtherCollectivesCompileVerifyAndRun) {
  std::mt19937 rng(777);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  for (int trial = 0; trial < 45; ++trial) {
    const int n = 2 + pick(5), instances = 1 + pick(2), kind = trial % 3;
    const char* collective = kind == 0 ? "alltoall" : kind == 1 ? "allreduce" : "permute";
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + collective + " n=" + std::to_string(n));
    const int chunks = kind == 1 ? n : kind == 2 ? 2 : 1;
    Program p({.name = "random",
               .collective = collective,
               .ranks = n,
               .chunkFactor = chunks,
               .instances = instances,
               .blockedInstances = pick(2) == 1});
    lang::Buffer hop = p.scratch("hop");
    // A random route from `c` to (to, buffer, index), through scratch.
    auto route = [&](Chunk c, int to, lang::Buffer b, int index, int slot) {
      for (int hops = pick(3); hops > 0; --hops)
        c = c.copy((c.rank() + 1 + pick(n - 1)) % n, hop, slot);  // another rank
      c.copy(to, b, index);
    };
    if (kind == 0) {
      for (int s = 0; s < n; ++s)
        for (int d = 0; d < n; ++d) route(p.chunk(s, kInput, d), d, kOutput, s, s * n + d);
    } else if (kind == 1) {
      for (int k = 0; k < n; ++k) {
        std::vector<int> order(static_cast<size_t>(n));
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        Chunk sum = p.chunk(order[0], kInput, k);
        for (size_t j = 1; j < order.size(); ++j)
          sum = p.chunk(order[j], kInput, k).reduce(sum, kOutput, k);
        if (n == 1) sum = sum.copy(order[0], kOutput, k);
        std::vector<int> have = {order.back()};
        for (size_t j = 0; j + 1 < order.size(); ++j) {
          int from = have[static_cast<size_t>(pick(static_cast<int>(have.size())))];
          p.chunk(from, kOutput, k).copy(order[j], kOutput, k);
          have.push_back(order[j]);
        }
      }
    } else {
      std::vector<int> to(static_cast<size_t>(n));
      std::iota(to.begin(), to.end(), 0);
      std::shuffle(to.begin(), to.end(), rng);
      for (int r = 0; r < n; ++r)
        for (int k = 0; k < chunks; ++k) {
          int d = to[static_cast<size_t>(r)];
          p.postcondition(d, k, {{r, k}});
          route(p.chunk(r, kInput, k), d, kOutput, k, r * chunks + k);
        }
    }
    ASSERT_TRUE(p.problems().empty()) << p.problems()[0].message;
    Built b = compileAndVerify(p);
    ASSERT_NE(b.va, nullptr);
    runBothWays(b, false, static_cast<uint64_t>(trial));
  }
}

}  // namespace
}  // namespace chorus
