// docs/dsl.md shows code from files CI compiles (examples/dsl/, the
// registered programs): every statement of every C++ snippet must still be
// in one of them, so the tutorial cannot drift from code that builds and
// runs. Comments and whitespace do not count; a snippet may leave lines out.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/support/files.h"

namespace chorus {
namespace {

// Code without // comments and without any whitespace.
std::string normalized(const std::string& text) {
  std::string out;
  bool comment = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n') comment = false;
    if (!comment && c == '/' && i + 1 < text.size() && text[i + 1] == '/') comment = true;
    if (comment || c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    out += c;
  }
  return out;
}

std::vector<std::string> cppSnippets(const std::string& markdown) {
  std::vector<std::string> out;
  const std::string open = "```cpp\n", close = "```";
  for (size_t at = markdown.find(open); at != std::string::npos; at = markdown.find(open, at)) {
    size_t start = at + open.size(), end = markdown.find(close, start);
    if (end == std::string::npos) break;
    out.push_back(markdown.substr(start, end - start));
    at = end + close.size();
  }
  return out;
}

TEST(Docs, EveryDslSnippetIsCompiledCode) {
  std::string sources;
  for (const char* dir : {"examples/dsl", "src/lang/programs"})
    for (const std::string& f : testing::sourceFiles(dir, ".cc"))
      sources += normalized(testing::readText(f)) + "\n";
  std::vector<std::string> snippets =
      cppSnippets(testing::readText(std::string(CHORUS_SOURCE_DIR) + "/docs/dsl.md"));
  ASSERT_GE(snippets.size(), 5u);
  for (const std::string& snippet : snippets) {
    // Statements, split where C++ ends them; braces alone carry nothing.
    std::string code = normalized(snippet), piece;
    for (char c : code + ";") {
      if (c != ';' && c != '{' && c != '}') {
        piece += c;
        continue;
      }
      if (!piece.empty()) {
        EXPECT_NE(sources.find(piece), std::string::npos)
            << "docs/dsl.md has code that no compiled file has: " << piece << "\nin:\n"
            << snippet;
      }
      piece.clear();
    }
  }
}

}  // namespace
}  // namespace chorus
