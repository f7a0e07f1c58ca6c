// Implementation of the `chorus` subcommands: reading files, running the
// verifier, and printing what a person (or a script, with --json) needs.
#include "tools/chorus/commands.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "compiler/program_file.h"
#include "core/diagnostic.h"
#include "core/diagnostic_json.h"
#include "core/io.h"
#include "ir/json_io.h"
#include "ir/mscclpp_plan.h"
#include "ir/stats.h"
#include "ir/validate.h"
#include "ir/xml_writer.h"
#include "runtime/exec/check.h"
#include "runtime/exec/driver.h"
#include "runtime/exec/flat_plan.h"
#include "tools/chorus/device.h"
#include "verify/graph.h"
#include "verify/plan_verifier.h"
#include "verify/verifier.h"
#include "workflows/files.h"

namespace chorus::cli {
namespace {

using nlohmann::json;

enum class Verdict { kOk, kUnproven, kWrong, kUnreadable };

const char* verdictWord(Verdict v) {
  switch (v) {
    case Verdict::kOk:
      return "ok";
    case Verdict::kUnproven:
      return "unproven";
    case Verdict::kWrong:
      return "WRONG";
    case Verdict::kUnreadable:
      return "ERROR";
  }
  return "?";
}

struct FileResult {
  std::string file;
  Verdict verdict = Verdict::kUnreadable;
  std::optional<ir::Algorithm> algo;
  std::optional<ir::AlgorithmStats> stats;
  DiagnosticList diagnostics;
  verify::Report report;
  // An MSCCL++ execution plan (recognised by its content).
  std::optional<ir::mscclpp::Plan> plan;
  verify::PlanReport planReport;
  size_t runSteps = 0;  // steps of its two-sided form (0: it cannot run)
};

// The file's text when it is an MSCCL++ plan.
std::optional<std::string> planText(const std::string& file) {
  Result<std::string> text = readTextFile(file);
  if (!text.isOk() || !ir::mscclpp::looksLikePlan(text.value())) return std::nullopt;
  return std::move(text).value();
}

FileResult verifyPlanFile(const std::string& file, const std::string& text) {
  FileResult fr;
  fr.file = file;
  ir::mscclpp::PlanReadResult pr = ir::mscclpp::readPlan(text, file);
  fr.diagnostics = pr.diagnostics;
  if (!pr.plan) {
    fr.diagnostics.sort();
    return fr;
  }
  fr.plan = std::move(pr.plan);
  fr.planReport = verify::verifyPlan(*fr.plan, file);
  fr.diagnostics.append(fr.planReport.diagnostics);
  if (fr.planReport.correct()) {
    // What `chorus run` and the runtime would run: its two-sided form.
    verify::PlanLowering low = verify::lowerPlan(*fr.plan, file);
    for (const Diagnostic& d : low.diagnostics.items())
      if (d.code == DiagCode::kPlanNotRunnable) fr.diagnostics.add(d.code, d.loc, d.message);
    if (low.algorithm) fr.runSteps = low.algorithm->totalSteps();
  }
  fr.diagnostics.sort();
  fr.verdict = fr.diagnostics.hasErrors()        ? Verdict::kWrong
               : !fr.planReport.semanticsChecked ? Verdict::kUnproven
                                                 : Verdict::kOk;
  return fr;
}

std::string formsText(const ir::Algorithm& a) {
  if (a.inplace && a.outofplace) return "in+out-of-place";
  return a.inplace ? "in-place" : "out-of-place";
}

FileResult verifyFile(const std::string& file, const verify::Options& opts) {
  if (auto text = planText(file)) return verifyPlanFile(file, *text);
  FileResult fr;
  fr.file = file;
  ir::ReadResult rr = ir::readAlgorithmFile(file, workflows::readOptions());
  fr.diagnostics = rr.diagnostics;
  if (!rr.algorithm) {
    fr.diagnostics.sort();
    return fr;
  }
  fr.algo = std::move(rr.algorithm);
  fr.stats = ir::computeStats(*fr.algo);
  fr.report = verify::verifyAlgorithm(*fr.algo, opts);
  fr.diagnostics.append(fr.report.diagnostics);
  fr.diagnostics.sort();
  if (fr.diagnostics.hasErrors()) {
    fr.verdict = Verdict::kWrong;
  } else if (!fr.report.semanticsChecked) {
    fr.verdict = Verdict::kUnproven;
  } else {
    fr.verdict = Verdict::kOk;
  }
  return fr;
}

std::vector<std::string> summaryColumns(const FileResult& r) {
  std::vector<std::string> cols = {verdictWord(r.verdict), r.file};
  if (r.plan) {
    const ir::mscclpp::Plan& p = *r.plan;
    size_t tbs = 0, ops = 0;
    for (const auto& g : p.gpus) {
      tbs = std::max(tbs, g.threadblocks.size());
      for (const auto& t : g.threadblocks) {
        size_t flat = 0;
        for (const auto& o : t.ops) flat += 1 + o.ops.size();
        ops = std::max(ops, flat);
      }
    }
    cols.push_back(p.collective);
    cols.push_back(fmt::format("{} ranks", p.gpus.size()));
    cols.push_back(p.inplace ? "in-place" : "out-of-place");
    cols.push_back("MSCCL++ plan, " + p.protocol);
    cols.push_back(fmt::format("{} tbs/rank", tbs));
    cols.push_back(fmt::format("max {} ops/tb", ops));
    cols.push_back(
        fmt::format("checked at {} x {} B per chunk", r.planReport.unitsPerChunk, p.alignment()));
    if (r.runSteps > 0) cols.push_back(fmt::format("runs as {} steps", r.runSteps));
    return cols;
  }
  if (!r.algo) return cols;
  const ir::Algorithm& a = *r.algo;
  cols.push_back(a.collectiveName);
  cols.push_back(fmt::format("{} ranks", a.ngpus));
  cols.push_back(formsText(a));
  cols.push_back(fmt::format("{} chunks", a.nchunksPerLoop));
  cols.push_back(std::string(ir::protocolName(a.protocol)));
  cols.push_back(fmt::format("{} tbs/rank", r.stats->maxTbsPerRank));
  cols.push_back(fmt::format("max {} steps/tb", r.stats->maxStepsPerTb));
  if (r.report.root >= 0) cols.push_back(fmt::format("root {}", r.report.root));
  return cols;
}

}  // namespace

int runVerify(const VerifyArgs& args) {
  verify::Options opts;
  opts.targetMscclExecutor = args.targetMsccl;
  std::optional<verify::PostCondition> spec;
  if (!args.spec.empty()) {
    DiagnosticList specDiags;
    spec = verify::readPostCondition(args.spec, specDiags);
    if (!spec) {
      for (const auto& d : specDiags.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
      return 2;
    }
    opts.spec = &*spec;
  }

  std::vector<FileResult> results;
  for (const auto& f : args.files) results.push_back(verifyFile(f, opts));

  int exitCode = 0;
  for (const auto& r : results) {
    if (r.verdict == Verdict::kUnreadable)
      exitCode = 2;
    else if (r.verdict == Verdict::kWrong && exitCode == 0)
      exitCode = 1;
  }

  if (args.json) {
    json out = json::array();
    for (const auto& r : results) {
      json j = {{"file", r.file},
                {"verdict", verdictWord(r.verdict)},
                {"correct", r.verdict == Verdict::kOk}};
      if (r.plan) {
        const ir::mscclpp::Plan& p = *r.plan;
        j["format"] = "mscclpp-plan";
        j["name"] = p.name;
        j["collective"] = p.collective;
        j["ngpus"] = p.gpus.size();
        j["protocol"] = p.protocol;
        j["inplace"] = p.inplace;
        j["semanticsChecked"] = r.planReport.semanticsChecked;
        j["unitsPerChunk"] = r.planReport.unitsPerChunk;
      }
      if (r.algo) {
        const ir::Algorithm& a = *r.algo;
        j["name"] = a.name;
        j["collective"] = a.collectiveName;
        j["ngpus"] = a.ngpus;
        j["protocol"] = ir::protocolName(a.protocol);
        j["nchannels"] = a.nchannels;
        j["nchunksperloop"] = a.nchunksPerLoop;
        j["minBytes"] = a.minBytes;
        j["maxBytes"] = a.maxBytes;
        j["maxTbsPerRank"] = r.stats->maxTbsPerRank;
        j["maxStepsPerTb"] = r.stats->maxStepsPerTb;
        j["semanticsChecked"] = r.report.semanticsChecked;
        json forms = json::array();
        for (const auto& f : r.report.forms)
          forms.push_back(
              {{"form", f.inplace ? "in-place" : "out-of-place"}, {"proven", f.proven}});
        j["forms"] = forms;
        if (r.report.root >= 0) j["root"] = r.report.root;
      }
      json diags = json::array();
      for (const auto& d : r.diagnostics.items()) diags.push_back(diagnosticJson(d));
      j["diagnostics"] = diags;
      out.push_back(j);
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return exitCode;
  }

  std::vector<std::vector<std::string>> rows;
  std::vector<size_t> width;
  for (const auto& r : results) {
    rows.push_back(summaryColumns(r));
    if (width.size() < rows.back().size()) width.resize(rows.back().size(), 0);
    for (size_t i = 0; i < rows.back().size(); ++i)
      width[i] = std::max(width[i], rows.back()[i].size());
  }
  int counts[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    ++counts[static_cast<int>(r.verdict)];
    std::string line;
    for (size_t c = 0; c < rows[i].size(); ++c) {
      line += rows[i][c];
      if (c + 1 < rows[i].size()) line += std::string(width[c] - rows[i][c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
    int shown = 0;
    for (const auto& d : r.diagnostics.items()) {
      if (shown == args.maxDiagnostics) {
        std::printf("    ... %zu more diagnostic(s); use --max-diagnostics or --json\n",
                    r.diagnostics.size() - static_cast<size_t>(shown));
        break;
      }
      std::printf("    %s\n", d.format().c_str());
      ++shown;
    }
  }
  if (results.size() > 1) {
    std::printf("%zu files: %d ok, %d wrong, %d unreadable, %d unproven\n", results.size(),
                counts[0], counts[2], counts[3], counts[1]);
  }
  return exitCode;
}

int runShow(const std::string& file) {
  ir::ReadResult rr = ir::readAlgorithmFile(file, workflows::readOptions());
  if (!rr.algorithm) {
    rr.diagnostics.sort();
    for (const auto& d : rr.diagnostics.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
    return 2;
  }
  const ir::Algorithm& a = *rr.algorithm;
  ir::AlgorithmStats st = ir::computeStats(a);
  fmt::print("{}: \"{}\"\n", file, a.name);
  fmt::print("  collective  {} ({}), {} ranks\n", a.collectiveName, formsText(a), a.ngpus);
  fmt::print("  protocol    {}, {} channel(s), {} chunks per loop\n", ir::protocolName(a.protocol),
             a.nchannels, a.nchunksPerLoop);
  fmt::print("  sizes       {} .. {} bytes\n", a.minBytes,
             a.maxBytes == 0 ? std::string("unlimited") : std::to_string(a.maxBytes));
  fmt::print("  totals      {} threadblocks, {} steps\n", a.totalThreadblocks(), a.totalSteps());

  auto setText = [](const std::set<int>& s) {
    std::string out;
    for (int v : s) {
      if (!out.empty()) out += ',';
      out += std::to_string(v);
    }
    return out.empty() ? std::string("-") : out;
  };
  fmt::print("\n  rank  tbs  steps  by type{:39}channels  sends to  receives from\n", "");
  for (size_t r = 0; r < st.ranks.size(); ++r) {
    const ir::RankStats& rs = st.ranks[r];
    std::string types;
    for (size_t t = 0; t < rs.stepsByType.size(); ++t) {
      if (rs.stepsByType[t] == 0) continue;
      types += fmt::format("{}{} {}", types.empty() ? "" : ", ",
                           ir::stepTypeName(static_cast<ir::StepType>(t)), rs.stepsByType[t]);
    }
    fmt::print("  {:>4}  {:>3}  {:>5}  {:<46} {:<9} {:<9} {}\n", a.ranks[r].id, rs.threadblocks,
               rs.steps, types, setText(rs.channels), setText(rs.sendPeers), setText(rs.recvPeers));
  }

  fmt::print("\n  chunks sent per link (row = sender, column = receiver):\n");
  if (a.ngpus <= 16) {
    std::string header = "        ";
    for (int c = 0; c < a.ngpus; ++c) header += fmt::format("{:>6}", c);
    fmt::print("{}\n", header);
    for (int s = 0; s < a.ngpus; ++s) {
      std::string line = fmt::format("  {:>4}  ", s);
      for (int c = 0; c < a.ngpus; ++c) {
        auto it = st.chunksPerLink.find({s, c});
        line += fmt::format(
            "{:>6}", it == st.chunksPerLink.end() ? std::string(".") : std::to_string(it->second));
      }
      fmt::print("{}\n", line);
    }
  } else {
    for (const auto& [link, n] : st.chunksPerLink)
      fmt::print("    {} -> {}: {}\n", link.first, link.second, n);
  }

  DiagnosticList d;
  ir::validateStructure(a, d);
  if (!d.hasErrors()) {
    verify::StepGraph g(a, d);
    if (g.acyclic()) {
      auto [len, last] = g.longestChain();
      fmt::print("\n  longest dependency chain: {} steps, ending at {}\n", len,
                 last == verify::kNoNode ? std::string("-") : g.describe(last));
    } else {
      fmt::print("\n  longest dependency chain: none (the steps wait on each other in a cycle)\n");
    }
  }
  verify::Report rep = verify::verifyAlgorithm(a);
  fmt::print("  verification: {} ({} error(s), {} warning(s); run `chorus verify` for details)\n",
             rep.correct() ? (rep.semanticsChecked ? "correct" : "unproven") : "WRONG",
             rep.diagnostics.count(Severity::kError), rep.diagnostics.count(Severity::kWarning));
  return 0;
}

int runConvert(const ConvertArgs& args) {
  std::string to = args.to;
  if (to.empty()) {
    auto ends = [&](const char* ext) {
      std::string e(ext);
      return args.output.size() >= e.size() &&
             args.output.compare(args.output.size() - e.size(), e.size(), e) == 0;
    };
    if (ends(".json"))
      to = "json";
    else if (ends(".xml") || args.output == "-")
      to = "xml";
    else {
      std::fprintf(stderr, "chorus convert: cannot tell the format of '%s'; pass --to xml|json\n",
                   args.output.c_str());
      return 2;
    }
  }
  std::string text;
  auto plan = planText(args.input);
  if (plan && (args.to.empty() || args.to == "mscclpp")) {
    // An MSCCL++ plan is written back as a plan (the DSL's key order),
    // unless --to xml|json asks for its two-sided form.
    ir::mscclpp::PlanReadResult pr = ir::mscclpp::readPlan(*plan, args.input);
    pr.diagnostics.sort();
    for (const auto& d : pr.diagnostics.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
    if (!pr.plan) return 2;
    text = ir::mscclpp::writePlan(*pr.plan);
  } else {
    ir::ReadResult rr = ir::readAlgorithmFile(args.input, workflows::readOptions());
    rr.diagnostics.sort();
    for (const auto& d : rr.diagnostics.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
    if (!rr.algorithm) return 2;
    text = to == "mscclpp" ? ir::mscclpp::writePlan(ir::mscclpp::planFromAlgorithm(*rr.algorithm))
           : to == "json"  ? ir::writeJson(*rr.algorithm)
                           : ir::writeXml(*rr.algorithm);
  }
  if (args.output == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return 0;
  }
  Status st = writeTextFile(text, args.output);
  if (!st.isOk()) {
    std::fprintf(stderr, "chorus convert: %s\n", st.toString().c_str());
    return 2;
  }
  return 0;
}

namespace {

// What `chorus run` prints and times wherever its calls run.
void printCall(const RunArgs& args, const ir::Algorithm& a, bool inplace, size_t count,
               DataType type, ReduceOp op, size_t bytes, const runtime::Geometry& g) {
  fmt::print("algorithm  {} ({}): {}, {} ranks, {}, {}\n", a.name, args.file, a.collectiveName,
             a.ngpus, inplace ? "in-place" : "out-of-place", ir::protocolName(a.protocol));
  fmt::print("call       count {} {} {} ({} bytes), {} iteration(s) of {} elements per chunk\n",
             count, dataTypeName(type), reduceOpName(op), bytes, g.iterations, g.sliceElems);
}

// args.warmup calls, then args.iters timed ones, each after an untimed
// `refresh` (fresh inputs): the mean seconds per call, or the first failure.
Result<double> timeCalls(const RunArgs& args, const std::function<Status()>& once,
                         const std::function<Status()>& refresh) {
  for (int i = 0; i < args.warmup; ++i)
    if (Status st = once(); !st.isOk()) return st;
  double total = 0;
  for (int i = 0; i < args.iters; ++i) {
    if (Status st = refresh(); !st.isOk()) return st;
    auto t0 = std::chrono::steady_clock::now();
    Status st = once();
    total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!st.isOk()) return st;
  }
  return total / args.iters;
}

void printTime(const RunArgs& args, const ir::Algorithm& a, double secs, size_t bytes) {
  double algbw = static_cast<double>(bytes) / secs / 1e9;
  fmt::print(
      "time       {:.1f} us per call (mean of {}, after {} warm-up)   algbw {:.3f} GB/s   "
      "busbw {:.3f} GB/s\n",
      secs * 1e6, args.iters, args.warmup, algbw,
      algbw * busBandwidthFactor(a.collective, a.ngpus));
}

// With --check: the check line, and exit 1 if any element is wrong.
int printCheck(const RunArgs& args, const runtime::CollectiveData& data) {
  if (!args.check) return 0;
  std::string first;
  size_t wrong = data.countWrong(&first);
  fmt::print("check      {} wrong element(s){}\n", wrong, wrong ? " (first: " + first + ")" : "");
  return wrong == 0 ? 0 : 1;
}

// `chorus run FILE --device engine|cuda`: the same call on the step engine
// or the CUDA executor, timed per call (buffers refreshed before each) and
// checked as on CPU ranks.
int runOnDevice(const RunArgs& args, const runtime::VerifiedAlgorithm& va,
                runtime::CollectiveData& data, size_t count, bool inplace) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "chorus run: %s\n", msg.c_str());
    return 2;
  };
  const ir::Algorithm& a = va.algo();
  BackendOptions bo;
  bo.dev = args.dev;
  bo.sliceBytes = args.sliceBytes;
  bo.slots = args.slots;
  auto made = Backend::make(bo);
  if (!made.isOk()) return fail(made.status().message());
  Backend& b = *made.value();
  if (Status st = b.bind(data.calls(), a.collective, a.ngpus); !st.isOk())
    return fail(st.message());
  auto type = data.calls()[0].type;
  size_t bytes = count * dataTypeSize(type) * runtime::countMultiplier(a);
  auto geometry = runtime::planCall(va, data.calls(), args.sliceBytes);
  if (!geometry.isOk()) return fail(geometry.status().message());
  printCall(args, a, inplace, count, type, data.calls()[0].op, bytes, geometry.value());
  fmt::print("device     {}, {} slot(s) per connection\n", b.describe(), args.slots);
  if (Status st = b.upload(); !st.isOk()) return fail(st.message());
  auto timed = timeCalls(
      args,
      [&]() -> Status {
        if (Status st = b.enqueue(va, b.calls()); !st.isOk()) return st;
        return b.wait();
      },
      [&] {
        data.reset();
        return b.upload();
      });
  if (!timed.isOk()) return fail(timed.status().toString());
  if (Status st = b.download(); !st.isOk()) return fail(st.message());
  double secs = timed.value();
  double moved = runtime::FlatPlan::lower(va).bytesMoved(geometry.value(), a.protocol);
  printTime(args, a, secs, bytes);
  fmt::print(
      "memory     {:.3f} GB/s read+written by the steps = {:.1f} % of the copy bandwidth "
      "({:.1f} GB/s: {})\n",
      moved / secs / 1e9, 100.0 * moved / secs / b.copyBandwidth(), b.copyBandwidth() / 1e9,
      b.copyBandwidthHow());
  return printCheck(args, data);
}

}  // namespace

int runRun(const RunArgs& args) {
  auto fail = [](const std::string& msg) {
    std::fprintf(stderr, "chorus run: %s\n", msg.c_str());
    return 2;
  };
  auto type = parseDataType(args.dtype);
  if (!type) return fail("unknown data type '" + args.dtype + "'");
  auto op = parseReduceOp(args.op);
  if (!op) return fail("unknown reduction op '" + args.op + "'");
  ir::ReadResult rr = ir::readAlgorithmFile(args.file, workflows::readOptions());
  if (!rr.algorithm) {
    rr.diagnostics.sort();
    for (const auto& d : rr.diagnostics.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
    return 2;
  }
  auto va = runtime::VerifiedAlgorithm::make(std::move(*rr.algorithm));
  if (!va.isOk()) return fail(va.status().message());
  const ir::Algorithm& a = va.value()->algo();
  if (args.ranks > 0 && args.ranks != a.ngpus)
    return fail("--ranks " + std::to_string(args.ranks) + ": the algorithm has " +
                std::to_string(a.ngpus) + " ranks (it runs on exactly that many)");

  if (args.inplace && args.outofplace) return fail("--inplace and --outofplace exclude each other");
  bool inplace = args.inplace || (!args.outofplace && !a.outofplace);
  size_t esz = dataTypeSize(*type), m = runtime::countMultiplier(a);
  size_t quantum = runtime::countQuantum(a);
  size_t count = args.count;
  if (count == 0) {
    count = args.bytes / (esz * m) / quantum * quantum;
    if (count == 0)
      return fail("--bytes " + std::to_string(args.bytes) +
                  " is below the smallest call this "
                  "algorithm can serve (" +
                  std::to_string(quantum * esz * m) + " bytes)");
  }
  std::optional<verify::PostCondition> spec;
  if (!args.spec.empty()) {
    DiagnosticList specDiags;
    spec = verify::readPostCondition(args.spec, specDiags);
    for (const auto& d : specDiags.items()) std::fprintf(stderr, "%s\n", d.format().c_str());
    if (!spec) return 2;
  }
  auto data = runtime::CollectiveData::make(*va.value(), count, *type, *op, inplace,
                                            spec ? &*spec : nullptr);
  if (!data.isOk()) return fail(data.status().message());
  const auto& calls = data.value().calls();
  if (args.dev.device != "cpu") {
    if (args.procs > 0) return fail("--procs runs CPU ranks; it excludes --device");
    return runOnDevice(args, *va.value(), data.value(), count, inplace);
  }
  // Prepared once (connections, scratch, executors; all memory touched now),
  // then run for every warm-up and timed call without allocating.
  auto prepared = runtime::PreparedCall::make(*va.value(), calls, args.sliceBytes, args.slots);
  if (!prepared.isOk()) return fail(prepared.status().message());
  runtime::PreparedCall& call = *prepared.value();
  const runtime::Geometry& geometry = call.geometry();

  runtime::DeterministicOptions det;
  det.order = args.order == "rr"        ? runtime::DeterministicOptions::Order::kRoundRobin
              : args.order == "reverse" ? runtime::DeterministicOptions::Order::kReverse
                                        : runtime::DeterministicOptions::Order::kRandom;
  det.seed = args.seed;
  auto once = [&]() {
    return args.driver == "deterministic" ? call.runDeterministic(det) : call.runThreaded();
  };

  size_t bytes = count * esz * m;
  if (args.procs > 0) {
    // As processes: `chorus perf` with this file at this size, relaunched
    // as N processes (it measures every form the file serves).
    if (args.procs != a.ngpus)
      return fail("--procs " + std::to_string(args.procs) + ": the algorithm has " +
                  std::to_string(a.ngpus) + " ranks");
    if (!isNcclCollective(a.collective))
      return fail("--procs runs the NCCL collectives; '" + a.collectiveName +
                  "' runs on thread ranks only");
    if (args.driver != "threads")
      return fail("--procs and --driver deterministic exclude each other");
    PerfArgs p;
    p.collective = std::string(collectiveName(a.collective));
    p.minBytes = p.maxBytes = bytes;
    p.iters = args.iters;
    p.warmup = args.warmup;
    p.dtype = args.dtype;
    p.op = args.op;
    p.root = std::max(0, va.value()->root());
    p.algo = args.file;
    p.check = args.check;
    p.procs = args.procs;
    return runPerf(p);
  }
  printCall(args, a, inplace, count, *type, *op, bytes, geometry);
  fmt::print("driver     {}, {} slot(s) per connection\n",
             args.driver == "deterministic" ? "deterministic (one thread, " + args.order + " order)"
                                            : std::to_string(a.ngpus) + " threads",
             args.slots);
  auto timed = timeCalls(args, once, [&] {
    data.value().reset();
    return Status::ok();
  });
  if (!timed.isOk()) return fail(timed.status().toString());
  printTime(args, a, timed.value(), bytes);
  return printCheck(args, data.value());
}

int runExplain(const std::string& code) {
  if (code.empty()) {
    for (const auto& d : allDiagnostics())
      fmt::print("{}  {:<24} {:<8} {}\n", d.id, d.slug, severityName(d.severity), d.summary);
    return 0;
  }
  auto c = diagCodeFromId(code);
  if (!c) {
    std::fprintf(stderr, "chorus explain: unknown code '%s' (run `chorus explain` for the list)\n",
                 code.c_str());
    return 2;
  }
  const DiagInfo& d = diagInfo(*c);
  fmt::print("{} ({}, {}): {}\nSee docs/diagnostics.md for an example and the fix.\n", d.id, d.slug,
             severityName(d.severity), d.summary);
  return 0;
}

}  // namespace chorus::cli
