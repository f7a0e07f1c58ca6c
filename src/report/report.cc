#include "report/report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/diagnostic_json.h"
#include "ir/validate.h"
#include "report/assets.h"
#include "sim/simulator.h"
#include "synth/alltoall.h"
#include "synth/bound.h"
#include "verify/graph.h"
#include "verify/verifier.h"

namespace chorus::report {
namespace {

using json = nlohmann::json;

// ---- Measured curves -------------------------------------------------------

std::vector<std::string_view> splitCsv(std::string_view line) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t comma = line.find(',', start);
    out.push_back(line.substr(start, comma == std::string_view::npos ? comma : comma - start));
    if (comma == std::string_view::npos) return out;
    start = comma + 1;
  }
}

bool parseNumber(std::string_view s, double* out) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.remove_suffix(1);
  if (s.empty()) return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && std::isfinite(*out);
}

// The implementation a busbw column measures: chorus perf's oop_/ip_
// columns, peer_compare.sh's chorus_/mpi_/gloo_
// columns (and the older chorus_oop_/mpi_ip_ ones).
std::optional<std::string> busbwColumn(std::string_view name) {
  if (name == "oop_busbw_gbs") return "chorus";
  if (name == "ip_busbw_gbs") return "chorus in place";
  for (std::string_view impl : {"chorus", "mpi", "gloo"}) {
    if (name.substr(0, impl.size()) != impl) continue;
    std::string_view rest = name.substr(impl.size());
    if (rest == "_busbw" || rest == "_oop_busbw") return std::string(impl);
    if (rest == "_ip_busbw") return std::string(impl) + " in place";
  }
  return std::nullopt;
}

}  // namespace

Result<PerfFile> parsePerfCsv(std::string_view text, const std::string& path) {
  PerfFile out;
  out.path = path;
  auto bad = [&](int line, const std::string& what) {
    return Status(StatusCode::kInvalidArgument, path + ":" + std::to_string(line) + ": " + what);
  };
  std::vector<std::string> header;
  std::map<std::tuple<std::string, int, std::string>, size_t> seriesOf;
  int sizeCol = -1, collCol = -1, ranksCol = -1, memcpyCol = -1, socketCol = -1;
  int typeCol = -1, redopCol = -1, rootCol = -1;
  std::vector<std::pair<int, std::string>> busCols;
  double memcpySum = 0, socketSum = 0;
  int memcpyRows = 0, socketRows = 0, rows = 0, lineNo = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    ++lineNo;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> cells = splitCsv(line);
    if (cells[0] == "collective") {  // a header (files may be concatenated runs)
      header.assign(cells.begin(), cells.end());
      sizeCol = collCol = ranksCol = memcpyCol = socketCol = typeCol = redopCol = rootCol = -1;
      busCols.clear();
      for (size_t c = 0; c < header.size(); ++c) {
        const std::string& h = header[c];
        int ci = static_cast<int>(c);
        if (h == "size_bytes") sizeCol = ci;
        if (h == "collective") collCol = ci;
        if (h == "ranks") ranksCol = ci;
        if (h == "memcpy_gbs") memcpyCol = ci;
        if (h == "socket_gbs") socketCol = ci;
        if (h == "type") typeCol = ci;
        if (h == "redop") redopCol = ci;
        if (h == "root") rootCol = ci;
        if (auto impl = busbwColumn(h)) busCols.emplace_back(ci, *impl);
      }
      if (sizeCol < 0 || busCols.empty())
        return bad(lineNo,
                   "a header without size_bytes and a busbw column (expected `chorus perf --csv` "
                   "or bench/peer_compare.sh output)");
      continue;
    }
    if (header.empty())
      return bad(lineNo,
                 "a row before any header (expected `chorus perf --csv` or "
                 "bench/peer_compare.sh output, whose first line starts with 'collective,')");
    if (cells.size() != header.size())
      return bad(lineNo, std::to_string(cells.size()) + " fields; the header has " +
                             std::to_string(header.size()));
    auto number = [&](int col, double* v) -> Status {
      if (parseNumber(cells[static_cast<size_t>(col)], v)) return Status::ok();
      return bad(lineNo, "column " + header[static_cast<size_t>(col)] + ": '" +
                             std::string(cells[static_cast<size_t>(col)]) + "' is not a number");
    };
    double bytes = 0, ranks = 0;
    if (Status st = number(sizeCol, &bytes); !st.isOk()) return st;
    if (!(bytes >= 1)) return bad(lineNo, "size_bytes must be at least 1");
    if (ranksCol >= 0) {
      if (Status st = number(ranksCol, &ranks); !st.isOk()) return st;
      if (!(ranks >= 1 && ranks <= 1e7 && ranks == std::floor(ranks)))
        return bad(lineNo, "ranks must be a whole number from 1");
    }
    auto cell = [&](int col) {
      return col >= 0 ? std::string(cells[static_cast<size_t>(col)]) : std::string();
    };
    // One curve per call: a data type, op or root other than the default
    // is part of its name (a CSV may hold several runs).
    std::string coll = cell(collCol);
    if (std::string t = cell(typeCol); !t.empty() && t != "fp32") coll += " " + t;
    if (std::string op = cell(redopCol); !op.empty() && op != "sum" && op != "none")
      coll += " " + op;
    if (std::string root = cell(rootCol); !root.empty() && root != "-1") coll += " root " + root;
    for (const auto& [col, impl] : busCols) {
      if (cells[static_cast<size_t>(col)].empty()) continue;  // a form or peer not measured
      double busbw = 0;
      if (Status st = number(col, &busbw); !st.isOk()) return st;
      auto key = std::make_tuple(coll, static_cast<int>(ranks), impl);
      auto [it, fresh] = seriesOf.try_emplace(key, out.series.size());
      if (fresh) out.series.push_back(PerfSeries{impl, coll, static_cast<int>(ranks), {}});
      out.series[it->second].points.emplace_back(bytes, busbw);
    }
    for (auto [col, sum, count] : {std::tuple{memcpyCol, &memcpySum, &memcpyRows},
                                   std::tuple{socketCol, &socketSum, &socketRows}}) {
      double v = 0;
      if (col >= 0 && !cells[static_cast<size_t>(col)].empty()) {
        if (Status st = number(col, &v); !st.isOk()) return st;
        *sum += v;
        ++*count;
      }
    }
    ++rows;
  }
  if (rows == 0)
    return bad(lineNo, "no rows (expected `chorus perf --csv` or bench/peer_compare.sh output)");
  out.memcpyGBs = memcpyRows > 0 ? memcpySum / memcpyRows : 0;
  out.socketGBs = socketRows > 0 ? socketSum / socketRows : 0;
  return out;
}

namespace {

// ---- Algorithms ------------------------------------------------------------

// As `chorus verify --json` has it, and as it prints (file:line: ...).
json findingJson(const Diagnostic& d) {
  json j = diagnosticJson(d);
  j["text"] = d.format();
  return j;
}

// Whole nanoseconds: what a step's time needs, in a third of the digits.
int64_t ns(double seconds) { return std::llround(seconds * 1e9); }

int waitedIndex(const char* waited) {
  static const std::vector<std::string_view> kNames = {"start", "order", "dependency", "data",
                                                       "slot"};
  auto it = std::find(kNames.begin(), kNames.end(), std::string_view(waited));
  return it == kNames.end() ? 0 : static_cast<int>(it - kNames.begin());
}

// The optimum busbw of a collective on a topology's first `ranks` ranks,
// computed once per (collective, ranks, root).
class Bounds {
 public:
  explicit Bounds(const topo::Topology& t) : t_(t) {}
  json get(CollectiveKind c, int ranks, int root) {
    auto key = std::make_tuple(c, ranks, root);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    json j;
    topo::Topology sub = t_;
    if (ranks < t_.ranks()) {
      std::vector<int> keep(static_cast<size_t>(ranks));
      for (int r = 0; r < ranks; ++r) keep[static_cast<size_t>(r)] = r;
      auto s = t_.subset(keep);
      if (!s.isOk()) return cache_[key] = json{{"error", s.status().message()}};
      sub = std::move(s).value();
    }
    if (c == CollectiveKind::kAllToAll) {
      // The multicommodity LP: seconds on 64 ranks, so only where it is quick.
      if (ranks > 32) {
        j["error"] = "the alltoall optimum (an LP) is computed for up to 32 ranks";
      } else if (auto b = synth::allToAllBound(sub); b.isOk()) {
        j["algbw"] = b.value().algbw;
        j["busbw"] = b.value().algbw * busBandwidthFactor(c, ranks);
      } else {
        j["error"] = b.status().message();
      }
    } else if (auto b = synth::optimalBound(sub, c, std::max(root, 0)); b.isOk()) {
      j["algbw"] = b.value().algbw.value();
      j["busbw"] = b.value().busbw;
      j["exact"] = b.value().algbw.str();
    } else {
      j["error"] = b.status().message();
    }
    return cache_[key] = j;
  }

 private:
  const topo::Topology& t_;
  std::map<std::tuple<CollectiveKind, int, int>, json> cache_;
};

std::vector<size_t> curveSizes(const Options& o) {
  std::vector<size_t> sizes;
  for (size_t s = std::max<size_t>(o.minBytes, 1); s <= o.maxBytes && sizes.size() < 64;
       s *= static_cast<size_t>(std::max(o.factor, 2)))
    sizes.push_back(s);
  return sizes;
}

class AlgorithmView {
 public:
  AlgorithmView(const ir::Algorithm& a, const Options& o) : a_(a), o_(o) {
    base_.resize(a.ranks.size());
    for (size_t r = 0; r < a.ranks.size(); ++r)
      for (const ir::Threadblock& tb : a.ranks[r].tbs) {
        base_[r].push_back(nodes_);
        nodes_ += static_cast<int>(tb.steps.size());
      }
  }

  // Threadblocks, the steps drawn, and the traffic matrix.
  json flow() {
    json f;
    std::vector<char> shown;
    const size_t steps = a_.totalSteps();
    const bool detailed = steps <= o_.detailSteps;
    const int n = static_cast<int>(a_.ranks.size());
    shown.assign(a_.ranks.size(), detailed ? 1 : 0);
    if (!detailed) {
      std::vector<int> pick = o_.detailRanks;
      if (pick.empty())
        for (int r = 0; r < std::min(n, 8); ++r) pick.push_back(r);
      for (int r : pick)
        if (r >= 0 && r < n) shown[static_cast<size_t>(r)] = 1;
    }
    f["detailed"] = detailed;
    json tbs = json::array();
    std::map<std::pair<int, int>, std::pair<int64_t, int64_t>> traffic;  // messages, elements
    for (size_t r = 0; r < a_.ranks.size(); ++r)
      for (size_t t = 0; t < a_.ranks[r].tbs.size(); ++t) {
        const ir::Threadblock& tb = a_.ranks[r].tbs[t];
        tbs.push_back({static_cast<int>(r), tb.id, tb.sendPeer, tb.recvPeer, tb.channel,
                       base_[r][t], tb.steps.size()});
        for (const ir::Step& s : tb.steps)
          if (ir::sends(s.type)) {
            auto& cell = traffic[{static_cast<int>(r), tb.sendPeer}];
            ++cell.first;
            cell.second += s.count;
          }
      }
    json m = json::array();
    for (const auto& [pair, cell] : traffic)
      m.push_back({pair.first, pair.second, cell.first, cell.second});
    f["tbs"] = std::move(tbs);
    f["matrix"] = std::move(m);

    // The happens-before graph gives each step its level (the longest
    // chain of steps before it: the x axis without a topology) and pairs
    // every send with its receive. Large algorithms are verified already;
    // past this many steps the graph costs more than a report is worth.
    std::vector<int> level(static_cast<size_t>(nodes_), -1);
    std::vector<int> peer(static_cast<size_t>(nodes_), -1);  // a send's receive
    if (steps <= (size_t{1} << 22)) {
      DiagnosticList scratch;
      verify::StepGraph g(a_, scratch);
      for (int v = 0; v < nodes_; ++v) peer[static_cast<size_t>(v)] = g.matchedRecv(v);
      if (g.acyclic()) {
        for (verify::NodeId v : g.topoOrder()) {
          int l = 0;
          for (verify::NodeId p : g.preds(v)) l = std::max(l, level[static_cast<size_t>(p)] + 1);
          level[static_cast<size_t>(v)] = l;
        }
      } else {
        f["note"] = "the steps wait on each other in a cycle: the x axis is each step's position";
      }
      int depth = 0;
      for (int l : level) depth = std::max(depth, l + 1);
      f["levels"] = depth;
    } else {
      f["note"] = "too many steps to order them: the x axis is each step's position";
    }
    json rows = json::array();
    rowOf_.assign(static_cast<size_t>(nodes_), -1);
    int node = 0;
    for (size_t r = 0; r < a_.ranks.size(); ++r)
      for (size_t t = 0; t < a_.ranks[r].tbs.size(); ++t) {
        const ir::Threadblock& tb = a_.ranks[r].tbs[t];
        for (size_t k = 0; k < tb.steps.size(); ++k, ++node) {
          if (!shown[r]) continue;
          rowOf_[static_cast<size_t>(node)] = static_cast<int>(drawn_++);
          const ir::Step& s = tb.steps[k];
          int dep = -1;
          if (s.depTb >= 0 && static_cast<size_t>(s.depTb) < base_[r].size())
            dep = base_[r][static_cast<size_t>(s.depTb)] + s.depStep;
          int l = level[static_cast<size_t>(node)];
          rows.push_back({node, static_cast<int>(s.type), static_cast<int>(s.srcBuf), s.srcOff,
                          static_cast<int>(s.dstBuf), s.dstOff, s.count, dep,
                          l >= 0 ? l : static_cast<int>(k), peer[static_cast<size_t>(node)]});
        }
      }
    f["steps"] = std::move(rows);
    return f;
  }

  // The simulation at o_.bytes (step times, critical path, link loads and
  // their timeline) and the busbw curve.
  json simulate(const topo::Topology& t, int root, Bounds& bounds) {
    json j;
    j["bytes"] = o_.bytes;
    sim::Options so;
    so.bytes = o_.bytes;
    so.inplace = !a_.outofplace;
    so.partsPerSlice = o_.partsPerSlice;
    so.stepTimes = true;
    auto r = sim::simulate(a_, t, so);
    if (!r.isOk()) {
      j["error"] = r.status().message();
    } else {
      const sim::Result& res = r.value();
      j["time_ns"] = ns(res.time);
      j["algbw"] = res.algbw;
      j["busbw"] = res.busbw;
      j["iterations"] = res.iterations;
      j["transfers"] = res.transfers;
      auto nodeOf = [&](int rank, int tb, int step) {
        if (rank < 0) return -1;
        return base_[static_cast<size_t>(rank)][static_cast<size_t>(tb)] + step;
      };
      // Per step drawn, in the flow's order (placed by each step's node).
      json times = json::array();
      if (!res.steps.empty()) {
        for (size_t k = 0; k < drawn_; ++k) times.push_back(nullptr);
        for (const sim::PathStep& p : res.steps) {
          int row = rowOf_[static_cast<size_t>(nodeOf(p.rank, p.tb, p.step))];
          if (row >= 0)
            times[static_cast<size_t>(row)] = {ns(p.start), ns(p.end), waitedIndex(p.waited),
                                               nodeOf(p.byRank, p.byTb, p.byStep), p.byIteration};
        }
      } else {
        j["steps_note"] = "too many step instances to time each step";
      }
      j["steps"] = std::move(times);
      json path = json::array();
      for (const sim::PathStep& p : res.critical)
        path.push_back({nodeOf(p.rank, p.tb, p.step), p.iteration, ns(p.start), ns(p.end),
                        waitedIndex(p.waited)});
      j["critical"] = std::move(path);
      json bytes = json::array();
      for (double b : res.linkBytes) bytes.push_back(std::llround(b));
      j["link_bytes"] = std::move(bytes);
      // The links' utilization over time: a second run with the timeline's
      // buckets cut from the first run's time.
      if (res.time > 0 && o_.timelineBuckets > 0) {
        sim::Options to = so;
        to.stepTimes = false;
        to.criticalPath = false;
        to.timelineStep = res.time / o_.timelineBuckets;
        if (auto tr = sim::simulate(a_, t, to); tr.isOk()) {
          json links = json::object();
          const auto& tl = tr.value().timeline;
          for (size_t l = 0; l < tl.size(); ++l) {
            double cap = t.links[l].bandwidth * 1e9 * to.timelineStep;
            bool any = false;
            json row = json::array();
            // Buckets after a link's last byte (the run's last latency) are idle.
            for (int k = 0; k < o_.timelineBuckets; ++k) {
              double b = static_cast<size_t>(k) < tl[l].size() ? tl[l][static_cast<size_t>(k)] : 0;
              double u = std::round(std::min(1.0, b / cap) * 1000) / 1000;
              any = any || u > 0;
              row.push_back(u);
            }
            if (any) links[std::to_string(l)] = std::move(row);
          }
          j["timeline"] = {{"step_ns", to.timelineStep * 1e9},
                           {"buckets", o_.timelineBuckets},
                           {"links", std::move(links)}};
        }
      }
    }
    json curve = json::array();
    for (size_t bytes : curveSizes(o_)) {
      sim::Options co;
      co.bytes = bytes;
      co.inplace = !a_.outofplace;
      co.partsPerSlice = o_.partsPerSlice;
      co.criticalPath = false;
      if (auto c = sim::simulate(a_, t, co); c.isOk())
        curve.push_back({bytes, c.value().busbw, ns(c.value().time)});
    }
    j["curve"] = std::move(curve);
    if (a_.ngpus <= t.ranks()) j["bound"] = bounds.get(a_.collective, a_.ngpus, root);
    return j;
  }

 private:
  const ir::Algorithm& a_;
  const Options& o_;
  std::vector<std::vector<int>> base_;  // [rank][tb] -> first node
  int nodes_ = 0;
  std::vector<int> rowOf_;  // node -> its row in the flow's steps, -1: not drawn
  size_t drawn_ = 0;
};

json algorithmData(const AlgorithmInput& in, const Options& o, Bounds* bounds) {
  json j;
  j["label"] = in.label;
  DiagnosticList diags = in.readDiagnostics;
  if (!in.algorithm) {
    diags.sort();
    j["verdict"] = "unreadable";
    json d = json::array();
    for (const Diagnostic& x : diags.items()) d.push_back(findingJson(x));
    j["diagnostics"] = std::move(d);
    return j;
  }
  const ir::Algorithm& a = *in.algorithm;
  j["name"] = a.name;
  j["collective"] =
      a.collectiveName.empty() ? std::string(collectiveName(a.collective)) : a.collectiveName;
  j["ranks"] = a.ngpus;
  j["protocol"] = std::string(ir::protocolName(a.protocol));
  j["nchannels"] = a.nchannels;
  j["nchunksperloop"] = a.nchunksPerLoop;
  j["inplace"] = a.inplace;
  j["outofplace"] = a.outofplace;
  j["minBytes"] = a.minBytes;
  j["maxBytes"] = a.maxBytes;
  j["tbs"] = a.totalThreadblocks();
  j["steps"] = a.totalSteps();
  verify::Report rep = verify::verifyAlgorithm(a);
  diags.append(rep.diagnostics);
  diags.sort();
  j["verdict"] = diags.hasErrors() ? "wrong" : !rep.semanticsChecked ? "unproven" : "correct";
  json forms = json::array();
  for (const verify::FormVerdict& f : rep.forms)
    forms.push_back({{"inplace", f.inplace}, {"proven", f.proven}});
  j["forms"] = std::move(forms);
  if (rep.root >= 0) j["root"] = rep.root;
  json d = json::array();
  for (const Diagnostic& x : diags.items()) d.push_back(findingJson(x));
  j["diagnostics"] = std::move(d);
  DiagnosticList structure;
  ir::validateStructure(a, structure);
  if (structure.hasErrors()) {
    j["flow_error"] = "the structure is invalid (E1xx above): no flow is drawn";
    return j;
  }
  AlgorithmView view(a, o);
  j["flow"] = view.flow();
  if (o.topology != nullptr) {
    if (diags.hasErrors())
      j["sim"] = {{"error", "the verifier found errors: not simulated"}};
    else
      j["sim"] = view.simulate(*o.topology, std::max(rep.root, 0), *bounds);
  }
  return j;
}

json topologyData(const topo::Topology& t) {
  json nodes = json::array();
  for (const topo::Node& n : t.nodes)
    nodes.push_back({n.name, topo::nodeKindName(n.kind), n.rank, n.box});
  json links = json::array();
  for (const topo::Link& l : t.links)
    links.push_back({l.from, l.to, l.bandwidth, topo::linkKindName(l.kind), l.latency * 1e6});
  return {{"name", t.name},
          {"nodes", std::move(nodes)},
          {"links", std::move(links)},
          {"memory_bandwidth", t.memoryBandwidth}};
}

json perfData(const PerfFile& p) {
  json series = json::array();
  for (const PerfSeries& s : p.series)
    series.push_back({{"implementation", s.implementation},
                      {"collective", s.collective},
                      {"ranks", s.ranks},
                      {"points", s.points}});
  json j = {{"path", p.path}, {"series", std::move(series)}};
  if (p.memcpyGBs > 0) j["memcpy_gbs"] = p.memcpyGBs;
  if (p.socketGBs > 0) j["socket_gbs"] = p.socketGBs;
  return j;
}

}  // namespace

json reportData(const std::vector<AlgorithmInput>& algorithms, const std::vector<PerfFile>& perf,
                const Options& options) {
  json data;
  data["title"] = options.title;
  std::optional<Bounds> bounds;
  if (options.topology != nullptr) {
    data["topology"] = topologyData(*options.topology);
    bounds.emplace(*options.topology);
  }
  json algos = json::array();
  for (const AlgorithmInput& in : algorithms)
    algos.push_back(algorithmData(in, options, bounds ? &*bounds : nullptr));
  data["algorithms"] = std::move(algos);
  json p = json::array();
  for (const PerfFile& f : perf) p.push_back(perfData(f));
  data["perf"] = std::move(p);
  if (options.synth != nullptr)
    data["synth"] =
        json::parse(options.synth->dump(-1, ' ', false, json::error_handler_t::replace));
  return data;
}

std::string renderHtml(const json& data) {
  // Inside <script>, "</script" or "<!--" in a string would change where
  // the element ends: JSON strings may spell <, > and & as \u escapes, and
  // these characters appear only in strings.
  std::string text = data.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (char c : text) {
    if (c == '<')
      safe += "\\u003c";
    else if (c == '>')
      safe += "\\u003e";
    else if (c == '&')
      safe += "\\u0026";
    else
      safe += c;
  }
  std::string title = data.value("title", std::string("chorus report"));
  std::string escaped;
  for (char c : title) {
    if (c == '<')
      escaped += "&lt;";
    else if (c == '&')
      escaped += "&amp;";
    else
      escaped += c;
  }
  std::string html;
  html.reserve(safe.size() + kReportJs.size() + kReportCss.size() + 512);
  html +=
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<link rel=\"icon\" "
      "href=\"data:,\">\n<title>";
  html += escaped;
  html += "</title>\n<style>\n";
  html += kReportCss;
  html += "</style>\n</head>\n<body>\n<div id=\"app\"></div>\n";
  html += "<script type=\"application/json\" id=\"chorus-data\">";
  html += safe;
  html += "</script>\n<script>\n";
  html += kReportJs;
  html += "</script>\n</body>\n</html>\n";
  return html;
}

}  // namespace chorus::report
