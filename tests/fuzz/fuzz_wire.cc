// libFuzzer target for the wire decoders (docs/testing.md says how to run
// it): the bootstrap's frames, the unique id root's answer, the TCP transport's hello, and its
// frame stream fed to a link with one connection each way. Beyond "no crash, no sanitizer report":
// whatever decodes must encode back to the same bytes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/bootstrap/rendezvous.h"
#include "runtime/transport/tcp_transport.h"

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
  auto verdict = chorus::runtime::wire::decodeVerdict(bytes);
  if (verdict.isOk() && chorus::runtime::wire::encodeVerdict(verdict.value()) != bytes) {
    std::fprintf(stderr, "root verdict does not round-trip\n");
    std::abort();
  }
  auto tcpHello = chorus::runtime::tcpwire::decodeHello(bytes);
  if (tcpHello.isOk() && chorus::runtime::tcpwire::encodeHello(tcpHello.value()) != bytes) {
    std::fprintf(stderr, "TCP hello does not round-trip\n");
    std::abort();
  }
  chorus::runtime::Doorbell bell;
  auto links = chorus::runtime::TcpLinks::forTesting(1, 2, bell);
  auto in = links->connect(0, 0, 0, 1, 4, 256);
  auto out = links->connect(0, 0, 1, 0, 4, 256);
  // In two pieces, so frames also straddle calls.
  size_t half = size / 2;
  if (links->feedForTesting(0, data, half).isOk())
    (void)links->feedForTesting(0, data + half, size - half);
  size_t n = 0;
  while (in->receiver().tryPeek(&n) != nullptr) {
    if (n > 256) std::abort();
    in->receiver().release();
  }
  return 0;
}
