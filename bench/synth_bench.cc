// Synthesis speed (issue 7): the bandwidth-optimal bound on the topologies
// of the table (1-16 DGX A100 / H100 boxes, 2 and 4 MI250 boxes, an
// 8x8 torus, a 64-rank fat tree) and larger ones, best of 3.
//   synth_bench [COLLECTIVE]       prints one CSV row per topology (alltoall:
//                                  the LP bound, once each, up to 128 ranks)
//   synth_bench --trees TOPOLOGY   the allgather forest of one topology
//                                  (bench/synth_trees.sh runs each under a time limit)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include "synth/alltoall.h"
#include "synth/bound.h"
#include "synth/forest.h"
#include "topo/presets.h"

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--trees") {
    auto topo = chorus::topo::makePreset(argv[2]);
    if (!topo.isOk()) return 2;
    auto t0 = std::chrono::steady_clock::now();
    auto f = chorus::synth::packForest(topo.value(), false, 1 << 20);
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!f.isOk()) {
      std::fprintf(stderr, "%s: %s\n", argv[2], f.status().toString().c_str());
      return 1;
    }
    // A digest of the trees (FNV-1a), to tell whether a change to the
    // packing changed the forest.
    uint64_t digest = 1469598103934665603ull;
    auto mix = [&](int64_t x) { digest = (digest ^ static_cast<uint64_t>(x)) * 1099511628211ull; };
    for (const auto& tree : f.value().trees) {
      mix(tree.root);
      mix(tree.weight);
      for (auto [a, b] : tree.edges) mix(a * 65536 + b);
    }
    std::printf("%s,%d,%d,%zu,%d,%.3f,%016llx\n", argv[2], topo.value().ranks(), f.value().k,
                f.value().trees.size(), f.value().maxflows, s,
                static_cast<unsigned long long>(digest));
    return 0;
  }
  chorus::CollectiveKind coll = chorus::parseCollective(argc > 1 ? argv[1] : "allgather");
  if (coll == chorus::CollectiveKind::kAllToAll) {
    // The multicommodity LP (alltoall.h), once per topology up to 128 ranks.
    std::printf("topology,ranks,nodes,links,algbw,exact,variables,constraints,seconds\n");
    for (const char* name :
         {"dgx-a100", "dgx-a100:2", "dgx-a100:4", "dgx-a100:8", "dgx-a100:16", "dgx-h100:2",
          "dgx-h100:8", "mi250:2", "mi250:4", "torus:8", "fattree:8:8"}) {
      auto topo = chorus::topo::makePreset(name);
      if (!topo.isOk()) return 2;
      auto r = chorus::synth::allToAllBound(topo.value());
      if (!r.isOk()) {
        std::fprintf(stderr, "%s: %s\n", name, r.status().toString().c_str());
        return 1;
      }
      const auto& b = r.value();
      std::printf("%s,%d,%zu,%zu,%.6f,%s,%d,%d,%.6f\n", name, topo.value().ranks(),
                  topo.value().nodes.size(), topo.value().links.size(), b.algbw,
                  b.exact ? b.algbwExact.str().c_str() : "", b.variables, b.constraints, b.seconds);
      std::fflush(stdout);
    }
    return 0;
  }
  const char* topos[] = {"dgx-a100",    "dgx-a100:2", "dgx-a100:4", "dgx-a100:8",  "dgx-a100:16",
                         "dgx-h100",    "dgx-h100:2", "dgx-h100:4", "dgx-h100:8",  "dgx-h100:16",
                         "mi250:2",     "mi250:4",    "torus:8",    "fattree:8:8", "fattree:16:8",
                         "dgx-a100:32", "dgx-a100:64"};
  std::printf("topology,ranks,nodes,links,algbw,exact,rounds,maxflows,seconds\n");
  for (const char* name : topos) {
    auto topo = chorus::topo::makePreset(name);
    if (!topo.isOk()) return 2;
    double best = 1e30;
    chorus::synth::Bound b;
    for (int rep = 0; rep < 3; ++rep) {
      auto t0 = std::chrono::steady_clock::now();
      auto r = chorus::synth::optimalBound(topo.value(), coll);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (!r.isOk()) {
        std::fprintf(stderr, "%s: %s\n", name, r.status().toString().c_str());
        return 1;
      }
      best = std::min(best, s);
      b = r.value();
    }
    std::printf("%s,%d,%zu,%zu,%.6f,%s,%d,%d,%.6f\n", name, topo.value().ranks(),
                topo.value().nodes.size(), topo.value().links.size(), b.algbw.value(),
                b.algbw.str().c_str(), b.rounds, b.maxflows, best);
    std::fflush(stdout);
  }
  return 0;
}
