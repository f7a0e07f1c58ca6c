// The Chorus language and its compiler: every registered program compiles,
// is proven by the (independent) verifier and runs with real data, at
// several rank counts, instances, both call forms and two protocols; misuse
// is reported at the program's line; the passes do what they promise
// (fusion, store-less reductions, threadblock pairing, dependencies).
#include <gtest/gtest.h>

#include <chorus/lang.hpp>
#include <random>

#include "compiler/compiler.h"
#include "lang/registry.h"
#include "runtime/check.h"
#include "tests/support/collective_check.h"

namespace chorus {
namespace {

using lang::Chunk;
using lang::kInput;
using lang::kOutput;
using lang::Program;

std::shared_ptr<const runtime::VerifiedAlgorithm> compileAndVerify(const Program& p) {
  compiler::Compiled c = compiler::compile(p);
  for (const Diagnostic& d : c.diagnostics.items()) ADD_FAILURE() << d.format();
  if (!c.ok()) return nullptr;
  auto va = runtime::VerifiedAlgorithm::make(std::move(c.algo));
  EXPECT_TRUE(va.isOk()) << va.status().message();
  return va.isOk() ? va.value() : nullptr;
}

void runBothWays(const runtime::VerifiedAlgorithm& va, bool inplace, uint64_t seed) {
  for (size_t slice : {size_t{0}, size_t{4}}) {
    testing::Case c;
    c.count = testing::unitCount(va.algo()) * 3;
    c.inplace = inplace;
    c.type = DataType::kInt32;
    c.options.sliceBytes = slice;
    c.options.order = runtime::DeterministicOptions::Order::kRandom;
    c.options.seed = seed;
    testing::runAndCheck(va, c);
  }
}

TEST(Lang, EveryProgramCompilesVerifiesAndRuns) {
  for (const lang::ProgramEntry& e : lang::programs())
    for (int n : {1, 2, 3, 4, 5, 8}) {
      if (!e.ranksOk(n)) continue;
      for (int instances : {1, 2})
        for (bool inplace : {false, true})
          for (const char* protocol : {"Simple", "LL"}) {
            SCOPED_TRACE(e.name + " n=" + std::to_string(n) + " instances=" +
                         std::to_string(instances) + (inplace ? " in place " : " ") + protocol);
            Program p({.name = e.name,
                       .collective = e.collective,
                       .ranks = n,
                       .chunkFactor = e.chunkFactor(n),
                       .inplace = inplace,
                       .protocol = protocol,
                       .instances = instances});
            e.build(p);
            auto va = compileAndVerify(p);
            ASSERT_NE(va, nullptr);
            EXPECT_EQ(va->algo().inplace, inplace);
            EXPECT_EQ(ir::protocolName(va->algo().protocol), protocol);
            runBothWays(*va, inplace, static_cast<uint64_t>(n * 7 + instances));
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
        Program p({.name = "h",
                   .collective = "allreduce",
                   .ranks = n,
                   .chunkFactor = e->chunkFactor(n),
                   .inplace = inplace,
                   .instances = instances,
                   .gpusPerNode = gpus});
        e->build(p);
        auto va = compileAndVerify(p);
        ASSERT_NE(va, nullptr);
        EXPECT_EQ(va->algo().nchannels, nodes > 1 ? 2 * instances : instances);
        runBothWays(*va, inplace, static_cast<uint64_t>(n));
      }
  const lang::ProgramEntry* a2a = lang::findProgram("twostep_alltoall");
  ASSERT_NE(a2a, nullptr);
  for (auto [nodes, gpus] : {std::pair{2, 2}, {2, 3}, {3, 2}, {1, 4}, {4, 1}})
    for (bool inplace : {false, true}) {
      SCOPED_TRACE("two-step alltoall " + std::to_string(nodes) + "x" + std::to_string(gpus) +
                   (inplace ? " in place" : ""));
      Program p({.name = "t",
                 .collective = "alltoall",
                 .ranks = nodes * gpus,
                 .inplace = inplace,
                 .instances = 2,
                 .gpusPerNode = gpus});
      a2a->build(p);
      auto va = compileAndVerify(p);
      ASSERT_NE(va, nullptr);
      runBothWays(*va, inplace, static_cast<uint64_t>(nodes * 10 + gpus));
    }
  Program bad(
      {.name = "h", .collective = "allreduce", .ranks = 6, .chunkFactor = 6, .gpusPerNode = 4});
  e->build(bad);
  ASSERT_EQ(bad.problems().size(), 1u);
  EXPECT_NE(bad.problems()[0].message.find("--gpus-per-node 4 does not divide 6 ranks"),
            std::string::npos);
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
  Program p({.name = name,
             .collective = e->collective,
             .ranks = n,
             .chunkFactor = e->chunkFactor(n),
             .inplace = inplace});
  e->build(p);
  return compiler::compile(p);
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
  Program p({.name = "x", .collective = "allgatherv", .ranks = 3});
  ASSERT_EQ(p.problems().size(), 1u);
  EXPECT_EQ(p.problems()[0].line, line);
  EXPECT_FALSE(p.chunk(0, kInput, 0).valid());
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
    auto va = compileAndVerify(p);
    ASSERT_NE(va, nullptr);
    runBothWays(*va, false, static_cast<uint64_t>(trial));
  }
}

}  // namespace
}  // namespace chorus
