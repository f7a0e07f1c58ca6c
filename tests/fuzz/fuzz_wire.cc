// libFuzzer target for the bootstrap wire decoders (docs/testing.md says how
// to run it). Beyond "no crash, no sanitizer report": whatever decodes must
// encode back to the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "runtime/bootstrap.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto hello = chorus::runtime::wire::decodeHello(bytes);
  if (hello.isOk() && chorus::runtime::wire::encodeHello(hello.value()) != bytes) {
    std::fprintf(stderr, "hello does not round-trip\n");
    std::abort();
  }
  for (uint32_t n : {1u, 2u, 8u}) {
    auto blobs = chorus::runtime::wire::decodeBlobs(bytes, n);
    if (blobs.isOk() && chorus::runtime::wire::encodeBlobs(blobs.value()) != bytes) {
      std::fprintf(stderr, "blob list does not round-trip\n");
      std::abort();
    }
  }
  return 0;
}
