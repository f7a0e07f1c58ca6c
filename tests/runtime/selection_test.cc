// Selection per docs/spec/IR.md section 7: eligibility rules one by one, first match
// in order, explanations for every candidate, loading from the environment
// with a broken file reported and skipped.
#include "runtime/plan/selection.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/files.h"

namespace chorus::runtime {
namespace {

std::string prod(const char* f) { return std::string(CHORUS_MSCCL_DIR) + "/" + f; }

SelectionRequest allreduce8(size_t bytes) {
  SelectionRequest r;
  r.collective = CollectiveKind::kAllReduce;
  r.nranks = 8;
  r.inplace = true;
  r.count = bytes / 4;
  return r;
}

TEST(Selection, ProductionTableChoosesBySize) {
  AlgorithmRegistry reg;
  for (const char* f : {"ap-1pass.xml", "ap2ll.xml", "ap4ll.xml", "r48ll.xml", "r48ll128.xml"})
    ASSERT_TRUE(reg.addFile(prod(f)).isOk()) << f;
  struct Want {
    size_t bytes;
    const char* file;  // nullptr: no file fits
  };
  // ap-1pass 0..32768, ap2ll 32769..40959, ap4ll 40960..266239, r48ll
  // 266240..2078719, r48ll128 2078720..20971520 (and count divisibility).
  for (Want w : {Want{4096, "ap-1pass.xml"}, Want{40960, "ap4ll.xml"}, Want{1 << 20, "r48ll.xml"},
                 Want{8 << 20, "r48ll128.xml"}, Want{64 << 20, nullptr}}) {
    std::vector<std::string> why;
    auto va = reg.select(allreduce8(w.bytes), &why).value();
    ASSERT_EQ(why.size(), 5u);
    if (w.file == nullptr) {
      EXPECT_EQ(va, nullptr);
      EXPECT_NE(why[4].find("above its maxBytes 20971520"), std::string::npos) << why[4];
      continue;
    }
    ASSERT_NE(va, nullptr) << w.bytes;
    bool found = false;
    for (const std::string& line : why)
      if (line.find(w.file) != std::string::npos) {
        EXPECT_NE(line.find(": chosen"), std::string::npos) << line;
        found = true;
      }
    EXPECT_TRUE(found);
  }
}

TEST(Selection, EachRuleExplains) {
  auto va = loadVerifiedFile(prod("ap4ll.xml"));
  ASSERT_TRUE(va.isOk());
  const VerifiedAlgorithm& a = *va.value();
  SelectionRequest r = allreduce8(65536);
  EXPECT_EQ(ineligibility(a, r), "");
  SelectionRequest c = r;
  c.collective = CollectiveKind::kAllGather;
  EXPECT_NE(ineligibility(a, c).find("it is allreduce"), std::string::npos);
  c = r;
  c.nranks = 4;
  EXPECT_NE(ineligibility(a, c).find("for 8 ranks"), std::string::npos);
  c = r;
  c.inplace = false;
  EXPECT_NE(ineligibility(a, c).find("out-of-place"), std::string::npos);
  c = r;
  c.count += 1;
  EXPECT_NE(ineligibility(a, c).find("not a multiple"), std::string::npos);
  c = r;
  c.count = 256;
  EXPECT_NE(ineligibility(a, c).find("below its minBytes 40960"), std::string::npos);
  EXPECT_EQ(ineligibility(a, c, /*sizeRange=*/false), "");  // explicit use ignores the range
}

TEST(Selection, EnvironmentLoadsDirectoriesAndListsAndSkipsBrokenFiles) {
  auto dir = std::filesystem::temp_directory_path() / "chorus_selection_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(prod("ap4ll.xml"), dir / "b_ap4ll.xml");
  std::ofstream(dir / "a_broken.xml") << "<algo name='x' proto='LL'";
  std::ofstream(dir / "notes.txt") << "not an algorithm";
  setenv("CHORUS_ALGO_DIR", dir.c_str(), 1);
  std::string list = prod("r48ll.xml") + ":" + prod("r48ll128.xml");
  setenv("MSCCL_XML_FILES", list.c_str(), 1);
  unsetenv("MSCCL_ALGO_DIR");
  AlgorithmRegistry reg;
  auto errors = reg.loadFromEnvironment();
  unsetenv("CHORUS_ALGO_DIR");
  unsetenv("MSCCL_XML_FILES");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("a_broken.xml"), std::string::npos) << errors[0];
  EXPECT_EQ(reg.size(), 3u);
  std::vector<std::string> why;
  EXPECT_NE(reg.select(allreduce8(1 << 20), &why).value(), nullptr);
  ASSERT_EQ(why.size(), 3u);
  EXPECT_NE(why[0].find("b_ap4ll.xml: not eligible"), std::string::npos) << why[0];
  EXPECT_NE(why[1].find("r48ll.xml: chosen"), std::string::npos) << why[1];
  EXPECT_NE(why[2].find("not considered"), std::string::npos) << why[2];
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace chorus::runtime
