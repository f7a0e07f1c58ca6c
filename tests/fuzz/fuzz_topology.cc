// libFuzzer target for the topology readers: the JSON topology format and
// NCCL's topology XML (the input's first byte picks the reader and, for
// NCCL's, the number of boxes). Beyond "no crash, no sanitizer report":
// what parses writes as JSON that reads back and writes identically.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "topo/json.h"
#include "topo/nccl_xml.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool nccl = (data[0] & 1) != 0;
  const int boxes = 1 + (data[0] >> 1) % 4;
  auto t = nccl ? chorus::topo::parseNcclTopology(text, "fuzz.xml", boxes)
                : chorus::topo::parseTopology(text, "fuzz.json");
  if (!t.isOk()) return 0;
  std::string once = chorus::topo::writeTopology(t.value());
  auto again = chorus::topo::parseTopology(once, "again.json");
  if (!again.isOk()) {
    std::fprintf(stderr, "written topology does not read back: %s\n",
                 again.status().message().c_str());
    std::abort();
  }
  if (chorus::topo::writeTopology(again.value()) != once) {
    std::fprintf(stderr, "topology changed on a round trip\n");
    std::abort();
  }
  return 0;
}
