// Simulator speed (issue 6): a 1024-rank ring allreduce and a 256-rank
// all-pairs alltoall, built in memory (no XML), on a ring and a fat tree;
// reference_ms is the same run recomputing every rate on every change
// (sim::Options::incrementalRates = false), with its prediction checked.
// Or an algorithm file simulated as `chorus synth` simulates its candidates
// (1 GiB, critical path off, each slice moved whole), three times.
//   sim_bench [SIZE_BYTES]     prints one CSV row per case
//   sim_bench FILE.xml TOPO [SIZE_BYTES]   prints one CSV row per run
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "algorithms/classic.h"
#include "core/io.h"
#include "ir/xml_reader.h"
#include "sim/simulator.h"
#include "topo/presets.h"

namespace {

int simulateFile(const char* path, const char* topoName, size_t bytes) {
  auto text = chorus::readTextFile(path);
  if (!text.isOk()) {
    std::fprintf(stderr, "%s\n", text.status().toString().c_str());
    return 2;
  }
  chorus::ir::ReadResult read = chorus::ir::readXml(text.value(), path);
  auto topo = chorus::topo::makePreset(topoName);
  if (!read.algorithm || !topo.isOk()) {
    std::fprintf(stderr, "%s: not an algorithm file, or %s: not a preset\n", path, topoName);
    return 2;
  }
  chorus::sim::Options o;
  o.bytes = bytes;
  o.criticalPath = false;
  o.partsPerSlice = 1;
  std::printf("file,topology,bytes,transfers,iterations,sim_ms,predicted_us,algbw\n");
  for (int run = 0; run < 3; ++run) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = chorus::sim::simulate(*read.algorithm, topo.value(), o);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!r.isOk()) {
      std::fprintf(stderr, "%s: %s\n", path, r.status().toString().c_str());
      return 1;
    }
    std::printf("%s,%s,%zu,%zu,%zu,%.1f,%.1f,%.3f\n", path, topoName, o.bytes, r.value().transfers,
                r.value().iterations, ms, r.value().time * 1e6, r.value().algbw);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 || argc == 4)
    return simulateFile(argv[1], argv[2],
                        argc == 4 ? std::strtoull(argv[3], nullptr, 10) : size_t{1} << 30);
  size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{1} << 30;
  struct Case {
    const char* name;
    chorus::ir::Algorithm algo;
    const char* topo;
  };
  Case cases[] = {
      {"ring_allreduce_1024", chorus::algorithms::ringAllReduce(1024), "ring:1024"},
      {"ring_allreduce_1024", chorus::algorithms::ringAllReduce(1024), "fattree:128:8"},
      {"pairwise_alltoall_256", chorus::algorithms::pairwiseAllToAll(256), "fattree:32:8"},
      {"pairwise_alltoall_256", chorus::algorithms::pairwiseAllToAll(256), "full:256"}};
  std::printf(
      "case,topology,bytes,steps,transfers,iterations,sim_ms,reference_ms,predicted_us,busbw\n");
  for (const Case& c : cases) {
    auto topo = chorus::topo::makePreset(c.topo);
    if (!topo.isOk()) return 2;
    chorus::sim::Options o;
    o.bytes = bytes;
    o.criticalPath = false;
    auto timed = [&](bool incremental, double* ms) {
      o.incrementalRates = incremental;
      auto t0 = std::chrono::steady_clock::now();
      auto r = chorus::sim::simulate(c.algo, topo.value(), o);
      *ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!r.isOk()) std::fprintf(stderr, "%s: %s\n", c.name, r.status().toString().c_str());
      return r;
    };
    double ms = 0, referenceMs = 0;
    auto r = timed(true, &ms);
    auto reference = timed(false, &referenceMs);
    if (!r.isOk() || !reference.isOk()) return 1;
    if (std::abs(r.value().time - reference.value().time) > 1e-9 * reference.value().time) {
      std::fprintf(stderr, "%s on %s: %.9g s, the reference %.9g s\n", c.name, c.topo,
                   r.value().time, reference.value().time);
      return 1;
    }
    std::printf("%s,%s,%zu,%zu,%zu,%zu,%.1f,%.1f,%.1f,%.3f\n", c.name, c.topo, bytes,
                c.algo.totalSteps(), r.value().transfers, r.value().iterations, ms, referenceMs,
                r.value().time * 1e6, r.value().busbw);
  }
  return 0;
}
