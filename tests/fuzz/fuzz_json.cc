// libFuzzer target for the Chorus JSON algorithm reader and the verifier:
// no crash, no sanitizer report, and every input that parses round-trips
// with the same verdict (roundtrip.h).
#include <cstdint>
#include <string_view>

#include "tests/fuzz/roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::ir::ReadResult r = chorus::ir::readJson(text, "fuzz.json");
  if (r.algorithm) chorus::fuzz::checkRoundTripAndVerdict(*r.algorithm);
  return 0;
}
