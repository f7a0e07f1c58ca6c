// `chorus synth`: the bandwidth-optimal time of a collective on a topology
// and the cut that binds it (docs/synthesis.md).
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "synth/bound.h"
#include "tools/chorus/commands.h"
#include "topo/presets.h"

namespace chorus::cli {

namespace {

// Up to `most` node names, then how many more.
std::string names(const topo::Topology& t, const std::vector<int>& ids, size_t most = 12) {
  std::string out;
  for (size_t i = 0; i < ids.size() && i < most; ++i) {
    if (i > 0) out += ", ";
    out += t.nodes[static_cast<size_t>(ids[i])].name;
  }
  if (ids.size() > most) out += fmt::format(", ... ({} more)", ids.size() - most);
  return out;
}

}  // namespace

int runSynth(const SynthArgs& args) {
  auto fail = [](const std::string& m) {
    fmt::print(stderr, "chorus synth: {}\n", m);
    return 2;
  };
  CollectiveKind coll = parseCollective(args.collective);
  if (coll == CollectiveKind::kCustom)
    return fail("unknown collective '" + args.collective +
                "' (allgather, reducescatter, allreduce, broadcast, reduce)");
  if (!args.boundOnly)
    return fail(
        "building schedules (trees lowered to IR) is not available yet; --bound-only prints the "
        "optimum and its cut");
  std::string spec = args.topo;
  if (!args.ranks.empty()) spec += "@" + args.ranks;
  auto topology = topo::loadTopology(spec);
  if (!topology.isOk()) return fail(topology.status().message());
  const topo::Topology& t = topology.value();
  auto t0 = std::chrono::steady_clock::now();
  auto bound = synth::optimalBound(t, coll, args.root);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!bound.isOk()) return fail(bound.status().message());
  const synth::Bound& b = bound.value();
  // The cut as S or, when shorter, as the nodes outside it.
  std::vector<int> outside;
  {
    std::vector<char> in(t.nodes.size(), 0);
    for (int u : b.cut) in[static_cast<size_t>(u)] = 1;
    for (size_t u = 0; u < t.nodes.size(); ++u)
      if (!in[u]) outside.push_back(static_cast<int>(u));
  }
  if (args.json) {
    nlohmann::ordered_json j;
    j["collective"] = std::string(collectiveName(coll));
    j["topology"] = t.name;
    j["ranks"] = t.ranks();
    j["algbw"] = b.algbw.value();
    j["algbw_exact"] = b.algbw.str();
    j["busbw"] = b.busbw;
    nlohmann::ordered_json cut;
    std::vector<std::string> inside, rest;
    for (int u : b.cut) inside.push_back(t.nodes[static_cast<size_t>(u)].name);
    for (int u : outside) rest.push_back(t.nodes[static_cast<size_t>(u)].name);
    cut["inside"] = inside;
    cut["outside"] = rest;
    cut["ranks_inside"] = b.cutRanks;
    cut["capacity"] = b.cutCapacity.value();
    cut["capacity_exact"] = b.cutCapacity.str();
    j["cut"] = cut;
    j["rounds"] = b.rounds;
    j["maxflows"] = b.maxflows;
    j["seconds"] = seconds;
    fmt::print("{}\n", j.dump(1));
    return 0;
  }
  fmt::print("chorus synth {} on {} ({} ranks), bandwidth-only model\n", collectiveName(coll),
             t.name, t.ranks());
  fmt::print("optimum   algbw {:.3f} GB/s (exactly {}), busbw {:.3f} GB/s\n", b.algbw.value(),
             b.algbw.str(), b.busbw);
  fmt::print("          1 GiB takes at least {:.3f} ms\n",
             static_cast<double>(size_t{1} << 30) / (b.algbw.value() * 1e9) * 1e3);
  std::string which = b.cut.size() <= outside.size()
                          ? "S = {" + names(t, b.cut) + "}"
                          : "S = every node but {" + names(t, outside) + "}";
  const char* direction =
      coll == CollectiveKind::kReduceScatter || coll == CollectiveKind::kReduce ? "enter" : "leave";
  fmt::print("binding   cut with {} rank(s) inside; {} GB/s {} it\n          {}\n", b.cutRanks,
             b.cutCapacity.str(), direction, which);
  fmt::print("method    {} Dinkelbach round(s), {} maximum flows, {:.4f} s\n", b.rounds, b.maxflows,
             seconds);
  return 0;
}

}  // namespace chorus::cli
