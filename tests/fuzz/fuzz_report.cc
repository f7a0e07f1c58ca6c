// libFuzzer target for what `chorus report --perf` reads (measured curves:
// chorus perf --csv, bench/peer_compare.sh) and for the page it makes.
// Beyond "no crash, no sanitizer report": every series read has points,
// each at a size of at least 1; the page's data element holds no '<' (so
// nothing in it can end or comment it out) and parses back to the data.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "report/report.h"

namespace {

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = chorus::report::parsePerfCsv(text, "fuzz.csv");
  if (!parsed.isOk()) return 0;
  for (const auto& s : parsed.value().series) {
    if (s.points.empty()) fail("a series without points");
    for (const auto& [bytes, busbw] : s.points)
      if (!(bytes >= 1)) fail("a point below one byte");
  }
  nlohmann::json d = chorus::report::reportData({}, {parsed.value()}, {});
  std::string html = chorus::report::renderHtml(d);
  const std::string open = "id=\"chorus-data\">";
  size_t from = html.find(open);
  if (from == std::string::npos) fail("no data element");
  from += open.size();
  size_t to = html.find("</script>", from);
  if (to == std::string::npos) fail("the data element does not end");
  std::string inner = html.substr(from, to - from);
  if (inner.find('<') != std::string::npos) fail("a '<' inside the data element");
  // Strings that are not UTF-8 are written with U+FFFD, as the page has them.
  auto want =
      nlohmann::json::parse(d.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  if (nlohmann::json::parse(inner) != want) fail("the data element does not read back");
  return 0;
}
