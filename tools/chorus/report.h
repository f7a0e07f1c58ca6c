// `chorus report` and `chorus synth --report` share the page's assembly
// (src/report) and how a file is written.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "report/report.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

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

}  // namespace chorus::cli
