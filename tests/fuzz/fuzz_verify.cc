// libFuzzer target for the XML reader and the verifier (docs/testing.md says
// how to run it). Beyond "no crash, no sanitizer report", it checks two
// properties on every input that parses: writing and reading back gives the
// same IR (XML and JSON), and the verdict does not change.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "ir/json_io.h"
#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "verify/verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  chorus::ir::ReadResult r = chorus::ir::readXml(text, "fuzz.xml");
  if (!r.algorithm) return 0;
  const chorus::ir::Algorithm& a = *r.algorithm;
  chorus::verify::Report rep = chorus::verify::verifyAlgorithm(a);

  chorus::ir::ReadResult again = chorus::ir::readXml(chorus::ir::writeXml(a), "again.xml");
  chorus::ir::ReadResult json = chorus::ir::readJson(chorus::ir::writeJson(a), "again.json");
  if (!again.algorithm || !(*again.algorithm == a) || !json.algorithm || !(*json.algorithm == a)) {
    std::fprintf(stderr, "round trip changed the algorithm\n");
    std::abort();
  }
  if (chorus::verify::verifyAlgorithm(*again.algorithm).correct() != rep.correct()) {
    std::fprintf(stderr, "round trip changed the verdict\n");
    std::abort();
  }
  return 0;
}
