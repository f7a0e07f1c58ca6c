// Whole-file text I/O shared by the readers and writers of every layer.
#pragma once

#include <string>

#include "core/status.h"

namespace chorus {

// Reads a regular file. kNotFound if it is missing or not a regular file
// (e.g. a directory), kIoError if reading fails.
Result<std::string> readTextFile(const std::string& path);
// Creates or truncates `path` and writes `text`.
Status writeTextFile(const std::string& text, const std::string& path);

}  // namespace chorus
