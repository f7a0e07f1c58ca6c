// The property every algorithm reader's fuzz target checks on an input that
// parses (fuzz_verify: MSCCL XML, fuzz_json: Chorus JSON): writing it and
// reading it back, as XML and as JSON, gives the same IR, and the verifier's
// verdict does not change. A violation aborts, which libFuzzer reports.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "ir/json_io.h"
#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "verify/verifier.h"

namespace chorus::fuzz {

inline void checkRoundTripAndVerdict(const ir::Algorithm& a) {
  verify::Report rep = verify::verifyAlgorithm(a);
  ir::ReadResult xml = ir::readXml(ir::writeXml(a), "again.xml");
  ir::ReadResult json = ir::readJson(ir::writeJson(a), "again.json");
  if (!xml.algorithm || !(*xml.algorithm == a) || !json.algorithm || !(*json.algorithm == a)) {
    std::fprintf(stderr, "round trip changed the algorithm\n");
    std::abort();
  }
  if (verify::verifyAlgorithm(*xml.algorithm).correct() != rep.correct() ||
      verify::verifyAlgorithm(*json.algorithm).correct() != rep.correct()) {
    std::fprintf(stderr, "round trip changed the verdict\n");
    std::abort();
  }
}

}  // namespace chorus::fuzz
