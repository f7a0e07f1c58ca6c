// docs/dsl.md, step 1: a ring allgather, written as the journey of each
// rank's block around the ring; prints verified MSCCL XML.
#include <chorus/gen.hpp>
#include <cstdio>

using namespace chorus::lang;

int main() {
  const int n = 4;
  Program p({.name = "my_ring_allgather", .collective = "allgather", .ranks = n});
  for (int r = 0; r < n; ++r) {
    Chunk c = p.chunk(r, kInput, 0);  // rank r's block
    c.copy(r, kOutput, r);            // its own place in r's output
    for (int step = 1; step < n; ++step) c = c.copy((r + step) % n, kOutput, r);
  }
  chorus::Generated g = chorus::generate(p);
  std::fputs(g.ok ? g.xml.c_str() : g.diagnostics.c_str(), g.ok ? stdout : stderr);
  return g.ok ? 0 : 1;
}
