// Compile time and peak memory of the Chorus compiler (issue 5): one
// registered program at one size per run, so the process's peak resident
// memory (getrusage) is that case's. Prints one CSV row:
//   program,ranks,instances,operations,steps,record_ms,compile_ms,verify_ms,peak_mib
//   compile_bench ring_allreduce 256 4 [--no-verify]
// With --rank R (per-rank lowering, docs/scale.md), rank R's part alone,
// built ten times: the best time and the peak heap one build allocated
// (counted by this program's operator new):
//   rank,program,ranks,instances,rank_steps,rank_form,best_ms,peak_heap_mib
//   compile_bench ring_allreduce 16384 1 --rank 5 [--gpus-per-node 8]
// With --read FILE, reading one algorithm file (a compact program file is
// expanded; with RANK, only that rank's part is built), timed, with the
// peak heap:
//   read,file,ranks,steps,read_ms,peak_heap_mib
//   compile_bench --read r1024c.xml [RANK]
// With --builtin, what one process of an N-process world does before its
// first call of a built-in (runtime/plan/planner.h): rank R's part, verified whole
// (`proven`, N <= CHORUS_PROVE_RANKS) or built alone (`family`), best of
// `runs`, with the peak heap:
//   builtin,name,ranks,rank,mode,rank_steps,best_ms,peak_heap_mib
//   compile_bench --builtin ring_allreduce 16384 5 family [runs]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "compiler/compiler.h"
#include "compiler/program_file.h"
#include "ir/json_io.h"
#include "lang/registry.h"
#include "runtime/plan/planner.h"
#include "verify/verifier.h"

// Live and peak heap bytes (each block carries its size in front).
namespace {
std::atomic<size_t> gLive{0}, gPeak{0};
constexpr size_t kHeader = alignof(std::max_align_t);
}  // namespace

void* operator new(size_t n) {
  auto* p = static_cast<char*>(std::malloc(n + kHeader));
  if (p == nullptr) throw std::bad_alloc();
  *reinterpret_cast<size_t*>(p) = n;
  size_t live = gLive.fetch_add(n) + n;
  size_t peak = gPeak.load();
  while (live > peak && !gPeak.compare_exchange_weak(peak, live)) {
  }
  return p + kHeader;
}
void operator delete(void* q) noexcept {
  if (q == nullptr) return;
  char* p = static_cast<char*>(q) - kHeader;
  gLive.fetch_sub(*reinterpret_cast<size_t*>(p));
  std::free(p);
}
void operator delete(void* q, size_t) noexcept { operator delete(q); }

namespace {
double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  if ((argc == 3 || argc == 4) && std::strcmp(argv[1], "--read") == 0) {
    const size_t before = gLive.load();
    gPeak.store(before);
    auto t0 = std::chrono::steady_clock::now();
    chorus::ir::ReadResult rr = chorus::ir::readAlgorithmFile(
        argv[2], chorus::compiler::readOptions(argc == 4 ? std::atoi(argv[3]) : -1));
    const double ms = since(t0);
    if (!rr.algorithm) {
      for (const auto& d : rr.diagnostics.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
      return 1;
    }
    std::printf("read,%s,%d,%zu,%.1f,%.1f\n", argv[2], rr.algorithm->ngpus,
                rr.algorithm->totalSteps(), ms,
                static_cast<double>(gPeak.load() - before) / (1024.0 * 1024.0));
    return 0;
  }
  if (argc >= 6 && std::strcmp(argv[1], "--builtin") == 0) {
    const int n = std::atoi(argv[3]), rank = std::atoi(argv[4]);
    const bool family = std::strcmp(argv[5], "family") == 0;
    const int runs = argc > 6 ? std::max(1, std::atoi(argv[6])) : 10;
    double best = 1e300;
    size_t peak = 0, steps = 0;
    for (int i = 0; i < runs; ++i) {
      const size_t before = gLive.load();
      gPeak.store(before);
      auto t0 = std::chrono::steady_clock::now();
      chorus::runtime::BuiltinCache cache(n, rank, family ? 0 : n);
      auto va = cache.get(argv[2], -1);
      best = std::min(best, since(t0));
      if (!va.isOk()) {
        std::fprintf(stderr, "%s\n", va.status().message().c_str());
        return 1;
      }
      steps = va.value()->algo().totalSteps();
      peak = std::max(peak, gPeak.load() - before);
    }
    std::printf("builtin,%s,%d,%d,%s,%zu,%.2f,%.2f\n", argv[2], n, rank, argv[5], steps, best,
                static_cast<double>(peak) / (1024.0 * 1024.0));
    return 0;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: compile_bench PROGRAM RANKS INSTANCES [--no-verify]\n");
    return 2;
  }
  const chorus::lang::ProgramEntry* e = chorus::lang::findProgram(argv[1]);
  int n = std::atoi(argv[2]), instances = std::atoi(argv[3]);
  bool verify = true;
  int rank = -1, gpus = 0;
  for (int i = 4; i < argc; ++i) {
    if (std::strcmp(argv[i], "--no-verify") == 0) verify = false;
    if (std::strcmp(argv[i], "--rank") == 0 && i + 1 < argc) rank = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--gpus-per-node") == 0 && i + 1 < argc) gpus = std::atoi(argv[++i]);
  }
  if (e == nullptr || !e->ranksOk(n) || instances < 1) {
    std::fprintf(stderr, "compile_bench: no such program, or ranks/instances unsuitable\n");
    return 2;
  }
  if (rank >= 0) {
    chorus::lang::ProgramOptions given{.ranks = n, .instances = instances, .gpusPerNode = gpus};
    given.focus = rank;
    chorus::lang::ProgramOptions o;
    std::string problem;
    if (!chorus::lang::programOptions(*e, given, &o, &problem)) {
      std::fprintf(stderr, "compile_bench: %s\n", problem.c_str());
      return 2;
    }
    double best = 1e300;
    size_t peak = 0, steps = 0;
    bool form = false;
    for (int k = 0; k < 10; ++k) {
      const size_t before = gLive.load();
      gPeak.store(before);
      auto t0 = std::chrono::steady_clock::now();
      chorus::compiler::Compiled c = chorus::compiler::compileRank(*e, o);
      best = std::min(best, since(t0));
      peak = std::max(peak, gPeak.load() - before);
      if (!c.ok()) {
        std::fprintf(stderr, "compile_bench: %s does not compile\n", e->name.c_str());
        return 1;
      }
      steps = c.algo.totalSteps();
      form = c.fromRankForm;
    }
    std::printf("rank,%s,%d,%d,%zu,%s,%.3f,%.2f\n", e->name.c_str(), n, instances, steps,
                form ? "yes" : "no", best, static_cast<double>(peak) / (1024.0 * 1024.0));
    return 0;
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
