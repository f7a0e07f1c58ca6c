// MSCCL++ execution plans run (issue 42): a proven plan lowered to
// two-sided steps (verify::lowerPlan) runs on thread ranks with every
// element checked; a plan that does not prove is not run.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "algorithms/classic.h"
#include "ir/json_io.h"
#include "ir/mscclpp_plan.h"
#include "tests/support/collective_check.h"
#include "tests/support/files.h"
#include "verify/plan_verifier.h"

namespace chorus::runtime {
namespace {

using chorus::testing::Case;
using chorus::testing::runAndCheck;
using chorus::testing::unitCount;

std::shared_ptr<const VerifiedAlgorithm> lowered(const std::string& text, const std::string& name,
                                                 DiagnosticList* found = nullptr) {
  auto read = ir::mscclpp::readPlan(text, name);
  EXPECT_TRUE(read.plan.has_value()) << name;
  if (!read.plan) return nullptr;
  verify::PlanLowering low = verify::lowerPlan(*read.plan, name);
  if (found != nullptr) *found = low.diagnostics;
  if (!low.algorithm) return nullptr;
  auto va = VerifiedAlgorithm::make(std::move(*low.algorithm));
  EXPECT_TRUE(va.isOk()) << va.status().message();
  return va.isOk() ? va.value() : nullptr;
}

void runEveryWay(const VerifiedAlgorithm& va) {
  for (bool threaded : {false, true})
    for (size_t sliceBytes : {size_t{4}, size_t{0}}) {
      Case c;
      c.count = unitCount(va.algo()) * 3;
      c.inplace = va.algo().inplace;
      c.options.sliceBytes = sliceBytes;
      c.options.slots = 2;  // fewer than most plans' messages in flight
      c.threaded = threaded;
      runAndCheck(va, c);
    }
}

TEST(PlanRun, ThePlansOfTheTestDataRunChecked) {
  auto files = chorus::testing::sourceFiles("tests/data/plans", ".json");
  ASSERT_GE(files.size(), 2u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    auto va = lowered(chorus::testing::readText(f), f);
    ASSERT_TRUE(va);
    runEveryWay(*va);
    // The step engine: the CUDA executor's code, on host threads.
    chorus::testing::runOnEngineEveryWay(*va, nullptr, 2, 2);
    // Read as any algorithm file is, by a reader that can lower plans.
    ir::ReadOptions o;
    o.plans = &verify::planFiles();
    ir::ReadResult rr = ir::readAlgorithmFile(f, o);
    ASSERT_TRUE(rr.algorithm.has_value());
    EXPECT_EQ(*rr.algorithm, va->algo());
  }
}

TEST(PlanRun, ProductionFilesWrittenAsPlansRunWithEightSlots) {
  // The MSCCL executor's 8 slots per connection: the plan forms of
  // ag-32m-1g, r48ll and r48ll128 once merged each rank's ring into one
  // threadblock that filled its 8 slots before its first receive, and
  // every rank then waited for its successor (hung on an H200 and on
  // threads alike). The verifier's E205 now sends them to a threadblock
  // per connection.
  auto files = chorus::testing::productionFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    ir::Algorithm a = chorus::testing::mustRead(f);
    auto va = lowered(ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(a)), f);
    ASSERT_TRUE(va);
    Case c;
    c.count = unitCount(va->algo());
    c.inplace = va->algo().inplace;
    c.options.slots = 8;
    c.threaded = true;
    runAndCheck(*va, c);
  }
}

TEST(PlanRun, BuiltInsWrittenAsPlansRunOnTwoToSixteenRanks) {
  // Chorus's own algorithms as MSCCL++ plans (one-sided: slots, signals,
  // semaphores), read back, proven, lowered and run: the round trip
  // through the other system's semantics keeps every element.
  int ran = 0;
  for (const char* name : {"ring_allreduce", "ring_allgather", "ring_reducescatter",
                           "pairwise_alltoall", "halving_doubling_allreduce", "chain_broadcast"})
    for (int n : {2, 3, 4, 8, 16}) {
      auto a = algorithms::makeClassic(name, n);
      if (!a.isOk()) continue;
      if (n == 16 && std::string(name) != "ring_allreduce") continue;  // time: one at 16
      SCOPED_TRACE(std::string(name) + " on " + std::to_string(n));
      const std::string text = ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(a.value()));
      auto va = lowered(text, std::string(name) + ".json");
      ASSERT_TRUE(va);
      EXPECT_EQ(va->algo().ngpus, n);
      Case c;
      c.count = unitCount(va->algo()) * 2;
      c.inplace = va->algo().inplace;
      c.threaded = true;
      runAndCheck(*va, c);
      ++ran;
    }
  EXPECT_GE(ran, 20);
}

TEST(PlanRun, ARingWrittenAsAPlanLowersToTheRingAgain) {
  // One-sided (a slot per message, signals, semaphores) and back: the slots
  // are received in place and each receive forwards what it got, so every
  // rank runs the classic ring's steps on one threadblock.
  auto ring = algorithms::makeClassic("ring_allreduce", 8);
  ASSERT_TRUE(ring.isOk());
  auto va = lowered(ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(ring.value())), "r.json");
  ASSERT_TRUE(va);
  for (const ir::Rank& k : va->algo().ranks) {
    SCOPED_TRACE("rank " + std::to_string(k.id));
    ASSERT_EQ(k.tbs.size(), 1u);
    EXPECT_EQ(k.tbs[0].steps.size(),
              ring.value().ranks[static_cast<size_t>(k.id)].tbs[0].steps.size());
    EXPECT_EQ(k.scratchChunks, 0);
    int forwards = 0;  // receives that send on (rrs, rrcs, rcs)
    for (const ir::Step& st : k.tbs[0].steps)
      forwards += ir::sends(st.type) && ir::receives(st.type) ? 1 : 0;
    EXPECT_EQ(forwards, 13);
  }
}

TEST(PlanRun, APlanThatDoesNotProveIsNotRun) {
  // The allreduce with its first wait taken out: the read races the put.
  nlohmann::json j = nlohmann::json::parse(chorus::testing::readText(
      std::string(CHORUS_SOURCE_DIR) + "/tests/data/plans/allreduce_2_simple.json"));
  auto& ops = j["gpus"][1]["threadblocks"][0]["ops"];
  bool cut = false;
  for (size_t i = 0; i < ops.size() && !cut; ++i)
    if (ops[i]["name"] == "wait") {
      ops.erase(i);
      cut = true;
    }
  ASSERT_TRUE(cut);
  DiagnosticList found;
  EXPECT_FALSE(lowered(j.dump(2), "racy.json", &found));
  EXPECT_TRUE(found.contains(DiagCode::kPlanRace))
      << (found.empty() ? "" : found.items()[0].format());
}

TEST(PlanRun, AReaderThatCannotLowerSaysSo) {
  ir::ReadResult rr = ir::readAlgorithmFile(std::string(CHORUS_SOURCE_DIR) +
                                            "/tests/data/plans/allgather_2_ll.json");
  EXPECT_FALSE(rr.algorithm.has_value());
  ASSERT_FALSE(rr.diagnostics.empty());
  EXPECT_NE(rr.diagnostics.items()[0].message.find("MSCCL++ execution plan"), std::string::npos);
}

}  // namespace
}  // namespace chorus::runtime
