#include <gtest/gtest.h>

#include "ir/json_io.h"
#include "ir/xml_writer.h"
#include "tests/support/files.h"
#include "verify/verifier.h"

namespace chorus::ir {
namespace {

using chorus::testing::baseName;
using chorus::testing::mustRead;

TEST(Json, RoundTripsEveryProductionAndExampleFile) {
  auto files = chorus::testing::productionFiles();
  for (const auto& f : chorus::testing::sourceFiles("examples/algorithms", ".xml"))
    files.push_back(f);
  for (const std::string& path : files) {
    SCOPED_TRACE(baseName(path));
    Algorithm a = mustRead(path);
    ReadResult r = readJson(writeJson(a), "x.json");
    ASSERT_TRUE(r.algorithm);
    EXPECT_EQ(*r.algorithm, a);
    // JSON -> XML -> IR is the same IR too.
    ReadResult x = readXml(writeXml(*r.algorithm), "x.xml");
    ASSERT_TRUE(x.algorithm);
    EXPECT_EQ(*x.algorithm, a);
  }
}

TEST(Json, ErrorsNamePathsAndPositions) {
  Algorithm a = mustRead(std::string(CHORUS_SOURCE_DIR) + "/tests/data/good_pairs2.xml");
  std::string good = writeJson(a);

  ReadResult syntax = readJson("{\n  \"format\": \"chorus-algorithm\",\n  oops\n}", "s.json");
  ASSERT_TRUE(syntax.diagnostics.hasErrors());
  EXPECT_EQ(syntax.diagnostics.items()[0].code, DiagCode::kXmlSyntax);
  EXPECT_EQ(syntax.diagnostics.items()[0].loc.line, 3);

  // Found by fuzz_json: a number past double's range threw out of the reader.
  ReadResult huge = readJson("{\"coll\": 99999999999999e999999999999999999}", "h.json");
  ASSERT_TRUE(huge.diagnostics.hasErrors());
  EXPECT_EQ(huge.diagnostics.items()[0].code, DiagCode::kXmlSyntax);
  EXPECT_NE(huge.diagnostics.items()[0].message.find("number overflow"), std::string::npos)
      << huge.diagnostics.items()[0].format();

  std::string noCnt = good;
  size_t p = noCnt.find("\"cnt\": 1,");
  ASSERT_NE(p, std::string::npos);
  noCnt.erase(p, std::string("\"cnt\": 1,").size());
  ReadResult r = readJson(noCnt, "c.json");
  EXPECT_FALSE(r.algorithm);
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_EQ(r.diagnostics.items()[0].code, DiagCode::kMissingAttribute);
  EXPECT_NE(r.diagnostics.items()[0].message.find("ranks[0].tbs[0].steps[0]"), std::string::npos)
      << r.diagnostics.items()[0].format();

  std::string badType = good;
  p = badType.find("\"type\": \"s\"");
  ASSERT_NE(p, std::string::npos);
  badType.replace(p, 11, "\"type\": \"q\"");
  EXPECT_EQ(readJson(badType, "t.json").diagnostics.items()[0].code, DiagCode::kBadAttribute);

  EXPECT_TRUE(readJson("[]", "a.json").diagnostics.hasErrors());
  EXPECT_TRUE(readJson("{\"format\": \"other\"}", "f.json").diagnostics.hasErrors());
}

}  // namespace
}  // namespace chorus::ir
