// `chorus topo` (list, show) and `chorus sim` (one algorithm or several
// compared, over a sweep of sizes, on a topology).
#include <fmt/core.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "algorithms/classic.h"
#include "compiler/program_file.h"
#include "core/io.h"
#include "ir/json_io.h"
#include "sim/simulator.h"
#include "tools/chorus/commands.h"
#include "topo/json.h"
#include "topo/presets.h"
#include "workflows/files.h"

namespace chorus::cli {

namespace {

std::string linkName(const topo::Topology& t, int l) {
  const topo::Link& k = t.links[static_cast<size_t>(l)];
  return t.nodes[static_cast<size_t>(k.from)].name + " -> " +
         t.nodes[static_cast<size_t>(k.to)].name;
}

}  // namespace

int runTopo(const TopoArgs& args) {
  if (args.list) {
    for (const topo::PresetInfo& p : topo::presets())
      fmt::print("{:<26} {}\n", p.name + p.arguments, p.description);
    fmt::print("any preset takes @R,R,... to keep only those ranks (e.g. dgx1@0,1,4,5)\n");
    return 0;
  }
  auto t = topo::loadTopology(args.name);
  if (!t.isOk()) {
    fmt::print(stderr, "chorus topo: {}\n", t.status().message());
    return 2;
  }
  const topo::Topology& g = t.value();
  if (args.json) {
    fmt::print("{}", topo::writeTopology(g));
    return 0;
  }
  if (args.dot) {
    fmt::print("digraph \"{}\" {{\n  node [fontname=Helvetica];\n", g.name);
    for (const topo::Node& n : g.nodes)
      fmt::print("  \"{}\" [shape={}];\n", n.name,
                 n.kind == topo::NodeKind::kRank     ? "box"
                 : n.kind == topo::NodeKind::kSwitch ? "ellipse"
                                                     : "diamond");
    for (const topo::Link& l : g.links)
      fmt::print("  \"{}\" -> \"{}\" [label=\"{:g}\"];\n",
                 g.nodes[static_cast<size_t>(l.from)].name, g.nodes[static_cast<size_t>(l.to)].name,
                 l.bandwidth);
    fmt::print("}}\n");
    return 0;
  }
  int switches = 0, nics = 0;
  for (const topo::Node& n : g.nodes) {
    switches += n.kind == topo::NodeKind::kSwitch;
    nics += n.kind == topo::NodeKind::kNic;
  }
  fmt::print("topology {}: {} ranks, {} switches, {} NICs, {} links (one direction each)\n", g.name,
             g.ranks(), switches, nics, g.links.size());
  if (g.memoryBandwidth > 0) fmt::print("rank memory bandwidth {:g} GB/s\n", g.memoryBandwidth);
  // Per node: links out, and the summed bandwidth out and in (one pass).
  std::vector<std::vector<int>> outLinks(g.nodes.size());
  std::vector<double> outBw(g.nodes.size(), 0), inBw(g.nodes.size(), 0);
  for (size_t i = 0; i < g.links.size(); ++i) {
    const topo::Link& l = g.links[i];
    outLinks[static_cast<size_t>(l.from)].push_back(static_cast<int>(i));
    outBw[static_cast<size_t>(l.from)] += l.bandwidth;
    inBw[static_cast<size_t>(l.to)] += l.bandwidth;
  }
  fmt::print("{:>8} {:>4}  {:>10} {:>10}  links out (GB/s, latency us, kind)\n", "rank", "box",
             "out GB/s", "in GB/s");
  for (int r = 0; r < g.ranks(); ++r) {
    auto id = static_cast<size_t>(g.nodeOfRank(r));
    const topo::Node& n = g.nodes[id];
    std::string list;
    for (int li : outLinks[id]) {
      const topo::Link& l = g.links[static_cast<size_t>(li)];
      list += fmt::format("{}{} {:g} {:g} {}", list.empty() ? "" : ", ",
                          g.nodes[static_cast<size_t>(l.to)].name, l.bandwidth, l.latency * 1e6,
                          topo::linkKindName(l.kind));
    }
    if (n.sendCap > 0) list += fmt::format("; sends at most {:g}", n.sendCap);
    if (n.recvCap > 0) list += fmt::format("; receives at most {:g}", n.recvCap);
    fmt::print("{:>8} {:>4}  {:>10g} {:>10g}  {}\n", n.name, n.box, outBw[id], inBw[id], list);
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].kind == topo::NodeKind::kRank) continue;
    fmt::print("{:>8} {:>6}  {} links out, {:g} GB/s in all\n", g.nodes[i].name,
               topo::nodeKindName(g.nodes[i].kind), outLinks[i].size(), outBw[i]);
  }
  return 0;
}

// `chorus sim DIR`: at each size the file the runtime would pick (docs/spec/IR.md
// section 7: same collective and ranks, the call's form allowed, minBytes
// <= bytes <= maxBytes, the first in sorted order), against the built-in
// ring on the same topology.
int simulateSet(const topo::Topology& t, const std::vector<std::string>& files,
                const std::vector<ir::Algorithm>& algos, const std::vector<size_t>& sizes,
                sim::Options o, const SimArgs& args) {
  const ir::Algorithm& first = algos.front();
  for (size_t i = 1; i < algos.size(); ++i)
    if (algos[i].collective != first.collective || algos[i].ngpus != first.ngpus) {
      fmt::print(stderr,
                 "chorus sim: {} is {} on {} ranks; {} is {} on {}: one set holds one "
                 "collective on one rank count\n",
                 files[i], algos[i].collectiveName, algos[i].ngpus, files[0], first.collectiveName,
                 first.ngpus);
      return 2;
    }
  // Broadcast and reduce: the chain from rank 0 (a file does not name its
  // root; the simulated time does not depend on which rank it is on a
  // symmetric topology).
  const ir::Algorithm ring = algorithms::classicRing(first.collective, first.ngpus, 0);
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  if (!args.json) {
    fmt::print(
        "# chorus sim on {} ({} ranks): the set in {} ({} files), {} {}, against the "
        "built-in {}\n",
        t.name, t.ranks(), args.files[0], files.size(), first.collectiveName,
        args.inplace ? "in place" : "out of place", ring.name);
    fmt::print("{:>12}  {:>11} {:>9} {:>9}  {:>9}  {:>7}  file\n", "size", "time (us)", "algbw",
               "busbw", "ring busbw", "ratio");
  }
  for (size_t bytes : sizes) {
    o.bytes = bytes;
    o.inplace = args.inplace;
    size_t pick = algos.size();
    for (size_t i = 0; i < algos.size() && pick == algos.size(); ++i) {
      const ir::Algorithm& a = algos[i];
      const bool form = args.inplace ? a.inplace : a.outofplace;
      if (form && a.minBytes <= bytes && (a.maxBytes == 0 || bytes <= a.maxBytes)) pick = i;
    }
    auto theirs = sim::simulate(ring, t, o);
    nlohmann::ordered_json row = {{"bytes", bytes}};
    if (theirs.isOk()) row["ring_busbw"] = theirs.value().busbw;
    std::string line;
    if (pick == algos.size()) {
      row["file"] = nullptr;
      line = fmt::format("{:>12}  {:>11} {:>9} {:>9}  {:>9.3f}  {:>7}  none (the built-in runs)",
                         sizeText(static_cast<double>(bytes)), "-", "-", "-",
                         theirs.isOk() ? theirs.value().busbw : 0.0, "-");
    } else {
      auto r = sim::simulate(algos[pick], t, o);
      if (!r.isOk()) {
        fmt::print(stderr, "chorus sim: {}: {}\n", files[pick], r.status().message());
        return 2;
      }
      const sim::Result& mine = r.value();
      const double ratio =
          theirs.isOk() && theirs.value().busbw > 0 ? mine.busbw / theirs.value().busbw : 0;
      row["file"] = files[pick];
      row["time"] = mine.time;
      row["algbw"] = mine.algbw;
      row["busbw"] = mine.busbw;
      row["ratio"] = ratio;
      line = fmt::format("{:>12}  {:>11.2f} {:>9.3f} {:>9.3f}  {:>9.3f}  {:>6.2f}x  {}",
                         sizeText(static_cast<double>(bytes)), mine.time * 1e6, mine.algbw,
                         mine.busbw, theirs.isOk() ? theirs.value().busbw : 0.0, ratio,
                         std::filesystem::path(files[pick]).filename().string());
    }
    doc.push_back(std::move(row));
    if (!args.json) fmt::print("{}\n", line);
  }
  if (args.json)
    fmt::print("{}\n", doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  return 0;
}

int runSim(const SimArgs& args) {
  auto fail = [](const std::string& m) {
    fmt::print(stderr, "chorus sim: {}\n", m);
    return 2;
  };
  auto topology = topo::loadTopology(args.topo);
  if (!topology.isOk()) return fail(topology.status().message());
  // A directory: the algorithms in it as the runtime picks among them.
  std::vector<std::string> files = args.files;
  const bool set = files.size() == 1 && std::filesystem::is_directory(files[0]);
  if (set) {
    files.clear();
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(args.files[0], ec))
      if (e.path().extension() == ".xml") files.push_back(e.path().string());
    if (ec) return fail(args.files[0] + ": " + ec.message());
    std::sort(files.begin(), files.end());
    if (files.empty()) return fail(args.files[0] + ": no .xml algorithm files in it");
  }
  std::vector<ir::Algorithm> algos;
  for (const std::string& f : files) {
    // A built-in's name (chorus perf --algo's) that is not a file: made for
    // the topology's ranks, rooted at 0.
    if (!std::filesystem::exists(f)) {
      auto builtin = algorithms::makeClassic(f, topology.value().ranks());
      if (builtin.isOk()) {
        algos.push_back(std::move(builtin).value());
        continue;
      }
      if (builtin.status().code() != StatusCode::kNotFound)
        return fail(f + ": " + builtin.status().message());
    }
    ir::ReadResult rr = ir::readAlgorithmFile(f, workflows::readOptions());
    if (!rr.algorithm) {
      rr.diagnostics.sort();
      for (const auto& d : rr.diagnostics.items()) fmt::print(stderr, "{}\n", d.format());
      return 2;
    }
    algos.push_back(std::move(*rr.algorithm));
  }
  std::vector<size_t> sizes;
  size_t lo = args.bytes > 0 ? args.bytes : args.minBytes,
         hi = args.bytes > 0 ? args.bytes : args.maxBytes;
  if (lo == 0 || hi < lo || args.factor < 2) return fail("sizes: need 0 < -b <= -e and -f >= 2");
  for (size_t b = lo; b <= hi; b *= static_cast<size_t>(args.factor)) {
    sizes.push_back(b);
    if (b > hi / static_cast<size_t>(args.factor)) break;
  }
  sim::Options o;
  o.slots = args.slots;
  o.instances = args.instances;
  if (auto p = ir::parseProtocol(args.protocol)) o.protocol = static_cast<int>(*p);
  o.sliceBytes = args.sliceBytes;
  o.partsPerSlice = args.parts;
  o.stepLatency = args.stepLatencyUs >= 0 ? args.stepLatencyUs * 1e-6 : -1;
  if (set) return simulateSet(topology.value(), files, algos, sizes, o, args);
  const bool compare = algos.size() > 1;
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  if (!args.json) {
    fmt::print(
        "# chorus sim on {} ({} ranks){}{}\n", topology.value().name, topology.value().ranks(),
        args.instances > 1 ? fmt::format(", each threadblock as {} instances", args.instances)
                           : std::string(),
        args.protocol.empty() ? std::string() : ", on " + args.protocol + " slots");
    for (size_t i = 0; i < algos.size(); ++i)
      fmt::print("# [{}] {} ({}): {} ranks, {}, {}\n", i, algos[i].name, args.files[i],
                 algos[i].ngpus, algos[i].collectiveName, ir::protocolName(algos[i].protocol));
    fmt::print("{:>12}", "size");
    for (size_t i = 0; i < algos.size(); ++i)
      fmt::print("  {:>11} {:>9} {:>9}", compare ? fmt::format("[{}] us", i) : "time (us)", "algbw",
                 "busbw");
    fmt::print("{}\n", compare ? "  best" : "");
  }
  sim::Result last;
  for (size_t bytes : sizes) {
    o.bytes = bytes;
    nlohmann::ordered_json row = {{"bytes", bytes}};
    nlohmann::ordered_json per = nlohmann::ordered_json::array();
    std::string line = fmt::format("{:>12}", sizeText(static_cast<double>(bytes)));
    double best = 0;
    size_t bestAt = 0;
    for (size_t i = 0; i < algos.size(); ++i) {
      o.inplace = args.inplace || !algos[i].outofplace;
      o.trace = !args.trace.empty() && bytes == sizes.back() && i == 0;
      auto r = sim::simulate(algos[i], topology.value(), o);
      if (!r.isOk()) {
        if (r.status().code() != StatusCode::kInvalidArgument || !compare) {
          fmt::print(stderr, "chorus sim: {}: {}\n", args.files[i], r.status().message());
          return 2;
        }
        line += fmt::format("  {:>11} {:>9} {:>9}", "-", "-", "-");
        per.push_back({{"file", args.files[i]}, {"error", r.status().message()}});
        continue;
      }
      const sim::Result& res = r.value();
      line += fmt::format("  {:>11.2f} {:>9.3f} {:>9.3f}", res.time * 1e6, res.algbw, res.busbw);
      per.push_back({{"file", args.files[i]},
                     {"time", res.time},
                     {"algbw", res.algbw},
                     {"busbw", res.busbw}});
      if (res.busbw > best) {
        best = res.busbw;
        bestAt = i;
      }
      if (o.trace) {
        Status st = writeTextFile(res.trace, args.trace);
        if (!st.isOk()) return fail(st.message());
      }
      if (i == 0) last = r.value();
    }
    if (compare) line += fmt::format("  [{}]", bestAt);
    row["results"] = per;
    doc.push_back(row);
    if (!args.json) fmt::print("{}\n", line);
  }
  if (args.json) {
    fmt::print("{}\n", doc.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
    return 0;
  }
  if (compare) return 0;
  // Where the time went at the largest size.
  const topo::Topology& g = topology.value();
  std::vector<size_t> order(last.linkBytes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto busy = [&](size_t l) { return last.linkBytes[l] / g.links[l].bandwidth; };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return busy(a) > busy(b); });
  fmt::print(
      "# at {}: {} transfers, {} slice iteration(s); busiest links (utilization = bytes / "
      "(bandwidth x time)):\n",
      sizeText(static_cast<double>(sizes.back())), last.transfers, last.iterations);
  for (size_t k = 0; k < std::min<size_t>(5, order.size()) && last.linkBytes[order[k]] > 0; ++k) {
    const topo::Link& l = g.links[order[k]];
    fmt::print("#   {:<28} {:>6.1f} %  ({} over {:g} GB/s)\n",
               linkName(g, static_cast<int>(order[k])),
               100 * last.linkBytes[order[k]] / (l.bandwidth * 1e9 * last.time),
               sizeText(last.linkBytes[order[k]]), l.bandwidth);
  }
  if (args.timeline > 0) {
    // The same run again (o still holds the largest size's options), the
    // links' bytes kept per interval.
    sim::Options to = o;
    to.criticalPath = false;
    to.trace = false;
    to.timelineStep = last.time / args.timeline;
    auto r = sim::simulate(algos.front(), g, to);
    if (!r.isOk()) return fail(r.status().message());
    const auto& tl = r.value().timeline;
    fmt::print("# utilization (%) of {} per {:.2f} us, first to last:\n",
               args.links.empty() ? "the busiest links" : "links named *" + args.links + "*",
               to.timelineStep * 1e6);
    // The 8 busiest, or every link whose name has --links in it.
    std::vector<size_t> rows;
    for (size_t l : order)
      if (last.linkBytes[l] > 0 &&
          (args.links.empty()
               ? rows.size() < 8
               : linkName(g, static_cast<int>(l)).find(args.links) != std::string::npos))
        rows.push_back(l);
    for (size_t k : rows) {
      const double full = g.links[k].bandwidth * 1e9 * to.timelineStep;
      std::string row;
      for (double bytes : tl[k]) row += fmt::format(" {:3.0f}", 100 * bytes / full);
      fmt::print("#   {:<28}{}\n", linkName(g, static_cast<int>(k)), row);
    }
  }
  if (!last.critical.empty()) {
    std::map<std::string, int> why;
    for (const sim::PathStep& p : last.critical) ++why[p.waited];
    std::string whyText;
    for (auto& [w, n] : why) whyText += fmt::format("{}{} {}", whyText.empty() ? "" : ", ", n, w);
    fmt::print("# critical path: {} steps ({}); last ones:\n", last.critical.size(), whyText);
    for (size_t k = last.critical.size() > 6 ? last.critical.size() - 6 : 0;
         k < last.critical.size(); ++k) {
      const sim::PathStep& p = last.critical[k];
      fmt::print("#   rank {} tb {} step {} {} (iteration {}) {:.2f}..{:.2f} us, waited for {}\n",
                 p.rank, p.tb, p.step, ir::stepTypeName(p.type), p.iteration, p.start * 1e6,
                 p.end * 1e6, p.waited);
    }
  }
  if (!args.trace.empty())
    fmt::print("# trace of {} written to {} (open it in https://ui.perfetto.dev)\n",
               sizeText(static_cast<double>(sizes.back())), args.trace);
  return 0;
}

}  // namespace chorus::cli
