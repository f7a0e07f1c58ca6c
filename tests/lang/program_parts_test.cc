// Compact program files read for one rank (docs/scale.md): each rank's part
// is that rank of the whole expansion, at any rank count, and the registry
// serves a file past CHORUS_PROVE_RANKS to processes as parts.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "compiler/program_file.h"
#include "ir/json_io.h"
#include "ir/xml_reader.h"
#include "runtime/plan/selection.h"
#include "tests/support/parts.h"

namespace chorus {
namespace {

// Readers expand program files only when told how (compiler::readOptions).
class ProgramParts : public ::testing::Test {};

TEST_F(ProgramParts, AReaderNotGivenTheCompilerRefusesProgramFiles) {
  ir::ReadResult r = ir::readXml(R"(<program name="ring_allreduce" ranks="4"/>)", "p.xml");
  ASSERT_FALSE(r.algorithm.has_value());
  EXPECT_NE(r.diagnostics.items().front().format().find("expanding it needs the Chorus compiler"),
            std::string::npos)
      << r.diagnostics.items().front().format();
  EXPECT_TRUE(
      ir::readXml(R"(<program name="ring_allreduce" ranks="4"/>)", "p.xml", compiler::readOptions())
          .algorithm.has_value());
}

TEST_F(ProgramParts, EachRanksPartIsItsRankOfTheExpansion) {
  const std::vector<std::string> files = {
      R"(<program name="ring_allreduce" ranks="12" instances="2" minBytes="64" maxBytes="4096"/>)",
      R"(<program name="hierarchical_allreduce" ranks="12" gpus-per-node="4" instances="2"/>)",
      R"(<program name="binomial_gather" ranks="7" root="3"/>)",
      R"(<program name="ring_broadcast" ranks="5" root="2" chunk-factor="3"/>)",
      R"(<program name="allpairs_alltoall" ranks="6" inplace="1"/>)",
      R"(<program name="threestep_alltoall" ranks="8" gpus-per-node="2" channels="2"/>)",
  };
  int compared = 0;
  for (const std::string& text : files) {
    SCOPED_TRACE(text);
    ir::ReadResult whole = ir::readXml(text, "f.xml", compiler::readOptions());
    ASSERT_TRUE(whole.algorithm.has_value());
    EXPECT_EQ(whole.part, -1);
    const ir::Algorithm& w = *whole.algorithm;
    for (int r = 0; r < w.ngpus; ++r) {
      ir::ReadResult part = ir::readXml(text, "f.xml", compiler::readOptions(r));
      ASSERT_TRUE(part.algorithm.has_value()) << "rank " << r;
      EXPECT_EQ(part.part, r);
      EXPECT_EQ(part.root, isRooted(w.collective) ? whole.root : -1);
      EXPECT_TRUE(chorus::testing::isRanksPart(*part.algorithm, w, r, /*otherScratch=*/false));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 12 + 12 + 7 + 5 + 6 + 8);
  ir::ReadResult root = ir::readXml(R"(<program name="binomial_gather" ranks="7" root="3"/>)", "f",
                                    compiler::readOptions());
  EXPECT_EQ(root.root, 3);
}

TEST_F(ProgramParts, APartBuildsPastWholeExpansionsAndBadRanksAreRefused) {
  const std::string big = R"(<program name="ring_allreduce" ranks="16384"/>)";
  ir::ReadResult whole = ir::readXml(big, "big.xml", compiler::readOptions());
  EXPECT_FALSE(whole.algorithm.has_value());  // 4096 ranks at most, whole
  ir::ReadResult part = ir::readXml(big, "big.xml", compiler::readOptions(16383));
  ASSERT_TRUE(part.algorithm.has_value()) << part.diagnostics.items().front().format();
  EXPECT_EQ(part.algorithm->ngpus, 16384);
  EXPECT_EQ(part.algorithm->ranks[16383].tbs.size(), 1u);
  EXPECT_EQ(part.algorithm->ranks[16383].tbs[0].steps.size(), 2u * 16384 - 1);
  ir::ReadResult bad = ir::readXml(R"(<program name="ring_allreduce" ranks="4"/>)", "b.xml",
                                   compiler::readOptions(4));
  ASSERT_FALSE(bad.algorithm.has_value());
  EXPECT_NE(bad.diagnostics.items().front().format().find(
                "b.xml:1:1: error[E004]: rank 4 is not a rank of this 4-rank program"),
            std::string::npos)
      << bad.diagnostics.items().front().format();
}

// The registry keeps a program file past CHORUS_PROVE_RANKS unexpanded:
// threads cannot run it, a process gets its own rank's part, built once.
TEST_F(ProgramParts, TheRegistryServesProcessesParts) {
  auto dir = std::filesystem::temp_directory_path() / "chorus-program-parts-test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "ring6.xml").string();
  std::ofstream(path) << R"(<program name="ring_allreduce" ranks="6"/>)"
                      << "\n";
  runtime::AlgorithmRegistry reg(&compiler::programFiles());
  ASSERT_TRUE(reg.addFile(path, /*proveRanks=*/0).isOk());
  runtime::SelectionRequest req;
  req.nranks = 6;
  req.count = 6 * 16;
  std::vector<std::string> why;
  EXPECT_EQ(reg.select(req, &why).value(), nullptr);
  ASSERT_EQ(why.size(), 1u);
  EXPECT_NE(why[0].find("past CHORUS_PROVE_RANKS"), std::string::npos) << why[0];
  for (int r : {0, 5, 3}) {
    req.focus = r;
    why.clear();
    auto va = reg.select(req, &why).value();
    ASSERT_NE(va, nullptr);
    EXPECT_EQ(va->partRank(), r);
    EXPECT_NE(va->basis().find("family_test"), std::string::npos);
    EXPECT_EQ(va->algo().ranks[static_cast<size_t>(r)].tbs.size(), 1u);
    EXPECT_EQ(reg.select(req, nullptr).value(), va);  // built once
    EXPECT_NE(why[0].find("chosen, rank " + std::to_string(r) + "'s part"), std::string::npos);
  }
  // A rank whose part cannot be built (the file changed since it was
  // registered) fails the call: the others chose the file.
  std::ofstream(path) << R"(<program name="ring_allgather" ranks="6"/>)"
                      << "\n";
  req.focus = 2;
  auto changed = reg.select(req, nullptr);
  ASSERT_FALSE(changed.isOk());
  EXPECT_NE(changed.status().message().find("rank 2 cannot build its part of"), std::string::npos)
      << changed.status().message();
  EXPECT_NE(changed.status().message().find("changed since it was registered"), std::string::npos);
  std::ofstream(path) << R"(<program name="ring_allreduce" ranks="6"/>)"
                      << "\n";
  // At or under the bound the file is read and verified whole, as any file.
  runtime::AlgorithmRegistry whole(&compiler::programFiles());
  ASSERT_TRUE(whole.addFile(path, /*proveRanks=*/6).isOk());
  req.focus = -1;
  auto va = whole.select(req, nullptr).value();
  ASSERT_NE(va, nullptr);
  EXPECT_EQ(va->partRank(), -1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chorus
