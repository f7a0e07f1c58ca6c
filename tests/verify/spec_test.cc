// Custom collectives: without a specification only structure, matching and
// deadlock are checked (N308 says so); a post-condition file proves them.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/io.h"
#include "tests/support/files.h"
#include "verify/verifier.h"

namespace chorus::verify {
namespace {

const std::string kDir = std::string(CHORUS_SOURCE_DIR) + "/tests/data/custom/";

std::string writeTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("chorus_spec_test_" + name);
  EXPECT_TRUE(writeTextFile(text, path.string()).isOk());
  return path.string();
}

TEST(Spec, WithoutSpecOnlyStructureIsChecked) {
  ir::Algorithm a = chorus::testing::mustRead(kDir + "shift3.xml");
  Report r = verifyAlgorithm(a);
  EXPECT_TRUE(r.correct());
  EXPECT_FALSE(r.semanticsChecked);
  EXPECT_TRUE(r.diagnostics.contains(DiagCode::kSemanticsUnproven));
  // The MSCCL executor refuses collectives it does not know.
  EXPECT_TRUE(r.diagnostics.contains(DiagCode::kLimitAttributes));
  Options strict;
  strict.targetMscclExecutor = true;
  EXPECT_FALSE(verifyAlgorithm(a, strict).correct());
}

TEST(Spec, ASpecProvesIt) {
  DiagnosticList d;
  auto spec = readPostCondition(kDir + "shift3.spec.json", d);
  ASSERT_TRUE(spec) << (d.empty() ? "" : d.items()[0].format());
  Options o;
  o.spec = &*spec;
  Report r = verifyAlgorithm(chorus::testing::mustRead(kDir + "shift3.xml"), o);
  EXPECT_TRUE(r.correct());
  EXPECT_TRUE(r.semanticsChecked);
  EXPECT_TRUE(r.forms[0].proven);
}

TEST(Spec, AWrongAlgorithmFailsAgainstTheSpec) {
  DiagnosticList d;
  auto spec = readPostCondition(kDir + "shift3.spec.json", d);
  ASSERT_TRUE(spec);
  // Expect the other direction: rank r holds in_{r+1}.
  for (auto& e : spec->entries) e.holds = {{(e.rank + 1) % 3, 0}};
  Options o;
  o.spec = &*spec;
  Report r = verifyAlgorithm(chorus::testing::mustRead(kDir + "shift3.xml"), o);
  EXPECT_FALSE(r.correct());
  EXPECT_TRUE(r.diagnostics.contains(DiagCode::kWrongResult));
}

TEST(Spec, MalformedSpecFilesAreDiagnosed) {
  const char* bad[] = {
      "not json",
      "{}",
      R"({"collective": "shift", "input_chunks": 1, "output_chunks": 1})",
      R"({"collective": "shift", "input_chunks": 1, "output_chunks": 1, "postcondition": [{"rank": 0, "chunk": 5, "holds": []}]})",
      R"({"collective": "shift", "input_chunks": 1, "output_chunks": 1, "postcondition": [{"rank": 0, "chunk": 0, "holds": [[0, 3]]}]})",
      R"({"collective": "shift", "input_chunks": -1, "output_chunks": 1, "postcondition": []})",
      // Found by fuzz_postcondition: a rank past int's range was truncated.
      R"({"collective": "shift", "input_chunks": 1, "output_chunks": 1, "postcondition": [{"rank": 0, "chunk": 0, "holds": [[999999999999991, 0]]}]})",
  };
  int i = 0;
  for (const char* text : bad) {
    DiagnosticList d;
    auto spec = readPostCondition(writeTemp(std::to_string(i++) + ".json", text), d);
    EXPECT_FALSE(spec) << text;
    ASSERT_FALSE(d.empty()) << text;
    EXPECT_EQ(d.items()[0].code, DiagCode::kSpecInvalid) << text;
  }
  DiagnosticList d;
  EXPECT_FALSE(readPostCondition("/nonexistent.json", d));
  EXPECT_TRUE(d.contains(DiagCode::kSpecInvalid));
}

}  // namespace
}  // namespace chorus::verify
