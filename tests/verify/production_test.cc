// The production MSCCL algorithms (../shared/msccl-algorithms/ndv4) verify
// with their expected collective, call form and shape, and the independent
// reference interpreter agrees that they compute their collective.
#include <gtest/gtest.h>

#include <map>

#include "ir/stats.h"
#include "tests/support/files.h"
#include "tests/support/reference_interpreter.h"
#include "verify/verifier.h"

namespace chorus::verify {
namespace {

struct Expected {
  CollectiveKind coll;
  bool inplace;
  int nchunks;
  ir::Protocol proto;
  int tbsPerRank;
  int maxStepsPerTb;
  size_t totalSteps;
};

const std::map<std::string, Expected>& expectations() {
  using P = ir::Protocol;
  using K = CollectiveKind;
  static const std::map<std::string, Expected> kTable = {
      {"a2a2ll.xml", {K::kAllToAll, false, 16, P::kLL, 28, 2, 240}},
      {"a2a4ll.xml", {K::kAllToAll, false, 32, P::kLL, 56, 2, 480}},
      {"ag-16m.xml", {K::kAllGather, true, 32, P::kSimple, 56, 1, 448}},
      {"ag-1k-512k.xml", {K::kAllGather, true, 16, P::kLL, 28, 1, 224}},
      {"ag-1m.xml", {K::kAllGather, true, 32, P::kLL, 56, 1, 448}},
      {"ag-2m.xml", {K::kAllGather, true, 32, P::kLL128, 56, 1, 448}},
      {"ag-32m-1g.xml", {K::kAllGather, true, 256, P::kSimple, 32, 8, 2048}},
      {"ag-4m.xml", {K::kAllGather, true, 32, P::kSimple, 56, 1, 448}},
      {"ag-8m.xml", {K::kAllGather, true, 32, P::kSimple, 56, 1, 448}},
      {"ap-1pass.xml", {K::kAllReduce, true, 32, P::kLL, 32, 20, 4896}},
      {"ap2ll.xml", {K::kAllReduce, true, 128, P::kLL, 16, 22, 2672}},
      {"ap4ll.xml", {K::kAllReduce, true, 256, P::kLL, 32, 22, 5344}},
      {"r48ll.xml", {K::kAllReduce, true, 64, P::kLL, 32, 4, 960}},
      {"r48ll128.xml", {K::kAllReduce, true, 64, P::kLL128, 32, 4, 960}},
  };
  return kTable;
}

TEST(Production, AllFourteenFilesArePresent) {
  std::vector<std::string> names;
  for (const auto& f : chorus::testing::productionFiles())
    names.push_back(chorus::testing::baseName(f));
  ASSERT_EQ(names.size(), expectations().size());
  for (const auto& n : names) EXPECT_TRUE(expectations().count(n)) << n;
}

TEST(Production, EveryFileVerifiesWithItsExpectedShape) {
  for (const std::string& path : chorus::testing::productionFiles()) {
    std::string name = chorus::testing::baseName(path);
    SCOPED_TRACE(name);
    ASSERT_TRUE(expectations().count(name));
    const Expected& e = expectations().at(name);
    ir::Algorithm a = chorus::testing::mustRead(path);
    Report rep = verifyAlgorithm(a);
    for (const auto& d : rep.diagnostics.items()) ADD_FAILURE() << d.format();
    EXPECT_TRUE(rep.correct());
    EXPECT_TRUE(rep.semanticsChecked);
    ASSERT_EQ(rep.forms.size(), 1u);
    EXPECT_EQ(rep.forms[0].inplace, e.inplace);
    EXPECT_TRUE(rep.forms[0].proven);
    EXPECT_EQ(a.collective, e.coll);
    EXPECT_EQ(a.ngpus, 8);
    EXPECT_EQ(a.nchunksPerLoop, e.nchunks);
    EXPECT_EQ(a.protocol, e.proto);
    ir::AlgorithmStats st = ir::computeStats(a);
    EXPECT_EQ(st.maxTbsPerRank, e.tbsPerRank);
    EXPECT_EQ(st.maxStepsPerTb, e.maxStepsPerTb);
    EXPECT_EQ(a.totalSteps(), e.totalSteps);
    // Strict MSCCL-executor mode accepts them too: they run there today.
    Options strict;
    strict.targetMscclExecutor = true;
    EXPECT_TRUE(verifyAlgorithm(a, strict).correct());
  }
}

TEST(Production, ReferenceInterpreterAgrees) {
  for (const std::string& path : chorus::testing::productionFiles()) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    ir::Algorithm a = chorus::testing::mustRead(path);
    for (bool inplace : {true, false}) {
      if (inplace ? !a.inplace : !a.outofplace) continue;
      for (uint64_t seed : {1u, 2u}) {
        auto r = chorus::testing::interpret(a, inplace, seed);
        EXPECT_EQ(r.outcome, chorus::testing::Outcome::kCorrect) << r.detail;
      }
    }
  }
}

TEST(Examples, EveryExampleVerifies) {
  auto files = chorus::testing::sourceFiles("examples/algorithms", ".xml");
  ASSERT_GE(files.size(), 3u);
  for (const auto& path : files) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    Report rep = verifyAlgorithm(chorus::testing::mustRead(path));
    for (const auto& d : rep.diagnostics.items()) ADD_FAILURE() << d.format();
    EXPECT_TRUE(rep.correct());
    EXPECT_TRUE(rep.semanticsChecked);
  }
}

TEST(Examples, BroadcastRootIsInferred) {
  Report rep = verifyAlgorithm(chorus::testing::mustRead(
      std::string(CHORUS_SOURCE_DIR) + "/examples/algorithms/chain_broadcast_4.xml"));
  EXPECT_TRUE(rep.correct());
  EXPECT_EQ(rep.root, 0);
}

}  // namespace
}  // namespace chorus::verify
