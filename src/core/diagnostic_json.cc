#include "core/diagnostic_json.h"

namespace chorus {

nlohmann::json diagnosticJson(const Diagnostic& d) {
  const DiagInfo& info = diagInfo(d.code);
  nlohmann::json j = {{"code", info.id},
                      {"name", info.slug},
                      {"severity", severityName(d.severity)},
                      {"message", d.message}};
  if (!d.loc.file.empty()) j["file"] = d.loc.file;
  if (d.loc.line > 0) j["line"] = d.loc.line;
  if (d.loc.column > 0) j["column"] = d.loc.column;
  if (d.loc.rank >= 0) j["rank"] = d.loc.rank;
  if (d.loc.tb >= 0) j["tb"] = d.loc.tb;
  if (d.loc.step >= 0) j["step"] = d.loc.step;
  return j;
}

}  // namespace chorus
