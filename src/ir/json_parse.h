// Parsing JSON text for the readers of this folder (Chorus's JSON IR,
// MSCCL++ plans): one place that turns nlohmann's exceptions into a
// diagnostic with the file, line and column.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "core/diagnostic.h"

namespace chorus::ir {

// The document, or nullopt with `code` added to `out` ("malformed JSON: ...").
std::optional<nlohmann::json> parseJsonText(std::string_view text, const std::string& fileName,
                                            DiagCode code, DiagnosticList& out);

}  // namespace chorus::ir
