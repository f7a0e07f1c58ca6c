#include "core/diagnostic.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/status.h"

namespace chorus {
namespace {

TEST(Diagnostics, CodesAreUniqueAndStable) {
  std::set<std::string> ids, slugs;
  for (const auto& d : allDiagnostics()) {
    EXPECT_TRUE(ids.insert(d.id).second) << d.id;
    EXPECT_TRUE(slugs.insert(d.slug).second) << d.slug;
    EXPECT_EQ(diagCodeFromId(d.id), d.code);
    EXPECT_EQ(diagCodeFromId(d.slug), d.code);
    // The letter says the default severity.
    char want = d.severity == Severity::kError ? 'E' : d.severity == Severity::kWarning ? 'W' : 'N';
    EXPECT_EQ(d.id[0], want) << d.id;
  }
  // A few codes other tools and docs rely on.
  EXPECT_STREQ(diagInfo(DiagCode::kOffsetRange).id, "E110");
  EXPECT_STREQ(diagInfo(DiagCode::kDeadlock).id, "E204");
  EXPECT_STREQ(diagInfo(DiagCode::kRace).id, "E401");
}

TEST(Diagnostics, FormatNamesFileLineAndSite) {
  DiagnosticList list;
  Location l;
  l.file = "a.xml";
  l.line = 12;
  l.column = 5;
  l.rank = 3;
  l.tb = 1;
  l.step = 7;
  list.add(DiagCode::kUnmatchedRecv, l, "no send");
  EXPECT_EQ(list.items()[0].format(), "a.xml:12:5: error[E202]: rank 3 tb 1 step 7: no send");
  EXPECT_TRUE(list.hasErrors());
}

TEST(Diagnostics, SortIsDeterministicAndPromotionWorks) {
  DiagnosticList list;
  Location a, b;
  a.rank = 2;
  b.rank = 1;
  list.add(DiagCode::kLimitCount, a, "x");
  list.add(DiagCode::kRace, b, "y");
  list.sort();
  EXPECT_EQ(list.items()[0].code, DiagCode::kRace);
  EXPECT_EQ(list.count(Severity::kWarning), 1u);
  list.promoteWarnings([](DiagCode c) { return c == DiagCode::kLimitCount; });
  EXPECT_EQ(list.count(Severity::kWarning), 0u);
  EXPECT_EQ(list.count(Severity::kError), 2u);
}

TEST(Status, ResultCarriesValueOrError) {
  Result<int> ok(5);
  EXPECT_TRUE(ok.isOk());
  EXPECT_EQ(ok.value(), 5);
  Result<int> bad(Status(StatusCode::kNotFound, "no such file 'x'"));
  EXPECT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().toString(), "not found: no such file 'x'");
  auto f = [](bool fail) -> Status {
    CHORUS_RETURN_IF_ERROR(fail ? Status(StatusCode::kIoError, "disk") : Status::ok());
    return Status::ok();
  };
  EXPECT_EQ(f(true).code(), StatusCode::kIoError);
  EXPECT_TRUE(f(false).isOk());
}

}  // namespace
}  // namespace chorus
