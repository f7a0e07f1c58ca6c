// libFuzzer target for the MSCCL XML reader and the verifier (docs/testing.md
// says how to run it): no crash, no sanitizer report, and every input that
// parses round-trips with the same verdict (roundtrip.h).
#include <cstdint>
#include <string_view>

#include "tests/fuzz/roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::ir::ReadResult r = chorus::ir::readXml(text, "fuzz.xml");
  if (r.algorithm) chorus::fuzz::checkRoundTripAndVerdict(*r.algorithm);
  return 0;
}
