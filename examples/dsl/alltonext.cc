// docs/dsl.md, step 4: a collective of your own. AllToNext (rank r's
// buffer goes to rank r + 1) is no NCCL collective, so the program states
// what it computes; the verifier proves the algorithm against that, and the
// postconditions are written as JSON for `chorus run --spec` to check real
// data. Prints verified XML; the JSON goes to the file named by argv[1].
#include <chorus/gen.hpp>
#include <cstdio>
#include <fstream>

using namespace chorus::lang;

int main(int argc, char** argv) {
  const int n = 4, chunks = 2;
  Program p({.name = "my_alltonext", .collective = "alltonext", .ranks = n, .chunkFactor = chunks});
  std::vector<Source> present;  // the last rank sends nothing: its input is not read
  for (int r = 0; r + 1 < n; ++r)
    for (int k = 0; k < chunks; ++k) present.push_back({r, k});
  p.precondition(present);
  for (int r = 1; r < n; ++r)
    for (int k = 0; k < chunks; ++k)
      p.postcondition(r, k, {{r - 1, k}});  // r's output: r-1's input

  for (int r = 0; r + 1 < n; ++r) p.chunk(r, kInput, 0, chunks).copy(r + 1, kOutput, 0);

  chorus::Generated g = chorus::generate(p);
  if (!g.ok) {
    std::fputs(g.diagnostics.c_str(), stderr);
    return 1;
  }
  std::fputs(g.xml.c_str(), stdout);
  if (argc > 1) std::ofstream(argv[1]) << g.spec;
  return 0;
}
