// docs/dsl.md, step 3: a ring allreduce for any rank count, out of place or
// in place (argument "inplace"), with instances; prints verified MSCCL XML.
#include <chorus/gen.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using namespace chorus::lang;

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 4;
  bool inplace = argc > 2 && std::strcmp(argv[2], "inplace") == 0;
  Program p({.name = "my_ring_allreduce",
             .collective = "allreduce",
             .ranks = n,
             .chunkFactor = n,  // one chunk per rank
             .inplace = inplace,
             .instances = 2});
  for (int k = 0; k < n; ++k) {
    // Reduce-scatter: chunk k is summed around the ring from rank k+1 to k,
    // into each rank's output (the input stays as it was).
    int start = (k + 1) % n;
    Chunk sum = p.chunk(start, kInput, k);
    for (int step = 1; step < n; ++step) {
      int r = (start + step) % n;
      sum = p.chunk(r, kInput, k).reduce(sum, kOutput, k);
    }
    // Allgather: the sum goes once around from rank k.
    for (int step = 1; step < n; ++step) sum = sum.copy((k + step) % n, kOutput, k);
  }
  chorus::Generated g = chorus::generate(p);
  std::fputs(g.ok ? g.xml.c_str() : g.diagnostics.c_str(), g.ok ? stdout : stderr);
  return g.ok ? 0 : 1;
}
