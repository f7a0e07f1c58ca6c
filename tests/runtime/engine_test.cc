// The step engine (engine.h): the CUDA executor's step and protocol code,
// run on the host with a thread standing in for each block. Every
// production file and every `chorus gen` program at 8 ranks, in each call
// form it serves, with each protocol's slot layout (Simple, LL, LL128),
// checked element by element; every data type and op on the production
// allreduces; several host threads (label `threads`, run under TSan) with
// one slot per connection; and the errors a caller can cause.
#include <gtest/gtest.h>

#include "lang/registry.h"
#include "runtime/exec/check.h"
#include "runtime/exec/conn_exchange.h"
#include "runtime/exec/engine_host.h"
#include "runtime/exec/flat_plan.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"
#include "tests/support/programs.h"

namespace chorus::runtime {
namespace {

using chorus::testing::Case;
using chorus::testing::load;
using chorus::testing::runAndCheck;
using chorus::testing::unitCount;

TEST(StepEngine, PlanLowersEveryStepAndConnection) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml");
  ASSERT_TRUE(va);
  FlatPlan p = FlatPlan::lower(*va);
  const ir::Algorithm& a = va->algo();
  EXPECT_EQ(p.nranks, a.ngpus);
  EXPECT_EQ(p.blocks.size(), a.totalThreadblocks());
  EXPECT_EQ(p.steps.size(), a.totalSteps());
  for (const ir::Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs) {
      const PlanBlock& b = p.blocks[static_cast<size_t>(p.rankFirstBlock[r.id] + tb.id)];
      EXPECT_EQ(b.rank, r.id);
      EXPECT_EQ(b.tb, tb.id);
      if (tb.sendPeer >= 0) {
        const PlanConn& c = p.conns[static_cast<size_t>(b.sendConn)];
        EXPECT_EQ(c.from, r.id);
        EXPECT_EQ(c.to, tb.sendPeer);
        EXPECT_EQ(c.channel, tb.channel);
        EXPECT_EQ(p.blocks[static_cast<size_t>(c.recvBlock)].rank, tb.sendPeer);
      }
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const ir::Step& s = tb.steps[i];
        const PlanStep& ps = p.steps[static_cast<size_t>(b.firstStep) + i];
        EXPECT_EQ(ps.type, static_cast<uint8_t>(s.type));
        EXPECT_EQ(ps.count, s.count);
        if (s.depTb >= 0) {
          EXPECT_EQ(p.blocks[static_cast<size_t>(ps.depBlock)].tb, s.depTb);
          EXPECT_EQ(ps.depSteps,
                    static_cast<int>(r.tbs[static_cast<size_t>(s.depTb)].steps.size()));
        } else {
          EXPECT_EQ(ps.depBlock, -1);
        }
      }
    }
}

// A plan of K instances: each threadblock K times, each copy with its own
// connections, waiting only for its own instance; the bytes a call moves do
// not depend on K; slices are cut so that every instance has work.
TEST(StepEngine, PlanLowersEachThreadblockAsInstances) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/ap4ll.xml");
  ASSERT_TRUE(va);
  const int k = 3;
  FlatPlan one = FlatPlan::lower(*va);
  FlatPlan p = FlatPlan::lower(*va, k);
  EXPECT_EQ(p.instances, k);
  EXPECT_EQ(p.blocks.size(), one.blocks.size() * k);
  EXPECT_EQ(p.steps.size(), one.steps.size() * k);
  EXPECT_EQ(p.conns.size(), one.conns.size() * k);
  for (int r = 0; r < p.nranks; ++r) EXPECT_EQ(p.blocksOf(r), one.blocksOf(r) * k);
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    const PlanBlock& pb = p.blocks[b];
    for (int32_t conn : {pb.sendConn, pb.recvConn}) {
      if (conn >= 0) {
        EXPECT_EQ(p.conns[static_cast<size_t>(conn)].instance, pb.instance);
      }
    }
    for (int32_t i = 0; i < pb.nsteps; ++i) {
      const PlanStep& s = p.steps[static_cast<size_t>(pb.firstStep + i)];
      if (s.depBlock < 0) continue;
      const PlanBlock& dep = p.blocks[static_cast<size_t>(s.depBlock)];
      EXPECT_EQ(dep.instance, pb.instance);
      EXPECT_EQ(dep.rank, pb.rank);
    }
  }
  // 16 MiB of fp32 in 2 MiB slices: one slice per chunk, cut for 3 instances.
  ir::Slicing g =
      ir::Slicing::make(4, size_t{1} << 22, static_cast<size_t>(va->algo().nchunksPerLoop),
                        ir::defaultSliceBytes(ir::Protocol::kSimple));
  ir::Slicing cut = g;
  p.splitSlices(&cut);
  EXPECT_GE(cut.iterations, static_cast<size_t>(k));
  EXPECT_EQ(cut.sliceElems % 4, 0u);  // whole 16-byte words
  const double moved = one.bytesMoved(g, ir::Protocol::kSimple);
  EXPECT_NEAR(p.bytesMoved(cut, ir::Protocol::kSimple), moved, moved * 1e-12);
  ir::Slicing same = g;
  one.splitSlices(&same);  // one instance: as it was
  EXPECT_EQ(same.sliceElems, g.sliceElems);
  // Never below kInstanceSliceBytes: a small call keeps one slice.
  ir::Slicing small = ir::Slicing::make(4, 64, 8, ir::defaultSliceBytes(ir::Protocol::kSimple));
  p.splitSlices(&small);
  EXPECT_EQ(small.iterations, 1u);
}

// Every production file and every DSL program at 8 ranks with each
// threadblock split into 3 instances (more blocks than one per connection
// pair, odd slice counts), every protocol, data checked.
TEST(StepEngine, ProductionFilesSplitIntoInstances) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    chorus::testing::runOnEngineEveryWay(*va, nullptr, /*threads=*/1, /*slots=*/2,
                                         /*instances=*/3);
  }
}

TEST(StepEngine, EveryDslProgramSplitIntoInstances) {
  for (const lang::ProgramEntry& e : lang::programs()) {
    if (!e.ranksOk(8)) continue;
    SCOPED_TRACE(e.name);
    chorus::testing::BuiltProgram p = chorus::testing::buildProgram(e, 8, /*inplace=*/false);
    ASSERT_TRUE(p.va);
    chorus::testing::runOnEngineEveryWay(*p.va, p.spec ? &*p.spec : nullptr, /*threads=*/1,
                                         /*slots=*/4, /*instances=*/3);
  }
}

TEST(StepEngine, ProductionFilesWithEveryProtocol) {
  for (const auto& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    auto va = load(path);
    ASSERT_TRUE(va);
    chorus::testing::runOnEngineEveryWay(*va, nullptr, /*threads=*/1, /*slots=*/2);
  }
}

TEST(StepEngine, EveryDslProgramAtEightRanks) {
  int ran = 0;
  for (const lang::ProgramEntry& e : lang::programs()) {
    if (!e.ranksOk(8)) continue;
    ++ran;
    for (bool inplace : {false, true}) {
      SCOPED_TRACE(e.name + (inplace ? " in place" : " out of place"));
      chorus::testing::BuiltProgram p = chorus::testing::buildProgram(e, 8, inplace);
      ASSERT_TRUE(p.va);
      chorus::testing::runOnEngineEveryWay(*p.va, p.spec ? &*p.spec : nullptr, /*threads=*/1,
                                           /*slots=*/8);
    }
  }
  // Every program serves 8 ranks; none may slip out of the test.
  EXPECT_EQ(ran, static_cast<int>(lang::programs().size()));
}

TEST(StepEngine, EveryTypeAndOpBitForBit) {
  for (const char* file : {"/r48ll.xml", "/ap4ll.xml"}) {
    auto va = load(std::string(CHORUS_MSCCL_DIR) + file);
    ASSERT_TRUE(va);
    for (int t = 0; t < kNumDataTypes; ++t)
      for (int op = 0; op < kNumReduceOps; ++op) {
        SCOPED_TRACE(std::string(file) + " " + std::string(dataTypeName(static_cast<DataType>(t))) +
                     " " + std::string(reduceOpName(static_cast<ReduceOp>(op))));
        Case c;
        c.type = static_cast<DataType>(t);
        c.op = static_cast<ReduceOp>(op);
        c.count = unitCount(va->algo()) * 5;
        c.inplace = true;
        c.options.sliceBytes = 3 * dataTypeSize(c.type);  // odd line tails
        c.engineThreads = 1;
        runAndCheck(*va, c);
      }
  }
}

// Several host threads polling blocks at once: the protocols' memory
// ordering as C++ atomics, under TSan in CI (label threads).
// The blobs ranks exchange for their connections (conn_exchange.h): a
// round trip keeps every field (binary handles too), and each malformed
// blob is refused naming the rank and what is wrong.
TEST(StepEngine, ConnectionOffersRoundTripAndBadOnesAreRefused) {
  RankOffers offers;
  offers.instances = 3;
  offers.protocol = 2;
  offers.offers.push_back(ConnOffer{ConnKey{2, 1, 0, 5}, 4096, 8, std::string("\0\x01\xff", 3)});
  offers.offers.push_back(ConnOffer{ConnKey{0, 0, 4, 5}, 16, 2, ""});
  auto back = decodeOffers(5, encodeOffers(5, offers));
  ASSERT_TRUE(back.isOk()) << back.status().message();
  EXPECT_EQ(back.value().instances, 3);
  EXPECT_EQ(back.value().protocol, 2);
  ASSERT_EQ(back.value().offers.size(), 2u);
  EXPECT_EQ(back.value().offers[0].key, (ConnKey{2, 1, 0, 5}));
  EXPECT_EQ(back.value().offers[0].slotBytes, 4096u);
  EXPECT_EQ(back.value().offers[0].slots, 8);
  EXPECT_EQ(back.value().offers[0].handle, std::string("\0\x01\xff", 3));
  EXPECT_EQ(back.value().offers[1].handle, "");
  for (
      auto [blob, why] : std::vector<std::pair<std::string, std::string>>{
          {"not json", "not a JSON object"},
          {R"({"rank":4,"instances":1,"protocol":0,"offers":[]})", "is not 5"},
          {R"({"rank":5,"protocol":0,"offers":[]})", "instances"},
          {R"({"rank":5,"instances":1,"protocol":0})", "offers"},
          {R"({"rank":5,"instances":1,"protocol":0,"offers":[{"instance":0,"channel":0,"from":1,"to":5,"slots":2,"slot_bytes":16,"handle":"zz"}]})",
           "not hexadecimal"},
          {R"({"rank":5,"instances":1,"protocol":0,"offers":[{"instance":0,"channel":0,"from":1,"to":4,"slots":2,"slot_bytes":16,"handle":""}]})",
           "not a connection into it"},
          {R"({"rank":5,"instances":1,"protocol":0,"offers":[{"instance":0,"channel":0,"from":1,"to":5,"slot_bytes":16,"handle":""}]})",
           "slots"}}) {
    auto got = decodeOffers(5, blob);
    ASSERT_FALSE(got.isOk()) << blob;
    EXPECT_NE(got.status().message().find("rank 5"), std::string::npos) << got.status().message();
    EXPECT_NE(got.status().message().find(why), std::string::npos) << got.status().message();
  }
}

TEST(StepEngine, BadCallsAreRefused) {
  auto va = load(std::string(CHORUS_MSCCL_DIR) + "/ag-1m.xml");
  ASSERT_TRUE(va);
  auto w = PlanWorld::make(*va);
  ASSERT_TRUE(w.isOk());
  auto data = CollectiveData::make(*va, unitCount(va->algo()), DataType::kFloat32, ReduceOp::kSum,
                                   va->algo().inplace);
  ASSERT_TRUE(data.isOk());
  std::vector<CallArgs> calls = data.value().calls();
  calls[0].op = ReduceOp::kAvg;
  for (auto& c : calls) c.op = ReduceOp::kAvg;
  Status st = w.value()->run(calls);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("avg needs a reducing collective"), std::string::npos);
  calls = data.value().calls();
  calls[3].count += 1;
  EXPECT_EQ(w.value()->run(calls).code(), StatusCode::kInvalidArgument);
  calls = data.value().calls();
  calls.pop_back();
  EXPECT_EQ(w.value()->run(calls).code(), StatusCode::kInvalidArgument);
  PlanRunOptions bad;
  bad.slots = 0;
  EXPECT_EQ(PlanWorld::make(*va, bad).status().code(), StatusCode::kInvalidArgument);
  bad = {};
  bad.threads = 0;
  EXPECT_EQ(PlanWorld::make(*va, bad).status().code(), StatusCode::kInvalidArgument);
  for (int team : {0, 1025}) {
    bad = {};
    bad.teamThreads = team;
    auto refused = PlanWorld::make(*va, bad);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("team threads"), std::string::npos);
  }
}

// Two sends before a receive with one slot: blocked forever, reported with
// every stuck block's position, on one thread and on several.
}  // namespace
}  // namespace chorus::runtime
