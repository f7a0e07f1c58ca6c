// The must-fail corpus (tests/data/bad): each file declares, in a comment
// `<!-- expect: CODE ... -->`, exactly the diagnostic codes (errors and
// warnings) the verifier must report. Together the files cover every error
// code a file can produce.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "ir/json_io.h"
#include "tests/support/files.h"
#include "verify/verifier.h"

namespace chorus::verify {
namespace {

std::set<std::string> expectedCodes(const std::string& text) {
  std::set<std::string> out;
  size_t from = text.find("expect:");
  if (from == std::string::npos) return out;
  from += 7;
  size_t to = text.find("-->", from);
  if (to == std::string::npos) return out;
  std::istringstream in(text.substr(from, to - from));
  for (std::string code; in >> code;) out.insert(code);
  return out;
}

std::set<std::string> reportedCodes(const std::string& path) {
  ir::ReadResult rr = ir::readAlgorithmFile(path);
  DiagnosticList all = rr.diagnostics;
  if (rr.algorithm) all.append(verifyAlgorithm(*rr.algorithm).diagnostics);
  std::set<std::string> out;
  for (const auto& d : all.items())
    if (d.severity != Severity::kNote) out.insert(d.id());
  return out;
}

TEST(MustFail, EachFileReportsExactlyItsCodes) {
  auto files = chorus::testing::sourceFiles("tests/data/bad", ".xml");
  ASSERT_GE(files.size(), 30u);
  for (const auto& path : files) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    std::set<std::string> want = expectedCodes(chorus::testing::readText(path));
    ASSERT_FALSE(want.empty()) << "no expect: comment";
    EXPECT_EQ(reportedCodes(path), want);
  }
}

TEST(MustFail, CorpusCoversEveryFileErrorCode) {
  std::set<std::string> covered;
  for (const auto& path : chorus::testing::sourceFiles("tests/data/bad", ".xml"))
    for (const auto& c : expectedCodes(chorus::testing::readText(path))) covered.insert(c);
  // Codes that no algorithm file can produce have their own tests: E005 (I/O,
  // xml_test), E309 (post-condition files, spec_test), E6xx (programs of the
  // Chorus language, lang_test), E7xx (MSCCL++ plans, plan_test).
  const std::set<std::string> elsewhere = {"E005", "E309", "E601", "E602", "E701",
                                           "E703", "E704", "E705", "E708"};
  for (const auto& d : allDiagnostics()) {
    if (d.severity != Severity::kError || elsewhere.count(d.id)) continue;
    EXPECT_TRUE(covered.count(d.id)) << d.id << " (" << d.slug << ") has no must-fail file";
  }
}

TEST(MustFail, CorrectBasesVerify) {
  // Each must-fail file is a small mutation of one of these; they must pass,
  // so that the mutation is what fails.
  auto files = chorus::testing::sourceFiles("tests/data", ".xml");
  ASSERT_GE(files.size(), 6u);
  for (const auto& path : files) {
    SCOPED_TRACE(chorus::testing::baseName(path));
    EXPECT_TRUE(reportedCodes(path).empty());
  }
}

TEST(MustFail, DeadlockNamesTheCycle) {
  ir::Algorithm a = chorus::testing::mustRead(std::string(CHORUS_SOURCE_DIR) +
                                              "/tests/data/bad/e204_cross_rank_cycle.xml");
  Report rep = verifyAlgorithm(a);
  ASSERT_EQ(rep.diagnostics.size(), 1u);
  const std::string& m = rep.diagnostics.items()[0].message;
  for (const char* site : {"rank 0 tb 0 step 0 (r)", "rank 0 tb 0 step 1 (s)",
                           "rank 1 tb 0 step 0 (r)", "rank 1 tb 0 step 1 (s)"})
    EXPECT_NE(m.find(site), std::string::npos) << m;
}

TEST(MustFail, InPlaceOutputsAreNamedAsTheFileAddressesThem) {
  // In-place allreduce keeps its output in i: the message says i[0], not o[0].
  ir::Algorithm a = chorus::testing::mustRead(std::string(CHORUS_SOURCE_DIR) +
                                              "/tests/data/bad/e303_missing_contribution.xml");
  Report rep = verifyAlgorithm(a);
  ASSERT_FALSE(rep.diagnostics.empty());
  EXPECT_NE(rep.diagnostics.items()[0].message.find("output chunk i[0] holds in1[0]"),
            std::string::npos)
      << rep.diagnostics.items()[0].message;
}

TEST(MustFail, WrongResultNamesRankChunkAndContents) {
  ir::Algorithm a = chorus::testing::mustRead(std::string(CHORUS_SOURCE_DIR) +
                                              "/tests/data/bad/e301_swapped_offsets.xml");
  Report rep = verifyAlgorithm(a);
  ASSERT_FALSE(rep.diagnostics.empty());
  const Diagnostic& d = rep.diagnostics.items()[0];
  EXPECT_EQ(d.code, DiagCode::kWrongResult);
  EXPECT_EQ(d.loc.rank, 1);
  EXPECT_NE(d.message.find("o[0] holds in0[2]"), std::string::npos) << d.message;
  EXPECT_NE(d.message.find("should hold in0[1]"), std::string::npos) << d.message;
}

// A contribution counted 2^32 + 1 times is not counted once: doubling a
// chunk 32 times through scratch, then adding the input, must not wrap
// round to "holds in0[0] once" (the counts saturate).
TEST(MustFail, CountsDoNotWrapRound) {
  ir::Algorithm a;
  a.name = "doubling";
  a.ngpus = 1;
  a.collective = CollectiveKind::kAllReduce;
  a.collectiveName = "allreduce";
  a.inplace = false;
  a.outofplace = true;
  a.nchunksPerLoop = 1;
  ir::Rank r;
  r.inputChunks = r.outputChunks = 1;
  r.scratchChunks = 2;
  ir::Threadblock tb;
  auto step = [&](ir::StepType t, ir::Buffer sb, int so, ir::Buffer db, int d) {
    ir::Step st;
    st.type = t;
    st.srcBuf = sb;
    st.srcOff = so;
    st.dstBuf = db;
    st.dstOff = d;
    st.count = 1;
    tb.steps.push_back(st);
  };
  using B = ir::Buffer;
  step(ir::StepType::kCopy, B::kInput, 0, B::kScratch, 0);
  for (int i = 0; i < 32; ++i) {
    step(ir::StepType::kCopy, B::kScratch, 0, B::kScratch, 1);
    step(ir::StepType::kReduce, B::kScratch, 1, B::kScratch, 0);
  }
  step(ir::StepType::kCopy, B::kScratch, 0, B::kOutput, 0);
  step(ir::StepType::kReduce, B::kInput, 0, B::kOutput, 0);
  r.tbs.push_back(tb);
  a.ranks.push_back(r);
  Report rep = verifyAlgorithm(a);
  EXPECT_FALSE(rep.correct());
  bool counted = false;
  for (const Diagnostic& d : rep.diagnostics.items())
    counted = counted || d.code == DiagCode::kDuplicateContribution;
  EXPECT_TRUE(counted) << "expected E302 (counted more than once)";
}

}  // namespace
}  // namespace chorus::verify
