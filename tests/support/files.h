// Paths and file helpers shared by the tests.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace chorus::testing {

// The production MSCCL files (../shared/msccl-algorithms/ndv4/*.xml), sorted.
// Fails the calling test (ADD_FAILURE) if the folder is missing: CI has it.
std::vector<std::string> productionFiles();
// Files under `dir` (relative to the source tree) ending in `ext`, sorted.
std::vector<std::string> sourceFiles(const std::string& dir, const std::string& ext);
std::string readText(const std::string& path);
std::string baseName(const std::string& path);
// Reads an algorithm that must parse (ADD_FAILURE otherwise; returns empty).
ir::Algorithm mustRead(const std::string& path);

}  // namespace chorus::testing
