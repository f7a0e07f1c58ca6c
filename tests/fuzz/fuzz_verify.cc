// libFuzzer target for the MSCCL XML reader and the verifier (docs/testing.md
// says how to run it): no crash, no sanitizer report, every input that
// parses round-trips with the same verdict (roundtrip.h), and reading it one
// <gpu> at a time (ir::ReadOptions::chunkedBytes, what large files get)
// gives what reading it whole gives.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>

#include "tests/fuzz/roundtrip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::ir::ReadOptions whole, byGpu;
  whole.chunkedBytes = std::numeric_limits<size_t>::max();
  byGpu.chunkedBytes = 0;
  chorus::ir::ReadResult r = chorus::ir::readXml(text, "fuzz.xml", whole);
  chorus::ir::ReadResult g = chorus::ir::readXml(text, "fuzz.xml", byGpu);
  bool same = r.algorithm.has_value() == g.algorithm.has_value() &&
              r.diagnostics.size() == g.diagnostics.size() &&
              (!r.algorithm || *r.algorithm == *g.algorithm);
  for (size_t i = 0; same && i < r.diagnostics.size(); ++i)
    same = r.diagnostics.items()[i].format() == g.diagnostics.items()[i].format();
  if (!same) {
    std::fprintf(stderr, "read one <gpu> at a time, the file reads differently\n");
    std::abort();
  }
  if (r.algorithm) chorus::fuzz::checkRoundTripAndVerdict(*r.algorithm);
  return 0;
}
