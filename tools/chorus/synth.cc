// `chorus synth` (docs/synthesis.md): workflows::synth, printed, as JSON or
// with its report page.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "tools/chorus/commands.h"
#include "workflows/report_page.h"
#include "workflows/synthesis.h"

namespace chorus::cli {

int runSynth(const SynthArgs& args) {
  nlohmann::ordered_json json;
  std::string error, xml;
  const bool report = !args.report.empty();
  int rc = workflows::synth(args, args.json || report ? &json : nullptr, report ? &xml : nullptr,
                            &error, !args.json);
  if (rc == 0 && report) rc = workflows::writeSynthReport(args, json, xml, &error);
  if (rc != 0) {
    fmt::print(stderr, "chorus synth: {}\n", error);
    return rc;
  }
  if (args.json)
    fmt::print("{}\n", json.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
  else if (report)
    fmt::print("report    {}\n", args.report);
  return 0;
}

}  // namespace chorus::cli
