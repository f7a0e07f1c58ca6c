// Whole-file text I/O shared by the readers and writers of every layer.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"

namespace chorus {

// Reads a regular file. kNotFound if it is missing or not a regular file
// (e.g. a directory), kIoError if reading fails.
Result<std::string> readTextFile(const std::string& path);
// Creates or truncates `path` and writes `text`.
Status writeTextFile(const std::string& text, const std::string& path);

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF). pugixml does not check encodings, and names read
// from XML travel on to JSON (which must be UTF-8) and logs.
bool isValidUtf8(std::string_view s);

}  // namespace chorus
