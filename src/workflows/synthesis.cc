// Synthesis as one step (docs/synthesis.md): the bandwidth-optimal time of
// a collective on a topology and the cut that binds it, the schedule that
// attains it, lowered, verified and chosen by simulation.
#include "workflows/synthesis.h"

#include <fmt/core.h>

#include <bit>
#include <chorus/gen.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "algorithms/classic.h"
#include "compiler/program_file.h"
#include "core/check.h"
#include "core/io.h"
#include "core/parallel.h"
#include "ir/stats.h"
#include "ir/validate.h"
#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "lang/registry.h"
#include "sim/simulator.h"
#include "synth/alltoall.h"
#include "synth/blink.h"
#include "synth/bound.h"
#include "synth/forest.h"
#include "synth/lower.h"
#include "synth/search.h"
#include "topo/presets.h"
#include "verify/verifier.h"
#include "workflows/report_page.h"

namespace chorus::workflows {

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

struct Schedule {
  synth::Found found;
  int pieces = 0;
  size_t trees = 0;
  double seconds = 0;
  size_t simBytes = size_t{1} << 30;
  double simAlgbw = 0, simBusbw = 0;  // the kept lowering, as written and read back
  std::vector<double> simLinkBytes;   // its bytes on each topology link
  std::string xml;                    // the schedule kept, verified
  int mostSteps = 0;                  // the most steps one of its threadblocks takes
  // The fastest classic program of the language for the collective on this
  // topology (ring, all-pairs, hierarchical, trees), simulated alike; kept
  // instead of the synthesized schedule when that is slower
  // (`classicKept`), so no answer is worse than it.
  std::string classicName;
  double classicAlgbw = 0;
  bool classicKept = false;
  // Why the schedule kept is below 90 % of the optimum, each a measured
  // cause (empty above it).
  std::vector<std::string> shortfall;
  const synth::Shape& shape() const { return found.keptShape(); }
  const synth::Tried& lowering() const { return found.kept(); }
};

using Deadline = std::optional<std::chrono::steady_clock::time_point>;

// The search's deadline: 85 % of --time-budget, the rest left for proving
// and writing the schedule kept (a 64-chunk lowering on 32 ranks takes
// seconds to verify; 2 x MI250's allreduce by slices, 0.1-0.3 s; 4 x
// MI250's reduce-scatter at 8 KiB slices, 0.4-0.8 s) while the classic
// programs are simulated (bestClassic: a few of them, since session 50;
// before, a quarter was left, and they took most of it). Four fifths
// left the last halving of 4 x MI250's reduce-scatter (16 -> 8 KiB
// slices, 94.49 -> 95.04 % of the optimum) out whenever the VM was slow.
Deadline deadlineOf(const SynthArgs& args, std::chrono::steady_clock::time_point start) {
  if (args.timeBudget <= 0) return std::nullopt;
  return start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(0.85 * args.timeBudget));
}

synth::Target targetOf(const SynthArgs& args) {
  return args.target == "chorus" ? synth::Target::kChorus : synth::Target::kMsccl;
}
// Alltoall schedules are lowered within MSCCL's limits whatever --target
// says (buildAllToAll), and simulated as its executor runs them.
constexpr size_t kAllToAllParts = 0;

synth::SearchOptions searchOptions(const topo::Topology& t, CollectiveKind coll,
                                   const SynthArgs& args, size_t bytes, const std::string& protocol,
                                   Deadline deadline) {
  synth::SearchOptions so;
  so.collective = coll;
  so.root = args.root;
  so.method = args.method;
  so.trees = args.trees;
  so.maxPieces = args.maxPieces;
  so.headroom = args.headroom;
  so.instances = args.instances;
  so.bytes = bytes;
  so.lower.name = args.name.empty() ? "synth_" + std::string(collectiveName(coll)) : args.name;
  so.lower.protocol = protocol;
  so.lower.inplace = args.inplace;
  so.lower.target = targetOf(args);
  for (int r = 0; r < t.ranks(); ++r)
    so.lower.boxes.push_back(t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box);
  so.deadline = deadline;
  return so;
}

// A simulation at `bytes` (no critical path), its slices moved in `parts`
// (synth::simulatedParts), stopped with kTimeout at `deadline`;
// `sliceBytes` 0: the protocol's.
sim::Options simOptions(size_t bytes, bool inplace, size_t parts, Deadline deadline = std::nullopt,
                        size_t sliceBytes = 0) {
  sim::Options so;
  so.bytes = bytes;
  so.inplace = inplace;
  so.partsPerSlice = parts;
  so.criticalPath = false;
  so.deadline = deadline;
  so.sliceBytes = sliceBytes;
  return so;
}
// An algorithm simulated so.
Result<sim::Result> simulateAt(const ir::Algorithm& a, const topo::Topology& t, size_t bytes,
                               bool inplace, size_t parts, Deadline deadline = std::nullopt,
                               size_t sliceBytes = 0) {
  return sim::simulate(a, t, simOptions(bytes, inplace, parts, deadline, sliceBytes));
}

// Its algbw (GB/s), or 0 where it cannot run the size or deadlocks, with
// why in `problem`.
double simulatedAlgbw(const ir::Algorithm& a, const topo::Topology& t, size_t bytes, bool inplace,
                      size_t parts, std::string* problem = nullptr) {
  auto r = simulateAt(a, t, bytes, inplace, parts);
  if (!r.isOk() && problem != nullptr && problem->empty()) *problem = r.status().message();
  return r.isOk() ? r.value().algbw : 0;
}

// A program proved (compiled, then verified as chorus::generate does) and
// written with the size range [minBytes, maxBytes] it serves (0:
// unlimited); what it simulates at `bytes` as read back from that XML (and,
// where asked, its bytes on each link and the most steps a threadblock
// takes). `simulated`: the search's simulation of a lowering, whose figures
// stand for this program where it compiled to the same algorithm (by
// ir::contentDigest; the XML read back must equal it either way), so a
// schedule of millions of steps is not simulated twice. The proof runs
// beside the writing and reading back. Returns what went wrong, or "".
std::string proveProgram(const lang::Program& program, const topo::Topology& t, size_t bytes,
                         size_t parts, uint64_t minBytes, uint64_t maxBytes, std::string* xml,
                         double* algbw, double* busbw, std::vector<double>* linkBytes = nullptr,
                         int* mostSteps = nullptr, const synth::Tried* simulated = nullptr) {
  auto listed = [](const DiagnosticList& found) {
    std::string text;
    for (const Diagnostic& d : found.items())
      if (d.severity == Severity::kError) text += d.format() + "\n";
    return text;
  };
  compiler::Compiled c = compiler::compile(program);
  if (!c.ok()) {
    c.diagnostics.sort();
    return "the lowered schedule does not compile (a bug):\n" + listed(c.diagnostics);
  }
  ir::Algorithm& algo = c.algo;
  algo.minBytes = minBytes;
  algo.maxBytes = maxBytes;
  // Lowered forests and classic programs implement the collectives the
  // verifier knows (no custom postconditions to hand it).
  CHORUS_CHECK(!program.custom(), "a custom collective has no postconditions here");
  std::future<verify::Report> proof =
      std::async(std::launch::async, [&] { return verify::verifyAlgorithm(algo); });
  *xml = ir::writeXml(algo);
  ir::ReadResult back = ir::readXml(*xml, program.options().name, compiler::readOptions());
  const verify::Report report = proof.get();
  if (!report.correct())
    return "the lowered schedule does not verify (a bug):\n" + listed(report.diagnostics);
  if (!back.algorithm || !(*back.algorithm == algo))
    return "the written XML does not read back as the algorithm written (a bug)";
  if (mostSteps != nullptr) *mostSteps = ir::computeStats(algo).maxStepsPerTb;
  if (simulated != nullptr && simulated->digest == ir::contentDigest(algo)) {
    *algbw = simulated->algbw;
    *busbw = simulated->busbw;
    if (linkBytes != nullptr) *linkBytes = simulated->linkBytes;
    return "";
  }
  auto r = simulateAt(*back.algorithm, t, bytes, program.options().inplace, parts);
  if (!r.isOk()) return "simulating the written schedule: " + r.status().message() + " (a bug)";
  *algbw = r.value().algbw;
  *busbw = r.value().busbw;
  if (linkBytes != nullptr) *linkBytes = std::move(r.value().linkBytes);
  return "";
}

// The classic programs of the language for `coll` (those that take the
// topology's rank count; hierarchical ones with its box size), each
// compiled and simulated at `bytes`: the fastest one's options and algbw.
struct Classic {
  std::string name;
  lang::ProgramOptions options;
  double algbw = 0;
};
// Each simulation stops after 1 s or at `deadline` (all-pairs on 64 ranks
// of a torus takes 35 s to simulate at 1 GiB); one that stops is left out,
// and none starts past `deadline` once one has served.
// The topology's routes must all have been asked for (they are read from
// several threads).
Classic bestClassic(const topo::Topology& t, CollectiveKind coll, const SynthArgs& args,
                    const std::string& protocol, size_t bytes, Deadline deadline) {
  // Ranks per box, where every box has as many and they are numbered in
  // order (what --gpus-per-node means).
  int perBox = 0;
  {
    std::map<int, int> count;
    bool ordered = true;
    for (int r = 0; r < t.ranks(); ++r) {
      const int box = t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box;
      ++count[box];
      if (r > 0 && box < t.nodes[static_cast<size_t>(t.nodeOfRank(r - 1))].box) ordered = false;
    }
    if (ordered && count.size() > 1 && t.ranks() % static_cast<int>(count.size()) == 0) {
      perBox = t.ranks() / static_cast<int>(count.size());
      for (const auto& [box, n] : count) ordered = ordered && n == perBox;
      if (!ordered) perBox = 0;
    }
  }
  // Rings first among equal bounds: the cheapest to simulate, and the
  // usual best.
  std::vector<const lang::ProgramEntry*> entries;
  for (const lang::ProgramEntry& e : lang::programs())
    if (e.collective == collectiveName(coll) && e.ranksOk(t.ranks())) entries.push_back(&e);
  std::stable_partition(entries.begin(), entries.end(),
                        [](const lang::ProgramEntry* e) { return e->name.starts_with("ring_"); });
  // Compiled in parallel, then simulated by the rates their links bound
  // them to (sim::fastestByBound; 2 x MI250 allreduce: the halving-doubling
  // simulates at 9.18 GB/s, and the others' links bound them to 0.6-9.1,
  // below it: all-pairs in two steps had simulated for 1 s and stopped, in
  // one step it simulates for 99 s). The best is what simulating them all
  // would find.
  std::vector<lang::ProgramOptions> options(entries.size());
  std::vector<ir::Algorithm> algos(entries.size());
  std::vector<char> compiled(entries.size(), 0);
  parallelFor(entries.size(), usableCores(), [&](size_t i) {
    const lang::ProgramEntry& e = *entries[i];
    const bool nodes =
        std::find(e.options.begin(), e.options.end(), "gpus-per-node") != e.options.end();
    if (nodes && perBox == 0) return;
    lang::ProgramOptions given{.ranks = t.ranks(), .inplace = args.inplace, .protocol = protocol};
    given.root = args.root;
    if (nodes) given.gpusPerNode = perBox;
    std::string problem;
    if (!lang::programOptions(e, given, &options[i], &problem)) return;
    options[i].name = e.name;
    lang::Program p(options[i]);
    e.build(p);
    compiler::Compiled c = compiler::compile(p);
    if (!c.ok()) return;
    algos[i] = std::move(c.algo);
    compiled[i] = 1;
  });
  std::vector<const ir::Algorithm*> candidates;
  std::vector<size_t> from;  // candidates' entries
  for (size_t i = 0; i < entries.size(); ++i)
    if (compiled[i]) {
      candidates.push_back(&algos[i]);
      from.push_back(i);
    }
  const std::vector<double> algbw = sim::fastestByBound(
      candidates, t, simOptions(bytes, args.inplace, simulatedParts(args), deadline), usableCores(),
      std::chrono::seconds(1));
  Classic best;
  for (size_t k = 0; k < candidates.size(); ++k)
    if (algbw[k] > best.algbw) best = Classic{entries[from[k]]->name, options[from[k]], algbw[k]};
  return best;
}

// The lowering a search kept, proved and written (proveProgram).
std::string prove(const topo::Topology& t, CollectiveKind coll, const synth::Found& found,
                  const synth::LowerOptions& base, size_t bytes, uint64_t minBytes,
                  uint64_t maxBytes, std::string* xml, double* algbw, double* busbw,
                  std::vector<double>* linkBytes = nullptr, int* mostSteps = nullptr) {
  const synth::Shape& shape = found.keptShape();
  synth::LowerOptions lo = found.keptLowering(base);
  // A schedule ordered over the whole call by lags serves the calls its
  // lags cover (LowerOptions::callBytes): up to its range's largest, or the
  // size it was made for.
  if (synth::ordersWholeCall(found.kept())) {
    if (maxBytes == 0) maxBytes = bytes;
    lo.callBytes = maxBytes;
  }
  const synth::Forest* g = shape.gather ? &*shape.gather : nullptr;
  const synth::Forest* s = shape.scatter ? &*shape.scatter : nullptr;
  lang::Program program(synth::forestProgramOptions(coll, t.ranks(), g, s, lo));
  synth::recordForests(program, g, s, lo);
  // The search simulated the kept lowering at its size: those figures hold
  // where this is that size and the same algorithm.
  const synth::Tried* simulated = bytes == found.bytes ? &found.kept() : nullptr;
  return proveProgram(program, t, bytes, synth::simulatedParts(base.target), minBytes, maxBytes,
                      xml, algbw, busbw, linkBytes, mostSteps, simulated);
}

// Searches the forests and their lowerings (synth/search.h), proves the
// one kept, simulates it as written and keeps its XML. Returns what went
// wrong, or "".
std::string buildSchedule(const topo::Topology& t, CollectiveKind coll, const SynthArgs& args,
                          Schedule& out) {
  auto t0 = std::chrono::steady_clock::now();
  const synth::SearchOptions so =
      searchOptions(t, coll, args, args.size, args.protocol, deadlineOf(args, t0));
  auto found = synth::searchSchedule(t, so);
  if (!found.isOk()) return found.status().message();
  out.found = std::move(found).value();
  out.simBytes = args.size;
  // Never worse than the classic programs: the fastest of them replaces a
  // slower synthesized schedule (proved and written the same way). They
  // are simulated while the kept lowering is proved.
  // (Their simulations end with the budget, but not before 2 s: a ring
  // always gets its turn.)
  Deadline classicDeadline;
  if (args.timeBudget > 0)
    classicDeadline = std::max(std::chrono::steady_clock::now() + std::chrono::seconds(2),
                               t0 + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                        std::chrono::duration<double>(args.timeBudget)));
  // Every route asked for before the threads run (the topology caches
  // them as they are asked for: a write).
  t.routeEveryPair();
  std::future<Classic> classics = std::async(std::launch::async, [&] {
    return bestClassic(t, coll, args, args.protocol, out.simBytes, classicDeadline);
  });
  std::string problem = prove(t, coll, out.found, so.lower, out.simBytes, 0, 0, &out.xml,
                              &out.simAlgbw, &out.simBusbw, &out.simLinkBytes, &out.mostSteps);
  const Classic classic = classics.get();
  if (!problem.empty()) return problem;
  for (const auto* f : {&out.shape().gather, &out.shape().scatter})
    if (f->has_value()) {
      out.trees += (*f)->trees.size();
      out.pieces = std::max(out.pieces, (*f)->k);
    }
  out.classicName = classic.name;
  out.classicAlgbw = classic.algbw;
  if (classic.algbw > out.simAlgbw) {
    lang::ProgramOptions o = classic.options;
    o.name = so.lower.name;
    lang::Program program(o);
    lang::findProgram(classic.name)->build(program);
    std::string xml;
    double algbw = 0, busbw = 0;
    if (std::string bad = proveProgram(program, t, out.simBytes, simulatedParts(args), 0, 0, &xml,
                                       &algbw, &busbw, &out.simLinkBytes, &out.mostSteps);
        !bad.empty())
      return classic.name + ": " + bad;
    out.xml = std::move(xml);
    out.simAlgbw = algbw;
    out.simBusbw = busbw;
    out.classicKept = true;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return "";
}

// Why a schedule simulates below 90 % of the optimum `best`: each cause
// measured. The forest's own rate in the bandwidth model (below the
// optimum when the exact forest was out of reach: the notes say why); what
// the lowering loses against that rate, and how much of it is each hop
// forwarding a whole slice (the same schedule simulated with 128 KiB
// slices); the time budget.
// The probe's simulation (many more slices) stops at `deadline`; then the
// line says it was not measured.
std::vector<std::string> shortfallOf(const topo::Topology& t, const SynthArgs& args,
                                     const Schedule& s, double best, Deadline deadline) {
  std::vector<std::string> why;
  if (s.simAlgbw >= 0.9 * best) return why;
  auto budget = [&] {
    if (s.found.budgetSpent)
      why.push_back(
          fmt::format("the time budget ({} s) was spent: raise --time-budget", args.timeBudget));
    return why;
  };
  if (s.classicKept) {
    why.push_back("no synthesized lowering simulated faster than the classic " + s.classicName);
    return budget();
  }
  double model = best;
  bool heuristic = false;  // a forest whose rate only the simulator says (shallow)
  for (const auto* f : {&s.shape().gather, &s.shape().scatter})
    if (f->has_value()) {
      if ((*f)->algbw.value() > 0)
        model = std::min(model, (*f)->algbw.value());
      else
        heuristic = true;
    }
  if (heuristic) {
    why.push_back(
        fmt::format("the {} forest kept is a heuristic's, packed for latency, not for the optimum",
                    s.shape().kind));
    return budget();
  }
  if (model < 0.9 * best)
    why.push_back(
        fmt::format("the {} forest kept reaches {:.1f} % of the optimum in the bandwidth model{}",
                    s.shape().kind, 100 * model / best,
                    s.found.notes.empty() ? "" : " (the exact forest: see the notes)"));
  // (Where neither loses a tenth alone, both together did: the lowering's
  // share is said, with the forest's.)
  if (s.simAlgbw < 0.9 * model || model >= 0.9 * best) {
    std::string line = fmt::format("the lowering simulates at {:.1f} % of the forest's rate",
                                   100 * s.simAlgbw / model);
    if (model < best * (1 - 1e-9) && model >= 0.9 * best)
      line += fmt::format(" (the {} forest reaches {:.1f} % of the optimum in the model)",
                          s.shape().kind, 100 * model / best);
    std::vector<std::string> causes;
    // The routes the simulator takes (the IR names none) can load a link
    // past what the forest's own paths allot it: then that link alone
    // bounds the schedule. (Simple moves the data's bytes alone; LL and
    // LL128 add their flags, which this does not weigh.)
    const double atRate = static_cast<double>(s.simBytes) / (model * 1e9);  // seconds
    double busiest = 0;
    size_t which = 0;
    for (size_t l = 0; l < t.links.size() && l < s.simLinkBytes.size(); ++l) {
      const double busy = s.simLinkBytes[l] / (t.links[l].bandwidth * 1e9);
      if (t.links[l].bandwidth > 0 && busy > busiest) {
        busiest = busy;
        which = l;
      }
    }
    if (args.protocol == "Simple" && busiest > 1.02 * atRate) {
      const topo::Link& l = t.links[which];
      causes.push_back(fmt::format(
          "the simulator's routes put {:.0f} MiB on {} -> {}, {:.2f}x what the forest's rate "
          "allots it, which bounds this schedule to {:.1f} % of the optimum (MSCCL's IR names "
          "no paths: an arc the forest splits over several takes the one route the fabric "
          "gives it)",
          s.simLinkBytes[which] / (1 << 20), t.nodes[static_cast<size_t>(l.from)].name,
          t.nodes[static_cast<size_t>(l.to)].name, busiest / atRate,
          100 * static_cast<double>(s.simBytes) / (best * 1e9) / busiest));
    }
    ir::ReadResult back = ir::readXml(s.xml, "kept", compiler::readOptions());
    if (back.algorithm) {
      auto fine = simulateAt(*back.algorithm, t, s.simBytes, args.inplace, simulatedParts(args),
                             deadline, size_t{128} << 10);
      if (!fine.isOk() && fine.status().code() == StatusCode::kTimeout)
        line += " (what smaller slices would give was not simulated in the time budget)";
      if (fine.isOk() && fine.value().algbw > 1.02 * s.simAlgbw)
        causes.push_back(fmt::format(
            "each hop forwards a whole slice before the next rank sends it on, and links "
            "shared by many connections move each slowly; with 128 KiB slices "
            "(CHORUS_SLICE_BYTES=131072) the same schedule simulates at {:.1f} % of the optimum",
            100 * fine.value().algbw / best));
    }
    // More chunks per piece, past what MSCCL's executor runs.
    const auto overSteps = std::count_if(s.found.tried.begin(), s.found.tried.end(),
                                         [](const synth::Tried& tr) { return tr.overSteps; });
    if (overSteps > 0)
      causes.push_back(fmt::format(
          "{} lowering(s) with more chunks per piece put more steps on a threadblock than the "
          "MSCCL executor's {} (--target chorus: Chorus's runtimes take any number)",
          overSteps, ir::kMscclMaxSteps));
    for (size_t i = 0; i < causes.size(); ++i) line += (i == 0 ? ": " : "; ") + causes[i];
    why.push_back(line);
  }
  return budget();
}

// The forms of a lowering beyond its counts, if any (synth::LowerOptions::
// halvesInTurn, laterLocalSums, fewerLocalConnections).
std::string formNote(const synth::Tried& t) {
  std::string out;
  if (t.sliceBytes > 0) out += ", slices of " + sizeText(static_cast<double>(t.sliceBytes));
  if (synth::ordersWholeCall(t)) {
    out += t.halvesInTurn ? ", the halves in turn over the whole call"
                          : ", the box's own sums after the others over the whole call";
  } else {
    if (t.halvesInTurn) out += ", the halves in turn";
    if (t.laterLocalSums > 0)
      out += fmt::format(", the box's own sums {} round(s) later", t.laterLocalSums);
  }
  if (t.fewerLocalConnections > 0)
    out +=
        fmt::format(", the box's own pieces on 1/{} of the connections", t.fewerLocalConnections);
  return out;
}

// A size for file names: 64K, 4M, 1G, or the bytes.
std::string sizeTag(uint64_t bytes) {
  for (auto [unit, suffix] :
       {std::pair{uint64_t{1} << 30, "G"}, {uint64_t{1} << 20, "M"}, {uint64_t{1} << 10, "K"}})
    if (bytes >= unit && bytes % unit == 0) return fmt::format("{}{}", bytes / unit, suffix);
  return std::to_string(bytes);
}

// --sizes LO:HI -o DIR: a schedule per size range. Every size LO, 4 LO, ...
// up to HI is searched (with Simple, and with LL128 and LL up to 16 MiB,
// where a step's latency weighs more than their wire overhead); sizes
// whose fastest schedules are the same lowering share a file, whose
// minBytes / maxBytes cover them (the first from 0, the last unlimited).
int synthSizes(const topo::Topology& t, CollectiveKind coll, const SynthArgs& args, double optimum,
               nlohmann::ordered_json* json, std::string* error) {
  auto fail = [&](const std::string& m) {
    *error = m;
    return 2;
  };
  const auto t0 = std::chrono::steady_clock::now();
  if (args.output.empty()) return fail("--sizes writes a file per size range: give -o DIR");
  std::vector<size_t> sizes;
  for (size_t b = args.sizesFrom; b <= args.sizesTo; b *= 4) {
    sizes.push_back(b);
    if (b > args.sizesTo / 4) break;
  }
  if (sizes.back() != args.sizesTo) sizes.push_back(args.sizesTo);
  const Deadline deadline = deadlineOf(args, t0);
  struct Pick {
    size_t bytes;
    std::string protocol;
    synth::Found found;
    synth::LowerOptions lower;
    double ringAlgbw = 0;
  };
  std::vector<Pick> picks;
  const ir::Algorithm ring = algorithms::classicRing(coll, t.ranks(), args.root);
  const auto protocolsOf = [](size_t bytes) {
    return bytes > (size_t{16} << 20) ? std::vector<const char*>{"Simple"}
                                      : std::vector<const char*>{"Simple", "LL128", "LL"};
  };
  // Each search gets an even share of the budget left when it starts, so
  // one that ends early leaves its time to the later ones, the largest
  // sizes, whose simulations take longest (2 x MI250 allreduce, 64M:1G for
  // Chorus's runtimes: with one deadline for all, the 64 MiB and 256 MiB
  // searches took most of it, and 1 GiB kept a plain lowering at 79.6 %).
  size_t searchesLeft = 0;
  for (size_t bytes : sizes) searchesLeft += protocolsOf(bytes).size();
  for (size_t bytes : sizes) {
    std::optional<Pick> best;
    std::string problem;
    for (const char* protocol : protocolsOf(bytes)) {
      Deadline own = deadline;
      if (deadline) {
        const auto now = std::chrono::steady_clock::now();
        own = now + (*deadline - now) / static_cast<int>(searchesLeft);
      }
      --searchesLeft;
      const synth::SearchOptions so = searchOptions(t, coll, args, bytes, protocol, own);
      auto found = synth::searchSchedule(t, so);
      if (!found.isOk()) {
        if (problem.empty()) problem = found.status().message();
        continue;
      }
      if (!best || found.value().kept().algbw > best->found.kept().algbw * (1 + 1e-9))
        best = Pick{bytes, protocol, std::move(found).value(), so.lower, 0};
    }
    if (!best) return fail(fmt::format("{}: {}", sizeText(static_cast<double>(bytes)), problem));
    best->ringAlgbw = simulatedAlgbw(ring, t, bytes, args.inplace, simulatedParts(args));
    picks.push_back(std::move(*best));
  }
  // Sizes whose picks are the same lowering of the same kind of forest
  // share a range.
  auto key = [](const Pick& p) {
    const synth::Tried& k = p.found.kept();
    const synth::Shape& s = p.found.keptShape();
    return std::tuple{p.protocol,       s.kind,        s.headroom,       k.perConnection,
                      k.chunksPerPiece, k.instances,   k.laterLocalSums, k.fewerLocalConnections,
                      k.sliceBytes,     k.halvesInTurn};
  };
  std::error_code ec;
  std::filesystem::create_directories(args.output, ec);
  if (ec) return fail("cannot create " + args.output + ": " + ec.message());
  nlohmann::ordered_json ranges = nlohmann::ordered_json::array();
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  std::vector<std::string> lines;
  for (size_t a = 0; a < picks.size();) {
    size_t b = a;
    while (b + 1 < picks.size() && key(picks[b + 1]) == key(picks[a])) ++b;
    const uint64_t lo = a == 0 ? 0 : picks[a].bytes;
    uint64_t hi = b + 1 == picks.size() ? 0 : picks[b + 1].bytes - 1;
    // The last range of a schedule ordered over the whole call by lags ends
    // at its largest size: a larger call would overlap what its lags order
    // (LowerOptions::callBytes).
    const bool bounded = hi == 0 && synth::ordersWholeCall(picks[a].found.kept());
    if (bounded) hi = picks[b].bytes;
    const Pick& p = picks[a];
    std::string xml;
    double algbw = 0, busbw = 0;
    if (std::string problem =
            prove(t, coll, p.found, p.lower, p.bytes, lo, hi, &xml, &algbw, &busbw);
        !problem.empty())
      return fail(problem);
    const std::string file = (std::filesystem::path(args.output) /
                              fmt::format("{}_{}_{}.xml", p.lower.name, sizeTag(lo),
                                          hi == 0 ? "max" : sizeTag(bounded ? hi : hi + 1)))
                                 .string();
    Status st = writeTextFile(xml, file);
    if (!st.isOk()) return fail(st.message());
    const synth::Shape& s = p.found.keptShape();
    const synth::Tried& k = p.found.kept();
    ranges.push_back({{"file", file},
                      {"min_bytes", lo},
                      {"max_bytes", hi},
                      {"protocol", p.protocol},
                      {"forest_kind", s.kind},
                      {"headroom_percent", s.headroom},
                      {"pieces_per_connection", k.perConnection},
                      {"chunks_per_piece", k.chunksPerPiece},
                      {"slice_bytes", k.sliceBytes},
                      {"instances", k.instances},
                      {"later_local_sums", k.laterLocalSums},
                      {"fewer_local_connections", k.fewerLocalConnections},
                      {"halves_in_turn", k.halvesInTurn},
                      {"whole_call", synth::ordersWholeCall(k)}});
    for (size_t i = a; i <= b; ++i) {
      const double mine = picks[i].found.kept().algbw;
      rows.push_back({{"bytes", picks[i].bytes},
                      {"file", file},
                      {"simulated_algbw", mine},
                      {"ring_algbw", picks[i].ringAlgbw},
                      {"fraction_of_optimum", mine / optimum}});
      lines.push_back(fmt::format(
          "{:>10}  {:>9.3f}  {:>9.3f}  {:>6.2f}x  {:>5.1f} %  {} {} {}{}, {} per connection, {} "
          "chunks per piece, {} instance(s){}",
          sizeText(static_cast<double>(picks[i].bytes)), mine, picks[i].ringAlgbw,
          picks[i].ringAlgbw > 0 ? mine / picks[i].ringAlgbw : 0.0, 100 * mine / optimum,
          std::filesystem::path(file).filename().string(), picks[i].protocol, s.kind,
          s.headroom > 0 ? fmt::format(" ({} % headroom)", s.headroom) : "", k.perConnection,
          k.chunksPerPiece, k.instances, formNote(k)));
    }
    a = b + 1;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (json != nullptr) {
    (*json)["ranges"] = std::move(ranges);
    (*json)["sizes"] = std::move(rows);
    (*json)["generation_seconds"] = seconds;
    return 0;
  }
  fmt::print(
      "sizes     {} range(s) written to {} in {:.3f} s (simulated algbw, GB/s; the "
      "built-in {}):\n",
      ranges.size(), args.output, seconds,
      coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce ? "chain" : "ring");
  fmt::print("{:>10}  {:>9}  {:>9}  {:>7}  {:>7}  file, protocol, forest, lowering\n", "size",
             "synth", "built-in", "ratio", "optimum");
  for (const std::string& l : lines) fmt::print("{}\n", l);
  return 0;
}

struct AllToAllSchedule {
  int pieces = 0;
  size_t paths = 0, relayed = 0;  // block paths, and those through another rank
  double algbw = 0, busbw = 0;    // simulated, as written
  double allPairs = 0, twoStep = 0;
  int gpusPerBox = 0;  // two-step's node size (0: one box)
  double seconds = 0;
  bool budgetSpent = false;  // pieces per block left untried
  std::string xml;
};

// The LP's flows as paths (alltoall.h), lowered with 1, 2, 4 and 8 pieces
// per block, simulated at --size; the fastest proved and kept, beside the
// all-pairs and two-step programs on the same topology.
std::string buildAllToAll(const topo::Topology& t, const SynthArgs& args,
                          const synth::AllToAllBound& b, AllToAllSchedule& out) {
  const auto t0 = std::chrono::steady_clock::now();
  const int n = t.ranks();
  const synth::AllToAllPaths paths = synth::allToAllPaths(t, b);
  for (const auto& row : paths)
    for (const auto& ways : row)
      for (const synth::BlockPath& p : ways) {
        ++out.paths;
        out.relayed += p.ranks.size() > 2 ? 1 : 0;
      }
  synth::LowerOptions lo;
  lo.name = args.name.empty() ? "synth_alltoall" : args.name;
  lo.protocol = args.protocol;
  if (args.inplace) return "the alltoall schedule serves out-of-place calls only (no --inplace)";
  // A lowering may deadlock with the executor's 8 slots per connection
  // (relays wait on one another): the simulator says so, and it is passed
  // over.
  std::string passedOver;
  const Deadline deadline = deadlineOf(args, t0);
  for (int k : {1, 2, 4, 8}) {
    if (out.pieces > 0 && deadline && std::chrono::steady_clock::now() > *deadline) {
      out.budgetSpent = true;
      break;
    }
    compiler::Compiled c = synth::lowerAllToAll(n, paths, k, lo);
    if (!c.ok()) {
      return "the alltoall paths do not compile (a bug):\n" +
             (c.diagnostics.items().empty() ? std::string()
                                            : c.diagnostics.items().front().format());
    }
    const double algbw = simulatedAlgbw(c.algo, t, args.size, false, kAllToAllParts, &passedOver);
    if (algbw > out.algbw * (1 + 1e-9)) {
      out.algbw = algbw;
      out.pieces = k;
    }
  }
  if (out.pieces == 0)
    return "no lowering of the alltoall paths serves " + sizeText(static_cast<double>(args.size)) +
           ": " + passedOver;
  lang::Program program(synth::allToAllProgramOptions(n, out.pieces, lo));
  synth::recordAllToAll(program, paths);
  if (std::string problem = proveProgram(program, t, args.size, kAllToAllParts, 0, 0, &out.xml,
                                         &out.algbw, &out.busbw);
      !problem.empty())
    return problem;
  // The programs it is compared with.
  out.allPairs = simulatedAlgbw(algorithms::directAllToAll(n), t, args.size, false, kAllToAllParts);
  std::map<int, int> perBox;
  for (int r = 0; r < n; ++r) ++perBox[t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box];
  if (perBox.size() > 1) {
    out.gpusPerBox = perBox.begin()->second;
    lang::ProgramOptions po;
    po.name = "twostep_alltoall";
    po.collective = "alltoall";
    po.ranks = n;
    po.gpusPerNode = out.gpusPerBox;
    lang::Program two(po);
    lang::findProgram("twostep_alltoall")->build(two);
    compiler::Compiled c = compiler::compile(two);
    if (c.ok()) out.twoStep = simulatedAlgbw(c.algo, t, args.size, false, kAllToAllParts);
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return "";
}

// Alltoall: the multicommodity bound (alltoall.h) and, unless
// --bound-only, the schedule its flows make. With `json`, the result goes
// there instead of stdout.
int runAllToAll(const topo::Topology& t, const SynthArgs& args, nlohmann::ordered_json* json,
                std::string* xml, std::string* error, bool print) {
  auto fail = [&](const std::string& m) {
    *error = m;
    return 2;
  };
  if (args.sizesTo > 0) return fail("--sizes: alltoall has one schedule (give --size)");
  auto bound = synth::allToAllBound(t);
  if (!bound.isOk()) return fail(bound.status().message());
  const synth::AllToAllBound& b = bound.value();
  AllToAllSchedule sched;
  if (!args.boundOnly) {
    if (std::string problem = buildAllToAll(t, args, b, sched); !problem.empty())
      return fail(problem);
    if (!args.output.empty()) {
      Status st = writeTextFile(sched.xml, args.output);
      if (!st.isOk()) return fail(st.message());
    }
    if (xml != nullptr) *xml = sched.xml;
  }
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
    if (!args.boundOnly) {
      j["paths"] = sched.paths;
      j["relayed_paths"] = sched.relayed;
      j["pieces_per_block"] = sched.pieces;
      j["budget_spent"] = sched.budgetSpent;
      j["generation_seconds"] = sched.seconds;
      j["simulated_bytes"] = args.size;
      j["simulated_algbw"] = sched.algbw;
      j["simulated_busbw"] = sched.busbw;
      j["allpairs_algbw"] = sched.allPairs;
      if (sched.gpusPerBox > 0) j["twostep_algbw"] = sched.twoStep;
      j["output"] = args.output;
    }
    if (!print) return 0;
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
  if (args.boundOnly) return 0;
  fmt::print(
      "schedule  the flows as {} block paths ({} relayed by another rank), {} piece(s) per "
      "block, verified{} in {:.3f} s\n",
      sched.paths, sched.relayed, sched.pieces,
      args.output.empty() ? "" : ", written to " + args.output, sched.seconds);
  if (sched.budgetSpent)
    fmt::print("note      more pieces per block not tried: the time budget was spent\n");
  fmt::print("simulated {} on {}: algbw {:.3f} GB/s, busbw {:.3f} GB/s ({:.1f} % of the optimum)\n",
             sizeText(static_cast<double>(args.size)), t.name, sched.algbw, sched.busbw,
             100 * sched.algbw / b.algbw);
  fmt::print("          all-pairs (direct_alltoall) {:.3f} GB/s ({:.2f}x of it)", sched.allPairs,
             sched.allPairs > 0 ? sched.algbw / sched.allPairs : 0.0);
  if (sched.gpusPerBox > 0)
    fmt::print(", two-step ({} per box) {:.3f} GB/s ({:.2f}x)", sched.gpusPerBox, sched.twoStep,
               sched.twoStep > 0 ? sched.algbw / sched.twoStep : 0.0);
  fmt::print("\n");
  return 0;
}

}  // namespace

size_t simulatedParts(const SynthArgs& args) { return synth::simulatedParts(targetOf(args)); }

int synth(const SynthArgs& args, nlohmann::ordered_json* json, std::string* xml, std::string* error,
          bool print) {
  auto fail = [&](const std::string& m) {
    *error = m;
    return 2;
  };
  CollectiveKind coll = parseCollective(args.collective);
  if (coll == CollectiveKind::kCustom)
    return fail("unknown collective '" + args.collective +
                "' (allgather, reducescatter, allreduce, broadcast, reduce, alltoall)");
  if (args.target != "msccl" && args.target != "chorus")
    return fail("unknown target '" + args.target +
                "' (msccl: the MSCCL executor's limits; chorus: Chorus's runtimes)");
  std::string spec = args.topo;
  if (!args.ranks.empty()) spec += "@" + args.ranks;
  auto topology = topo::loadTopology(spec);
  if (!topology.isOk()) return fail(topology.status().message());
  const topo::Topology& t = topology.value();
  if (coll == CollectiveKind::kAllToAll) return runAllToAll(t, args, json, xml, error, print);
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
  const bool sizes = args.sizesTo > 0;
  if (sizes && args.boundOnly) return fail("--sizes writes schedules; --bound-only writes none");
  if (!args.boundOnly && !sizes) {
    std::string problem = buildSchedule(t, coll, args, sched);
    if (!problem.empty()) return fail(problem);
    // What is left of the budget, but 1 to 5 s.
    Deadline probe;
    if (args.timeBudget > 0) {
      const auto now = std::chrono::steady_clock::now();
      const double left = args.timeBudget - std::chrono::duration<double>(now - t0).count();
      probe = now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                        std::chrono::duration<double>(std::clamp(left, 1.0, 5.0)));
    }
    sched.shortfall = shortfallOf(t, args, sched, b.algbw.value(), probe);
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
    if (sizes) return synthSizes(t, coll, args, b.algbw.value(), &j, error);
    if (!args.boundOnly) {
      j["pieces"] = sched.pieces;
      j["trees"] = sched.trees;
      // Every tree: its root, its pieces of k and its arcs (rank ids; a
      // scatter tree's data flows from `to` to `from`).
      nlohmann::ordered_json forests = nlohmann::ordered_json::array();
      const synth::Shape& shape = sched.shape();
      for (const auto& [kind, f] :
           {std::pair{"gather", &shape.gather}, std::pair{"scatter", &shape.scatter}}) {
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
      if (shape.gather) j["gather_forest_algbw"] = shape.gather->algbw.value();
      if (shape.scatter) j["scatter_forest_algbw"] = shape.scatter->algbw.value();
      j["forest_kind"] = shape.kind;
      j["pieces_per_connection"] = sched.lowering().perConnection;
      j["chunks_per_piece"] = sched.lowering().chunksPerPiece;
      j["slice_bytes"] = sched.lowering().sliceBytes;
      j["headroom_percent"] = shape.headroom;
      j["instances"] = sched.lowering().instances;
      j["later_local_sums"] = sched.lowering().laterLocalSums;
      j["fewer_local_connections"] = sched.lowering().fewerLocalConnections;
      j["halves_in_turn"] = sched.lowering().halvesInTurn;
      j["whole_call"] = synth::ordersWholeCall(sched.lowering());
      j["target"] = args.target;
      j["most_steps_per_threadblock"] = sched.mostSteps;
      j["xml_bytes"] = sched.xml.size();
      j["lowerings_tried"] = sched.found.tried.size();
      j["notes"] = sched.found.notes;
      j["budget_spent"] = sched.found.budgetSpent;
      nlohmann::ordered_json tried = nlohmann::ordered_json::array();
      for (const synth::Tried& tr : sched.found.tried) {
        const synth::Shape& sh = sched.found.shapes[static_cast<size_t>(tr.shape)];
        nlohmann::ordered_json e;
        e["forest_kind"] = sh.kind;
        e["headroom_percent"] = sh.headroom;
        e["pieces_per_connection"] = tr.perConnection;
        e["chunks_per_piece"] = tr.chunksPerPiece;
        e["slice_bytes"] = tr.sliceBytes;
        e["instances"] = tr.instances;
        e["later_local_sums"] = tr.laterLocalSums;
        e["fewer_local_connections"] = tr.fewerLocalConnections;
        e["halves_in_turn"] = tr.halvesInTurn;
        e["whole_call"] = synth::ordersWholeCall(tr);
        e["simulated_algbw"] = tr.algbw;
        e["seconds"] = tr.seconds;
        if (!tr.passedOver.empty()) e["passed_over"] = tr.passedOver;
        tried.push_back(std::move(e));
      }
      j["lowerings"] = std::move(tried);
      j["generation_seconds"] = sched.seconds;
      j["simulated_bytes"] = sched.simBytes;
      j["simulated_algbw"] = sched.simAlgbw;
      j["simulated_busbw"] = sched.simBusbw;
      j["share_of_optimum"] = sched.simAlgbw / b.algbw.value();
      j["classic"] = sched.classicName;
      j["classic_algbw"] = sched.classicAlgbw;
      j["classic_kept"] = sched.classicKept;
      j["shortfall"] = sched.shortfall;
      j["output"] = args.output;
    }
    if (!print) return 0;
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
  if (sizes) return synthSizes(t, coll, args, b.algbw.value(), nullptr, error);
  const synth::Shape& shape = sched.shape();
  const std::string kind = shape.kind == "packed"    ? std::string()
                           : shape.kind == "shallow" ? " shallow (one per root, fewest hops)"
                                                     : " " + shape.kind;
  fmt::print(
      "trees     {}{} ({} piece(s) per shard), {} maximum flows\n"
      "lowered   {} piece(s) per connection, {} chunk(s) per piece, {} instance(s){} (the "
      "simulator's pick of {} lowerings), verified{} in {:.3f} s\n",
      sched.trees,
      kind + (shape.headroom > 0
                  ? fmt::format(", {} % headroom on the links between boxes", shape.headroom)
                  : ""),
      sched.pieces, sched.found.maxflows, sched.lowering().perConnection,
      sched.lowering().chunksPerPiece, sched.lowering().instances, formNote(sched.lowering()),
      sched.found.tried.size(), args.output.empty() ? "" : ", written to " + args.output,
      sched.seconds);
  // A schedule past MSCCL's executor runs on Chorus's runtimes alone.
  if (sched.mostSteps > ir::kMscclMaxSteps)
    fmt::print(
        "target    Chorus's runtimes: up to {} steps per threadblock, past the MSCCL executor's "
        "{}; {} of XML\n",
        sched.mostSteps, ir::kMscclMaxSteps, sizeText(static_cast<double>(sched.xml.size())));
  else if (sched.lowering().sliceBytes > 0)
    fmt::print(
        "target    Chorus's runtimes: slices of {} (the MSCCL executor ignores sliceBytes); up to "
        "{} steps per threadblock, {} of XML\n",
        sizeText(static_cast<double>(sched.lowering().sliceBytes)), sched.mostSteps,
        sizeText(static_cast<double>(sched.xml.size())));
  if (synth::ordersWholeCall(sched.lowering()))
    fmt::print(
        "          its lags order each connection over a call of {} (maxBytes): a larger call "
        "would overlap what they order\n",
        sizeText(static_cast<double>(sched.simBytes)));
  for (const auto* f : {&shape.gather, &shape.scatter})
    if (f->has_value() && (*f)->algbw.value() > 0 &&
        (*f)->algbw.value() < b.algbw.value() * (1 - 1e-12) && coll != CollectiveKind::kAllReduce)
      fmt::print(
          "          {} trees reach {:.3f} GB/s ({}: {:.1f} % of the optimum)\n",
          shape.headroom > 0
              ? fmt::format("with the links between boxes at {} %, the", 100 - shape.headroom)
              : (args.method == "blink" ? "the rounded" : "the" + kind),
          (*f)->algbw.value(), (*f)->algbw.str(), 100 * (*f)->algbw.value() / b.algbw.value());
  for (const std::string& note : sched.found.notes) fmt::print("note      {}\n", note);
  if (args.candidates) {
    fmt::print("tried     forest, pieces per connection, chunks per piece, instances: algbw\n");
    for (const synth::Tried& tr : sched.found.tried) {
      const synth::Shape& sh = sched.found.shapes[static_cast<size_t>(tr.shape)];
      fmt::print(
          "          {}{} {} {} {}{}: {}{}\n", sh.kind,
          sh.headroom > 0 ? fmt::format(" ({} %)", sh.headroom) : "", tr.perConnection,
          tr.chunksPerPiece, tr.instances, formNote(tr),
          tr.algbw > 0 ? fmt::format("{:.3f} GB/s", tr.algbw) : "passed over: " + tr.passedOver,
          &tr == &sched.lowering() ? "  (kept)" : "");
    }
  }
  if (sched.classicKept)
    fmt::print(
        "kept      the classic {} ({:.3f} GB/s): every synthesized lowering simulates slower\n",
        sched.classicName, sched.classicAlgbw);
  fmt::print(
      "simulated {} on {}: algbw {:.3f} GB/s, busbw {:.3f} GB/s ({:.1f} % of the optimum){}\n",
      sizeText(static_cast<double>(sched.simBytes)), t.name, sched.simAlgbw, sched.simBusbw,
      100 * sched.simAlgbw / b.algbw.value(),
      simulatedParts(args) == 1 ? ", each slice moved whole as Chorus's runtimes move it "
                                  "(chorus sim --parts 1)"
                                : "");
  if (!sched.classicKept && sched.classicAlgbw > 0)
    fmt::print("          the best classic program, {}, {:.3f} GB/s ({:.2f}x of it)\n",
               sched.classicName, sched.classicAlgbw, sched.simAlgbw / sched.classicAlgbw);
  for (const std::string& why : sched.shortfall) fmt::print("below 90  {}\n", why);
  return 0;
}

int synthesize(const SynthArgs& args, std::string* json, std::string* xml, std::string* error) {
  nlohmann::ordered_json j;
  int rc = synth(args, &j, xml, error, false);
  if (rc == 0) *json = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return rc;
}

std::string sizeText(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  return fmt::format("{:g} {}", bytes, units[u]);
}

}  // namespace chorus::workflows
