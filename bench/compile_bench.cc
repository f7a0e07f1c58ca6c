// Compile time and peak memory of the Chorus compiler (issue 5): one
// registered program at one size per run, so the process's peak resident
// memory (getrusage) is that case's. Prints one CSV row:
//   program,ranks,instances,operations,steps,record_ms,compile_ms,verify_ms,peak_mib
//   compile_bench ring_allreduce 256 4 [--no-verify]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "compiler/compiler.h"
#include "lang/registry.h"
#include "verify/verifier.h"

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: compile_bench PROGRAM RANKS INSTANCES [--no-verify]\n");
    return 2;
  }
  const chorus::lang::ProgramEntry* e = chorus::lang::findProgram(argv[1]);
  int n = std::atoi(argv[2]), instances = std::atoi(argv[3]);
  bool verify = !(argc > 4 && std::strcmp(argv[4], "--no-verify") == 0);
  if (e == nullptr || !e->ranksOk(n) || instances < 1) {
    std::fprintf(stderr, "compile_bench: no such program, or ranks/instances unsuitable\n");
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  chorus::lang::ProgramOptions options{
      .name = e->name, .collective = e->collective, .ranks = n, .instances = instances};
  options.chunkFactor = e->chunkFactor(options);
  chorus::lang::Program p(options);
  e->build(p);
  double recordMs = since(t0);
  t0 = std::chrono::steady_clock::now();
  chorus::compiler::Compiled c = chorus::compiler::compile(p);
  double compileMs = since(t0);
  if (!c.ok()) {
    std::fprintf(stderr, "compile_bench: %s does not compile\n", e->name.c_str());
    return 1;
  }
  double verifyMs = 0;
  if (verify) {
    t0 = std::chrono::steady_clock::now();
    chorus::verify::Report rep = chorus::verify::verifyAlgorithm(c.algo);
    verifyMs = since(t0);
    if (!rep.correct()) {
      std::fprintf(stderr, "compile_bench: %s does not verify\n", e->name.c_str());
      return 1;
    }
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("%s,%d,%d,%zu,%zu,%.1f,%.1f,%.1f,%.1f\n", e->name.c_str(), n, instances,
              p.operations().size() * static_cast<size_t>(instances), c.algo.totalSteps(), recordMs,
              compileMs, verifyMs, static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}
