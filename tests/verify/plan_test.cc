// MSCCL++ execution plans (issue 42): the reader and writer (every field,
// a byte-exact round trip of plans in the DSL's form, errors naming the JSON
// path) and the one-sided verifier (deadlocks, races, wrong results, limits),
// on the plans in tests/data/plans and mutations of them.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "algorithms/classic.h"
#include "ir/mscclpp_plan.h"
#include "tests/support/files.h"
#include "verify/plan_verifier.h"

namespace chorus::verify {
namespace plan_test {

using ir::mscclpp::Plan;
using json = nlohmann::json;

std::string planFile(const std::string& name) {
  return chorus::testing::readText(std::string(CHORUS_SOURCE_DIR) + "/tests/data/plans/" + name);
}

Plan read(const std::string& text) {
  auto r = ir::mscclpp::readPlan(text, "test.json");
  EXPECT_TRUE(r.plan.has_value()) << (r.diagnostics.empty() ? ""
                                                            : r.diagnostics.items()[0].format());
  return r.plan.value_or(Plan{});
}

// The codes the verifier reports on `text` (errors and warnings).
std::vector<std::string> codes(const std::string& text, PlanReport* out = nullptr) {
  auto r = ir::mscclpp::readPlan(text, "test.json");
  std::vector<std::string> ids;
  if (!r.plan) {
    for (const auto& d : r.diagnostics.items()) ids.push_back(d.id());
    return ids;
  }
  PlanReport rep = verifyPlan(*r.plan, "test.json");
  for (const auto& d : rep.diagnostics.items())
    if (d.severity != Severity::kNote) ids.push_back(d.id());
  if (out != nullptr) *out = rep;
  return ids;
}

std::string mutate(const std::string& text, const std::function<void(json&)>& f) {
  json j = json::parse(text);
  f(j);
  return j.dump(2);
}

json& ops(json& j, int rank, int tb) { return j["gpus"][rank]["threadblocks"][tb]["ops"]; }

TEST(Plan, ReadsAndWritesTheDslFormByteForByte) {
  for (const char* f : {"allreduce_2_simple.json", "allgather_2_ll.json"}) {
    SCOPED_TRACE(f);
    const std::string text = planFile(f);
    EXPECT_TRUE(ir::mscclpp::looksLikePlan(text));
    Plan p = read(text);
    EXPECT_EQ(ir::mscclpp::writePlan(p), text);
    EXPECT_EQ(p.maxMessageSize.value_or(0), 18446744073709551615ull);  // 2^64 - 1, exact
  }
  // Not a plan: a Chorus algorithm in JSON, a topology.
  EXPECT_FALSE(ir::mscclpp::looksLikePlan(R"({"name": "x", "ranks": []})"));
  EXPECT_FALSE(ir::mscclpp::looksLikePlan("not json"));
}

TEST(Plan, KeepsKeysItDoesNotReadAndDefaults) {
  std::string text = mutate(planFile("allreduce_2_simple.json"), [](json& j) {
    j["gpus"][0]["threadblocks"][0]["ops"][0]["comment"] = "mine";
    j["generator"] = {{"tool", "x"}};
    j.erase("buffer_alignment");
    j.erase("num_threads_per_block");
  });
  auto r = ir::mscclpp::readPlan(text, "k.json");
  ASSERT_TRUE(r.plan);
  EXPECT_TRUE(r.diagnostics.contains(DiagCode::kPlanUnreadKey));
  EXPECT_EQ(r.plan->alignment(), 16u);
  EXPECT_EQ(r.plan->threadsPerBlock(), 1024);
  // Written back, nothing is lost: the same JSON value.
  EXPECT_EQ(json::parse(ir::mscclpp::writePlan(*r.plan)), json::parse(text));
}

TEST(Plan, MalformedInputNamesThePath) {
  struct Case {
    std::function<void(json&)> f;
    const char* where;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["gpus"][1]["threadblocks"][0]["ops"][3]["src_buff"][1]["index"] = -1; },
       "gpus[1].threadblocks[0].ops[3].src_buff[1].index"},
      {[](json& j) { j["gpus"][0]["threadblocks"][0]["ops"][8]["name"] = "fly"; },
       "gpus[0].threadblocks[0].ops[8].name: 'fly' is not an operation"},
      {[](json& j) { j["gpus"][0]["threadblocks"][0]["ops"][3]["dst_buff"][0]["buffer_id"] = 0; },
       "gpus[0].threadblocks[0].ops[3].dst_buff[0]: needs exactly one of"},
      {[](json& j) { j["max_message_size"] = "big"; }, "max_message_size: is not a non-negative"},
      {[](json& j) { j.erase("gpus"); }, "has no \"gpus\""},
      {[](json& j) { j["gpus"][0]["channels"][0]["channel_type"] = "nvlink"; },
       "gpus[0].channels[0].channel_type: 'nvlink'"},
  };
  for (const Case& c : cases) {
    auto r = ir::mscclpp::readPlan(mutate(planFile("allreduce_2_simple.json"), c.f), "bad.json");
    EXPECT_FALSE(r.plan);
    ASSERT_FALSE(r.diagnostics.empty());
    bool found = false;
    for (const auto& d : r.diagnostics.items())
      found = found || d.message.find(c.where) != std::string::npos;
    EXPECT_TRUE(found) << c.where << " not in " << r.diagnostics.items()[0].format();
  }
  auto syntax = ir::mscclpp::readPlan("{\n  \"name\": ,\n}", "s.json");
  ASSERT_FALSE(syntax.diagnostics.empty());
  EXPECT_EQ(syntax.diagnostics.items()[0].loc.line, 2);
}

TEST(PlanVerifier, CorrectPlansAreProven) {
  for (const char* f : {"allreduce_2_simple.json", "allgather_2_ll.json"}) {
    SCOPED_TRACE(f);
    PlanReport rep;
    EXPECT_TRUE(codes(planFile(f), &rep).empty());
    EXPECT_TRUE(rep.semanticsChecked);
    // At another chunk size too (threadblock groups slice unevenly).
    auto r = ir::mscclpp::readPlan(planFile(f), f);
    for (int units : {1, 3, 7}) {
      PlanOptions o;
      o.unitsPerChunk = units;
      PlanReport at = verifyPlan(*r.plan, f, o);
      EXPECT_TRUE(at.correct()) << units << ": " << at.diagnostics.items()[0].format();
    }
  }
}

TEST(PlanVerifier, AMissingWaitIsARace) {
  // Rank 0 no longer waits before its reduce: its second wait takes rank
  // 1's first signal, so its get reads what rank 1's reduce may still write.
  auto text = mutate(planFile("allreduce_2_simple.json"), [](json& j) { ops(j, 0, 0).erase(1); });
  auto got = codes(text);
  EXPECT_NE(std::find(got.begin(), got.end(), "E705"), got.end());
}

TEST(PlanVerifier, AMissingNopAfterAWaitIsARace) {
  // The wait's edge reaches the block's other threads only at a nop.
  auto text = mutate(planFile("allreduce_2_simple.json"), [](json& j) { ops(j, 1, 0).erase(7); });
  auto got = codes(text);
  EXPECT_NE(std::find(got.begin(), got.end(), "E705"), got.end());
}

TEST(PlanVerifier, AWaitWithoutSignalIsADeadlockNamingTheOp) {
  auto text = mutate(planFile("allreduce_2_simple.json"), [](json& j) {
    ops(j, 0, 0).push_back({{"name", "wait"}, {"channel_ids", {0}}, {"channel_type", "memory"}});
  });
  PlanReport rep;
  auto got = codes(text, &rep);
  ASSERT_EQ(got, std::vector<std::string>{"E704"});
  const Diagnostic& d = rep.diagnostics.items()[0];
  EXPECT_EQ(d.loc.rank, 0);
  EXPECT_EQ(d.loc.tb, 0);
  EXPECT_EQ(d.loc.step, 9);
  EXPECT_NE(d.message.find("a signal on memory channel 0 from rank 1"), std::string::npos)
      << d.message;
}

TEST(PlanVerifier, PacketsNobodyWritesAreADeadlock) {
  auto text = mutate(planFile("allgather_2_ll.json"), [](json& j) {
    ops(j, 1, 2)[0]["src_buff"][0]["index"] = 1;  // its own chunk's slot: nobody writes there
  });
  auto got = codes(text);
  EXPECT_NE(std::find(got.begin(), got.end(), "E704"), got.end());
}

TEST(PlanVerifier, AWrongChunkIsAWrongResultNamingIt) {
  auto text = mutate(planFile("allreduce_2_simple.json"), [](json& j) {
    ops(j, 1, 0)[3]["src_buff"][1]["index"] = 0;  // sums the peer's chunk 0 into chunk 1
  });
  PlanReport rep;
  auto got = codes(text, &rep);
  ASSERT_FALSE(got.empty());
  bool named = false;
  for (const auto& d : rep.diagnostics.items())
    named = named || (d.id() == std::string("E301") &&
                      d.message.find("output chunk 1") != std::string::npos &&
                      d.message.find("rank 0 input chunk 0") != std::string::npos);
  EXPECT_TRUE(named) << rep.diagnostics.items()[0].format();
  // Located at the op that wrote the chunk last: the wrong rre.
  bool located = false;
  for (const auto& d : rep.diagnostics.items())
    located = located || (d.id() == std::string("E301") && d.loc.rank == 1 && d.loc.tb == 0 &&
                          d.loc.step == 3);
  EXPECT_TRUE(located);
}

TEST(PlanVerifier, StructureAndLimits) {
  // A remote buffer on the wrong rank's list, an unknown channel, a
  // reduce_op the executor ignores, too many ops.
  auto text = mutate(planFile("allreduce_2_simple.json"),
                     [](json& j) { ops(j, 0, 0)[3]["reduce_op"] = "max"; });
  auto got = codes(text);
  EXPECT_EQ(got, std::vector<std::string>{"W707"});
  text = mutate(planFile("allreduce_2_simple.json"),
                [](json& j) { ops(j, 0, 0)[8]["channel_ids"] = {3}; });
  got = codes(text);
  EXPECT_EQ(got, std::vector<std::string>{"E703"});
  text = mutate(planFile("allreduce_2_simple.json"), [](json& j) {
    for (int i = 0; i < 60; ++i) ops(j, 1, 0).push_back({{"name", "nop"}});
  });
  got = codes(text);
  EXPECT_EQ(got, std::vector<std::string>{"W706"});  // 69 operations: the executor refuses
  text = mutate(planFile("allreduce_2_simple.json"), [](json& j) {
    j["gpus"][1]["remote_buffers"][0]["access_channel_types"] = {"port"};
  });
  got = codes(text);
  EXPECT_NE(std::find(got.begin(), got.end(), "E703"), got.end());
}

TEST(PlanVerifier, BarriersAndSemaphoresOrderThreadblocks) {
  // One rank, two threadblocks: tb 0 copies its input to scratch, tb 1
  // copies scratch back over it; a barrier (or a semaphore) orders them.
  auto one = [](bool barrier, bool semaphore) {
    json copyIn = {{"name", "copy"},
                   {"src_buff", {{{"type", "i"}, {"index", 0}, {"size", 1}}}},
                   {"dst_buff", {{{"type", "s"}, {"index", 0}, {"size", 1}}}}};
    json copyOut = {{"name", "copy"},
                    {"src_buff", {{{"type", "s"}, {"index", 0}, {"size", 1}}}},
                    {"dst_buff", {{{"type", "o"}, {"index", 0}, {"size", 1}}}}};
    json bar = {{"name", "barrier"}, {"barrier_id", 3}, {"num_threadblocks", 2}};
    json tb0 = {{"id", 0}, {"ops", {copyIn}}, {"channels", json::array()}};
    json tb1 = {{"id", 1}, {"ops", json::array()}, {"channels", json::array()}};
    if (barrier) {
      tb0["ops"].push_back(bar);
      tb1["ops"].push_back(bar);
    }
    if (semaphore) {
      tb0["ops"].push_back({{"name", "nop"}});
      tb0["ops"].push_back({{"name", "sem_release"}, {"semaphore_ids", {0}}});
      tb1["ops"].push_back({{"name", "sem_acquire"}, {"semaphore_ids", {0}}});
      tb1["ops"].push_back({{"name", "nop"}});
    }
    tb1["ops"].push_back(copyOut);
    json g = {{"id", 0},
              {"input_chunks", 1},
              {"output_chunks", 1},
              {"scratch_chunks", 1},
              {"threadblocks", {tb0, tb1}},
              {"channels", json::array()},
              {"remote_buffers", json::array()},
              {"semaphores", {{{"init_value", 0}}}}};
    json p = {{"name", "one"},
              {"collective", "allreduce"},
              {"protocol", "Simple"},
              {"inplace", false},
              {"gpus", {g}}};
    return codes(p.dump());
  };
  EXPECT_TRUE(one(true, false).empty());
  EXPECT_TRUE(one(false, true).empty());
  auto unordered = one(false, false);
  EXPECT_NE(std::find(unordered.begin(), unordered.end(), "E705"), unordered.end());
}

TEST(PlanWriter, EveryProductionFileBecomesAPlanThatProves) {
  // Two-sided MSCCL algorithms as one-sided plans (a slot per message, a
  // semaphore per cross-threadblock dependency): the plan verifier proves
  // each, independently of the MSCCL verifier that proved the file.
  auto files = chorus::testing::productionFiles();
  ASSERT_FALSE(files.empty());
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    ir::Algorithm a = chorus::testing::mustRead(f);
    Plan p = ir::mscclpp::planFromAlgorithm(a);
    const std::string text = ir::mscclpp::writePlan(p);
    PlanReport rep;
    (void)codes(text, &rep);
    // Proven, and inside every limit of MSCCL++'s loader and executor (no
    // W706: 64 operations per threadblock, channels, buffers, semaphores)
    // and using nothing it ignores (W707).
    for (const auto& d : rep.diagnostics.items())
      EXPECT_EQ(d.severity, Severity::kNote) << d.format();
    EXPECT_TRUE(rep.semanticsChecked);
    // And it reads back as written.
    EXPECT_EQ(ir::mscclpp::writePlan(read(text)), text);
  }
}

TEST(PlanWriter, EveryBuiltInBecomesAPlanThatProves) {
  // The built-ins (ring, halving-doubling, recursive doubling, chain,
  // pairwise and direct forms) at rank counts that are and are not powers
  // of two: allreduce, allgather, reducescatter and alltoall proven whole,
  // the rooted ones run for deadlocks and races (N308).
  int proven = 0, checked = 0;
  for (const auto& info : algorithms::classicAlgorithms())
    for (int n : {2, 3, 4, 5}) {
      auto a = algorithms::makeClassic(info.name, n);
      if (!a.isOk()) continue;  // not for this many ranks
      ++checked;
      SCOPED_TRACE(info.name + " on " + std::to_string(n));
      PlanReport rep;
      (void)codes(ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(a.value())), &rep);
      for (const auto& d : rep.diagnostics.items())
        EXPECT_EQ(d.severity, Severity::kNote) << d.format();
      if (rep.correct() && rep.semanticsChecked) ++proven;
    }
  EXPECT_GE(checked, 40);
  EXPECT_GE(proven, 25);  // the four collectives with a post-condition
}

TEST(PlanWriter, AWrongAlgorithmMakesAWrongPlan) {
  // The writer translates, it does not repair: a file whose receive lands
  // in the wrong chunk gives a plan the plan verifier rejects.
  ir::Algorithm a = chorus::testing::mustRead(chorus::testing::productionFiles().front());
  bool mutated = false;
  for (auto& tb : a.ranks[1].tbs)
    for (auto& s : tb.steps)
      if (!mutated && ir::receives(s.type) && ir::writesDst(s.type)) {
        s.dstOff = (s.dstOff + 1) % a.ranks[1].chunks(s.dstBuf);
        mutated = true;
      }
  ASSERT_TRUE(mutated);
  auto got = codes(ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(a)));
  bool wrong = false;
  for (const auto& c : got) wrong = wrong || c[0] == 'E';
  EXPECT_TRUE(wrong);
}

}  // namespace plan_test
}  // namespace chorus::verify
