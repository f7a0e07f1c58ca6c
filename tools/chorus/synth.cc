// `chorus synth`: the bandwidth-optimal time of a collective on a topology
// and the cut that binds it (docs/synthesis.md).
#include <fmt/core.h>

#include <bit>
#include <chorus/gen.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/io.h"
#include "ir/validate.h"
#include "ir/xml_reader.h"
#include "sim/simulator.h"
#include "synth/alltoall.h"
#include "synth/blink.h"
#include "synth/bound.h"
#include "synth/forest.h"
#include "synth/lower.h"
#include "tools/chorus/commands.h"
#include "topo/presets.h"

namespace chorus::cli {

namespace {

// Chunks per piece at most (MSCCL's executor runs 64 steps per
// threadblock).
constexpr size_t kMostChunks = 64;

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

struct Schedule {
  int pieces = 0;
  size_t trees = 0;
  std::optional<synth::Forest> gather, scatter;
  int maxflows = 0;
  double seconds = 0;
  size_t simBytes = size_t{1} << 30;
  double simAlgbw = 0, simBusbw = 0;
  // The lowering kept: pieces per connection, chunks per piece, instances,
  // which forest ("", " shortened", " shallow ..."); lowerings tried.
  int perConnection = 1, chunksPerPiece = 1, instances = 1, lowerings = 0;
  std::string kind;
  int headroom = 0;  // percent of the links between boxes the forest leaves idle
  std::string xml;   // the schedule kept, verified
};

// Packs the forests, lowers them, verifies the IR, simulates it at 1 GiB
// and writes it. Returns what went wrong, or "".
std::string buildSchedule(const topo::Topology& t, CollectiveKind coll, const SynthArgs& args,
                          Schedule& out) {
  auto t0 = std::chrono::steady_clock::now();
  std::optional<synth::Forest> gather, scatter;
  const bool rooted = coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce;
  const int root = rooted ? args.root : -1;
  const bool blink = args.method == "blink";
  if (blink && rooted) return "--method blink packs allgather-family trees (every rank a root)";
  auto forest = [&](bool reversed) {
    return blink ? synth::blinkForest(t, reversed, {.treesPerRoot = args.trees}, args.maxPieces)
                 : synth::packForest(t, reversed, args.maxPieces, root);
  };
  if (coll != CollectiveKind::kReduceScatter && coll != CollectiveKind::kReduce) {
    auto f = forest(false);
    if (!f.isOk()) return f.status().message();
    gather = std::move(f).value();
  }
  if (coll != CollectiveKind::kAllGather && coll != CollectiveKind::kBroadcast) {
    auto f = forest(true);
    if (!f.isOk()) return f.status().message();
    scatter = std::move(f).value();
  }
  for (const auto* f : {gather ? &*gather : nullptr, scatter ? &*scatter : nullptr})
    if (f != nullptr) out.maxflows += f->maxflows;
  out.simBytes = args.size;
  synth::LowerOptions lo;
  lo.name = args.name.empty() ? "synth_" + std::string(collectiveName(coll)) : args.name;
  lo.protocol = args.protocol;
  lo.inplace = args.inplace;
  for (int r = 0; r < t.ranks(); ++r)
    lo.boxes.push_back(t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box);
  // The forests as packed and shortened, the same packed with headroom on
  // the links between boxes (forest.h), and the shallow one: any may
  // schedule best at the size asked for, so each is lowered.
  struct Shape {
    std::optional<synth::Forest> gather, scatter;
    const char* kind = "";  // printed after the tree count
    int headroom = 0;       // percent
  };
  // Blink's rounded trees stay as they are: few per root is their point.
  std::vector<Shape> shapes{{gather, scatter, blink ? " blink" : ""}};
  auto addShortened = [&](const Shape& packed) {
    Shape shorter = packed;
    shorter.kind = " shortened";
    bool changed = false;
    for (std::optional<synth::Forest>* f : {&shorter.gather, &shorter.scatter}) {
      if (!f->has_value()) continue;
      synth::Forest s = synth::shortenForest(**f);
      changed = changed || s.trees != (*f)->trees;
      *f = std::move(s);
    }
    if (changed) shapes.push_back(std::move(shorter));
  };
  // A shape of the forests `make(reversed)` gives for the directions the
  // collective needs, added to the candidates; else the first failure.
  auto addShape = [&](Shape shape, auto make) -> Status {
    for (bool reversed : {false, true}) {
      if (!(reversed ? scatter : gather).has_value()) continue;
      Result<synth::Forest> f = make(reversed);
      if (!f.isOk()) return f.status();
      out.maxflows += f.value().maxflows;
      (reversed ? shape.scatter : shape.gather) = std::move(f).value();
    }
    shapes.push_back(std::move(shape));
    return Status();
  };
  if (!blink) {
    addShortened(shapes.front());
    // Headroom: 10 and 25 % besides none, unless --headroom names one; a
    // forest that needs more than 16 pieces per shard for it is passed over
    // then (its finer rates buy nothing the headroom does not, at many more
    // steps).
    const bool boxes = !synth::linksBetweenBoxes(t).empty();
    if (args.headroom > 0 && !boxes)
      return "--headroom needs links between boxes (this topology is one box)";
    std::vector<int> headrooms{10, 25};
    if (args.headroom >= 0) headrooms = {args.headroom};
    if (args.headroom > 0) shapes.clear();
    const size_t before = shapes.size();
    for (int h : headrooms) {
      if (h == 0 || !boxes) continue;
      const topo::Topology spare = synth::withHeadroom(t, 1 - h / 100.0);
      const int most = args.headroom > 0 ? args.maxPieces : std::min(args.maxPieces, 16);
      if (addShape({std::nullopt, std::nullopt, "", h}, [&](bool reversed) {
            return synth::packForest(spare, reversed, most, root);
          }).isOk())
        addShortened(Shape(shapes.back()));
    }
    if (args.headroom > 0 && shapes.size() == before)
      return fmt::format("no forest with {} % headroom needs at most {} pieces per shard",
                         args.headroom, args.maxPieces);
    // The hierarchical forest (every shard into each box once) where the
    // boxes link directly, unless --headroom asks for the packed ones.
    if (boxes && !rooted && args.headroom <= 0)
      (void)addShape({std::nullopt, std::nullopt, " hierarchical"},
                     [&](bool reversed) { return synth::hierarchicalForest(t, reversed); });
    Status st = addShape({std::nullopt, std::nullopt, " shallow (one per root, fewest hops)"},
                         [&](bool reversed) { return synth::shallowForest(t, reversed, root); });
    if (!st.isOk()) return st.message();
  }
  const synth::Forest* g = nullptr;
  const synth::Forest* s = nullptr;
  const Shape* shape = nullptr;
  // Lowerings tried, each verified and simulated at --size (1 GiB); the
  // fastest is kept (the first on a tie), lowerings that cannot serve the
  // size (it does not split into their chunks) or deadlock are passed
  // over: one and two pieces per connection, one and two chunks per piece
  // (lower.h) and, unless --instances is given, 2, 4, 8 instances while the
  // last had at least 16 slices per chunk to split (instances cut the
  // chunks: fewer, slower steps per connection hide the per-step latency,
  // but a tree's depth then costs more of a chunk).
  std::string xml, passedOver;
  auto tryLowering = [&](int per, int chunks, int instances, size_t* iterations) -> std::string {
    lo.piecesPerConnection = per;
    lo.chunksPerPiece = chunks;
    lo.instances = instances;
    lang::Program program(synth::forestProgramOptions(coll, t.ranks(), g, s, lo));
    synth::recordForests(program, g, s, lo);
    Generated gen = generate(program);
    if (!gen.ok)
      return "the lowered forest does not compile or verify (a bug):\n" + gen.diagnostics;
    ir::ReadResult back = ir::readXml(gen.xml, lo.name);
    if (!back.algorithm) return "the written XML does not read back (a bug)";
    // Many chunks per piece can exceed what MSCCL's executor runs (steps
    // per threadblock, offsets): such a lowering is passed over.
    if (chunks > 2) {
      DiagnosticList limits;
      ir::checkExecutorLimits(*back.algorithm, limits);
      if (!limits.items().empty()) {
        passedOver = limits.items().front().format();
        return "";
      }
    }
    sim::Options so;
    so.bytes = out.simBytes;
    so.inplace = args.inplace;
    so.criticalPath = false;
    auto r = sim::simulate(*back.algorithm, t, so);
    ++out.lowerings;
    if (!r.isOk()) {
      passedOver = "simulating the result: " + r.status().message();
      return "";
    }
    if (iterations != nullptr) *iterations = r.value().iterations;
    if (!xml.empty() && r.value().algbw <= out.simAlgbw) return "";
    out.simAlgbw = r.value().algbw;
    out.simBusbw = r.value().busbw;
    out.perConnection = per;
    out.chunksPerPiece = chunks;
    out.instances = instances;
    out.gather = shape->gather;
    out.scatter = shape->scatter;
    out.kind = shape->kind;
    out.headroom = shape->headroom;
    xml = std::move(gen.xml);
    return "";
  };
  for (const Shape& candidate : shapes) {
    shape = &candidate;
    g = candidate.gather ? &*candidate.gather : nullptr;
    s = candidate.scatter ? &*candidate.scatter : nullptr;
    size_t iterations = 0;
    const int first = args.instances > 0 ? args.instances : 1;
    for (int chunks : {1, 2})
      for (int per : {1, 2})
        if (std::string problem =
                tryLowering(per, chunks, first, per == 1 && chunks == 1 ? &iterations : nullptr);
            !problem.empty())
          return problem;
    // Steps of a quarter slice: where a slow link is busy to the end, the
    // last slice it carries is still to be forwarded after it; a smaller
    // last step shortens that (4 x DGX A100 allgather: 96.2 -> 98.8 %).
    if (const size_t fine = std::bit_ceil(4 * iterations); fine > 2 && fine <= kMostChunks)
      if (std::string problem = tryLowering(1, static_cast<int>(fine), first, nullptr);
          !problem.empty())
        return problem;
    for (int instances = 2; args.instances == 0 && instances <= 8 && iterations >= 16;
         instances *= 2)
      if (std::string problem = tryLowering(1, 1, instances, &iterations); !problem.empty())
        return problem;
  }
  if (xml.empty())
    return "no lowering serves " + sizeText(static_cast<double>(out.simBytes)) + ": " + passedOver;
  for (const auto* f : {&out.gather, &out.scatter})
    if (f->has_value()) {
      out.trees += (*f)->trees.size();
      out.pieces = std::max(out.pieces, (*f)->k);
    }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.xml = std::move(xml);
  return "";
}

// Alltoall: the multicommodity bound (alltoall.h); no trees apply. With
// `json`, the result goes there instead of stdout.
int runAllToAll(const topo::Topology& t, const SynthArgs& args, nlohmann::ordered_json* json,
                std::string* error) {
  auto fail = [&](const std::string& m) {
    *error = m;
    return 2;
  };
  if (!args.output.empty())
    return fail(
        "alltoall has a bound here but no tree schedule to write (-o); see chorus gen "
        "twostep_alltoall / threestep_alltoall");
  auto bound = synth::allToAllBound(t);
  if (!bound.isOk()) return fail(bound.status().message());
  const synth::AllToAllBound& b = bound.value();
  const double busbw = b.algbw * busBandwidthFactor(CollectiveKind::kAllToAll, t.ranks());
  auto linkName = [&](int l) {
    const topo::Link& link = t.links[static_cast<size_t>(l)];
    return t.nodes[static_cast<size_t>(link.from)].name + " -> " +
           t.nodes[static_cast<size_t>(link.to)].name;
  };
  if (json != nullptr) {
    nlohmann::ordered_json& j = *json;
    j["collective"] = "alltoall";
    j["topology"] = t.name;
    j["ranks"] = t.ranks();
    j["algbw"] = b.algbw;
    if (b.exact) j["algbw_exact"] = b.algbwExact.str();
    j["busbw"] = busbw;
    j["pair_rate"] = b.pairRate;
    std::vector<std::string> links;
    for (int l : b.bottleneck) links.push_back(linkName(l));
    j["bottleneck"] = links;
    j["variables"] = b.variables;
    j["constraints"] = b.constraints;
    j["exact_simplex"] = b.exactSimplex;
    j["seconds"] = b.seconds;
    return 0;
  }
  fmt::print("chorus synth alltoall on {} ({} ranks), bandwidth-only model\n", t.name, t.ranks());
  fmt::print("optimum   algbw {:.3f} GB/s{}, busbw {:.3f} GB/s\n", b.algbw,
             b.exact ? " (exactly " + b.algbwExact.str() + ")" : std::string(), busbw);
  fmt::print("          1 GiB takes at least {:.3f} ms; every pair at {:.4f} GB/s at once\n",
             static_cast<double>(size_t{1} << 30) / (b.algbw * 1e9) * 1e3, b.pairRate);
  std::string links;
  for (size_t i = 0; i < b.bottleneck.size() && i < 8; ++i)
    links += (i > 0 ? ", " : "") + linkName(b.bottleneck[i]);
  if (b.bottleneck.size() > 8) links += fmt::format(", ... ({} more)", b.bottleneck.size() - 8);
  fmt::print("binding   {} link(s) at capacity: {}\n", b.bottleneck.size(), links);
  fmt::print("method    linear program, {} variables, {} constraints (GLPK simplex{}), {:.4f} s\n",
             b.variables, b.constraints, b.exactSimplex ? ", refined exactly" : "", b.seconds);
  if (!args.boundOnly)
    fmt::print(
        "schedule  none: alltoall is not built from trees (chorus gen twostep_alltoall / "
        "threestep_alltoall write alltoall programs)\n");
  return 0;
}

// `chorus synth` and synthesize(): with `json` the result goes there (the
// schedule's XML to `xml`), else it is printed; -o is written either way.
int synth(const SynthArgs& args, nlohmann::ordered_json* json, std::string* xml,
          std::string* error) {
  auto fail = [&](const std::string& m) {
    *error = m;
    return 2;
  };
  CollectiveKind coll = parseCollective(args.collective);
  if (coll == CollectiveKind::kCustom)
    return fail("unknown collective '" + args.collective +
                "' (allgather, reducescatter, allreduce, broadcast, reduce, alltoall)");
  std::string spec = args.topo;
  if (!args.ranks.empty()) spec += "@" + args.ranks;
  auto topology = topo::loadTopology(spec);
  if (!topology.isOk()) return fail(topology.status().message());
  const topo::Topology& t = topology.value();
  if (coll == CollectiveKind::kAllToAll) return runAllToAll(t, args, json, error);
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
  // The schedule: forests packed, lowered, compiled, verified, simulated.
  Schedule sched;
  if (!args.boundOnly) {
    std::string problem = buildSchedule(t, coll, args, sched);
    if (!problem.empty()) return fail(problem);
    // Written only once it is verified and simulated without a deadlock.
    if (!args.output.empty()) {
      Status st = writeTextFile(sched.xml, args.output);
      if (!st.isOk()) return fail(st.message());
    }
    if (xml != nullptr) *xml = sched.xml;
  }
  if (json != nullptr) {
    nlohmann::ordered_json& j = *json;
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
    if (!args.boundOnly) {
      j["pieces"] = sched.pieces;
      j["trees"] = sched.trees;
      // Every tree: its root, its pieces of k and its arcs (rank ids; a
      // scatter tree's data flows from `to` to `from`).
      nlohmann::ordered_json forests = nlohmann::ordered_json::array();
      for (const auto& [kind, f] :
           {std::pair{"gather", &sched.gather}, std::pair{"scatter", &sched.scatter}}) {
        if (!f->has_value()) continue;
        for (const synth::Tree& tree : (*f)->trees) {
          nlohmann::ordered_json e;
          e["forest"] = kind;
          e["root"] = tree.root;
          e["weight"] = tree.weight;
          e["edges"] = tree.edges;
          forests.push_back(std::move(e));
        }
      }
      j["forest"] = std::move(forests);
      if (sched.gather) j["gather_forest_algbw"] = sched.gather->algbw.value();
      if (sched.scatter) j["scatter_forest_algbw"] = sched.scatter->algbw.value();
      j["forest_kind"] =
          sched.kind.empty() ? "packed" : sched.kind.substr(1, sched.kind.find(' ', 1) - 1);
      j["pieces_per_connection"] = sched.perConnection;
      j["chunks_per_piece"] = sched.chunksPerPiece;
      j["headroom_percent"] = sched.headroom;
      j["instances"] = sched.instances;
      j["lowerings_tried"] = sched.lowerings;
      j["generation_seconds"] = sched.seconds;
      j["simulated_bytes"] = sched.simBytes;
      j["simulated_algbw"] = sched.simAlgbw;
      j["simulated_busbw"] = sched.simBusbw;
      j["output"] = args.output;
    }
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
  if (args.boundOnly) return 0;
  fmt::print(
      "trees     {}{} ({} piece(s) per shard), {} maximum flows\n"
      "lowered   {} piece(s) per connection, {} chunk(s) per piece, {} instance(s) (the "
      "simulator's pick of {} lowerings), verified{} in {:.3f} s\n",
      sched.trees,
      sched.kind + (sched.headroom > 0
                        ? fmt::format(", {} % headroom on the links between boxes", sched.headroom)
                        : ""),
      sched.pieces, sched.maxflows, sched.perConnection, sched.chunksPerPiece, sched.instances,
      sched.lowerings, args.output.empty() ? "" : ", written to " + args.output, sched.seconds);
  for (const auto* f : {&sched.gather, &sched.scatter})
    if (f->has_value() && (*f)->algbw.value() > 0 &&
        (*f)->algbw.value() < b.algbw.value() * (1 - 1e-12) && coll != CollectiveKind::kAllReduce)
      fmt::print(
          "          {} trees reach {:.3f} GB/s ({}: {:.1f} % of the optimum)\n",
          sched.headroom > 0
              ? fmt::format("with the links between boxes at {} %, the", 100 - sched.headroom)
              : (args.method == "blink" ? "the rounded" : "the" + sched.kind),
          (*f)->algbw.value(), (*f)->algbw.str(), 100 * (*f)->algbw.value() / b.algbw.value());
  fmt::print("simulated {} on {}: algbw {:.3f} GB/s, busbw {:.3f} GB/s ({:.1f} % of the optimum)\n",
             sizeText(static_cast<double>(sched.simBytes)), t.name, sched.simAlgbw, sched.simBusbw,
             100 * sched.simAlgbw / b.algbw.value());
  return 0;
}

}  // namespace

int runSynth(const SynthArgs& args) {
  nlohmann::ordered_json json;
  std::string error;
  int rc = synth(args, args.json ? &json : nullptr, nullptr, &error);
  if (rc != 0) {
    fmt::print(stderr, "chorus synth: {}\n", error);
    return rc;
  }
  if (args.json)
    fmt::print("{}\n", json.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  return 0;
}

int synthesize(const SynthArgs& args, std::string* json, std::string* xml, std::string* error) {
  nlohmann::ordered_json j;
  int rc = synth(args, &j, xml, error);
  if (rc == 0) *json = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return rc;
}

}  // namespace chorus::cli
