// libFuzzer target for the postcondition JSON reader (custom collectives,
// `--spec`): no crash, no sanitizer report, and what parses writes as text
// that reads back and writes identically.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "verify/collective.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::DiagnosticList diags;
  auto pc = chorus::verify::parsePostCondition(text, "fuzz.spec.json", diags);
  if (!pc) return 0;
  std::string once = chorus::verify::writePostCondition(*pc);
  chorus::DiagnosticList again;
  auto back = chorus::verify::parsePostCondition(once, "again.spec.json", again);
  if (!back || chorus::verify::writePostCondition(*back) != once) {
    std::fprintf(stderr, "postcondition changed on a round trip\n");
    std::abort();
  }
  return 0;
}
