// docs/dsl.md, step 2: a mistake and what Chorus says about it. Rank 3's
// output chunk 1 is read before the journey put anything there.
#include <chorus/gen.hpp>
#include <cstdio>

using namespace chorus::lang;

int main() {
  Program p({.name = "broken", .collective = "allgather", .ranks = 4});
  for (int r = 0; r < 4; ++r) p.chunk(r, kInput, 0).copy((r + 1) % 4, kOutput, r);
  p.chunk(3, kOutput, 1).copy(0, kOutput, 1);  // rank 3 holds block 2, not block 1
  chorus::Generated g = chorus::generate(p);
  std::fputs(g.diagnostics.c_str(), stderr);
  return g.ok ? 0 : 1;
}
