// A diagnostic as JSON (`chorus verify --json`, the report's findings):
// code, name, severity, message, and the location's parts that are set
// (file, line, column, rank, tb, step).
#pragma once

#include <nlohmann/json.hpp>

#include "core/diagnostic.h"

namespace chorus {

nlohmann::json diagnosticJson(const Diagnostic& d);

}  // namespace chorus
