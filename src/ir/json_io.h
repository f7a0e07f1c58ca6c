// The JSON form of the Algorithm IR (documented in docs/ir-json.md). It
// carries exactly what the XML carries, with the same attribute names, so the
// two convert losslessly; step positions are implicit (array order).
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "ir/ir.h"
#include "ir/xml_reader.h"

namespace chorus::ir {

inline constexpr int kJsonFormatVersion = 1;

std::string writeJson(const Algorithm& algo);
Status writeJsonFile(const Algorithm& algo, const std::string& path);

// Diagnostics name the JSON path ("ranks[3].tbs[1].steps[7]: ...") and, for
// syntax errors, line:column.
ReadResult readJson(std::string_view text, const std::string& fileName);

// Reads XML or JSON, chosen by the first non-blank character ('{' = JSON).
// `options` as readXml's (compact program files, a rank's part).
ReadResult readAlgorithmFile(const std::string& path, const ReadOptions& options = {});

}  // namespace chorus::ir
