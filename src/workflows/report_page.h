// What a front end asks for and gets as one step: an HTML report page
// (`chorus report`, `chorus synth --report`, the Python package's
// report_html()). Above every library it assembles (report, sim, synth,
// topo, compiler); below the front ends (tools/, python/).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"
#include "workflows/synthesis.h"

namespace chorus::workflows {

struct ReportArgs {
  std::vector<std::string> files;  // algorithm files
  std::string topo;                // a preset or a .json file; empty: no simulation
  std::vector<std::string> perf;   // chorus perf --csv / bench/peer_compare.sh output
  std::string output = "report.html";
  std::string title;
  size_t bytes =
      size_t{1} << 20;  // the size the flow, critical path and link loads are simulated at
  size_t minBytes = 1 << 10, maxBytes = size_t{1} << 30;
  int factor = 4;
  size_t detailSteps = 20000;    // more steps: drawn aggregated
  std::vector<int> detailRanks;  // aggregated: the lanes drawn step by step
  bool printVerdicts = true;     // a line per algorithm on stdout
};

// The page `chorus report` writes for `args` (its files read here, then
// `more`: algorithms already in memory, the Python package's) into `html`.
// Returns 0, or 2 with `error` set (a topology or CSV that cannot be read).
int reportPage(const ReportArgs& args, std::vector<report::AlgorithmInput> more, std::string* html,
               std::string* error);

// `chorus synth --report`: the schedule kept (`xml`, verified) with the
// search's result (`json`: trees, cut, optimum) on the topology of `args`.
// Returns 0, or 2 with `error` set.
int writeSynthReport(const SynthArgs& args, const nlohmann::ordered_json& json,
                     const std::string& xml, std::string* error);

}  // namespace chorus::workflows
