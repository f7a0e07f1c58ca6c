// The report page (docs/report.md).
#include "workflows/report_page.h"

#include <fmt/core.h>

#include "compiler/program_file.h"
#include "core/io.h"
#include "ir/json_io.h"
#include "ir/xml_reader.h"
#include "report/report.h"
#include "topo/presets.h"
#include "workflows/files.h"

namespace chorus::workflows {
namespace {

// One line per algorithm: its verdict, as its section says it.
void printVerdicts(const nlohmann::json& data) {
  for (const nlohmann::json& a : data["algorithms"]) {
    const std::string label = a["label"];
    if (a["verdict"] == "unreadable") {
      fmt::print("{}: unreadable ({} finding(s) in the report)\n", label, a["diagnostics"].size());
      continue;
    }
    fmt::print("{}: {} ({} on {} ranks, {} steps", label, a["verdict"].get<std::string>(),
               a["collective"].get<std::string>(), a["ranks"].get<int>(), a["steps"].get<size_t>());
    if (a.contains("sim") && a["sim"].contains("busbw"))
      fmt::print("; busbw {:.2f} GB/s at {} bytes", a["sim"]["busbw"].get<double>(),
                 a["sim"]["bytes"].get<size_t>());
    fmt::print(")\n");
  }
}

}  // namespace

int reportPage(const ReportArgs& args, std::vector<report::AlgorithmInput> more, std::string* html,
               std::string* error) {
  std::optional<topo::Topology> topology;
  if (!args.topo.empty()) {
    auto t = topo::loadTopology(args.topo);
    if (!t.isOk()) {
      *error = t.status().message();
      return 2;
    }
    topology = std::move(t).value();
  }
  std::vector<report::PerfFile> perf;
  for (const std::string& path : args.perf) {
    auto text = readTextFile(path);
    if (!text.isOk()) {
      *error = text.status().message();
      return 2;
    }
    auto parsed = report::parsePerfCsv(text.value(), path);
    if (!parsed.isOk()) {
      *error = parsed.status().message();
      return 2;
    }
    perf.push_back(std::move(parsed).value());
  }
  std::vector<report::AlgorithmInput> algos;
  for (const std::string& file : args.files) {
    ir::ReadResult rr = ir::readAlgorithmFile(file, workflows::readOptions());
    algos.push_back(
        report::AlgorithmInput{file, std::move(rr.algorithm), std::move(rr.diagnostics)});
  }
  for (report::AlgorithmInput& in : more) algos.push_back(std::move(in));
  report::Options o;
  o.title = !args.title.empty()  ? args.title
            : !algos.empty()     ? "chorus report: " + algos.front().label
            : !args.perf.empty() ? "chorus report: " + args.perf.front()
                                 : "chorus report";
  o.topology = topology ? &*topology : nullptr;
  o.bytes = args.bytes;
  o.minBytes = args.minBytes;
  o.maxBytes = args.maxBytes;
  o.factor = args.factor;
  o.detailSteps = args.detailSteps;
  o.detailRanks = args.detailRanks;
  nlohmann::json data = report::reportData(algos, perf, o);
  if (args.printVerdicts) printVerdicts(data);
  *html = report::renderHtml(data);
  return 0;
}

int writeSynthReport(const SynthArgs& args, const nlohmann::ordered_json& json,
                     const std::string& xml, std::string* error) {
  std::string spec = args.topo;
  if (!args.ranks.empty()) spec += "@" + args.ranks;
  auto t = topo::loadTopology(spec);
  if (!t.isOk()) {
    *error = t.status().message();
    return 2;
  }
  const std::string label = args.output.empty() ? "the synthesized schedule" : args.output;
  ir::ReadResult rr = ir::readXml(xml, label, compiler::readOptions());
  std::vector<report::AlgorithmInput> algos;
  algos.push_back(
      report::AlgorithmInput{label, std::move(rr.algorithm), std::move(rr.diagnostics)});
  report::Options o;
  o.title = "chorus synth " + args.collective + " on " + t.value().name;
  o.topology = &t.value();
  o.bytes = args.size;
  o.partsPerSlice = simulatedParts(args);
  o.synth = &json;
  std::string html = report::renderHtml(report::reportData(algos, {}, o));
  if (Status st = writeTextFile(html, args.report); !st.isOk()) {
    *error = st.message();
    return 2;
  }
  return 0;
}

}  // namespace chorus::workflows
