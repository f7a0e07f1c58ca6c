#include "tests/support/files.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/io.h"
#include "ir/json_io.h"

namespace chorus::testing {

namespace fs = std::filesystem;

static std::vector<std::string> listDir(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string p = e.path().string();
    if (p.size() >= ext.size() && p.compare(p.size() - ext.size(), ext.size(), ext) == 0)
      out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> productionFiles() {
  auto files = listDir(CHORUS_MSCCL_DIR, ".xml");
  if (files.empty()) ADD_FAILURE() << "no production algorithms found in " << CHORUS_MSCCL_DIR;
  return files;
}

std::vector<std::string> sourceFiles(const std::string& dir, const std::string& ext) {
  return listDir(std::string(CHORUS_SOURCE_DIR) + "/" + dir, ext);
}

std::string readText(const std::string& path) {
  Result<std::string> text = readTextFile(path);
  if (!text.isOk()) ADD_FAILURE() << text.status().toString();
  return text.isOk() ? text.value() : std::string();
}

std::string baseName(const std::string& path) { return fs::path(path).filename().string(); }

ir::Algorithm mustRead(const std::string& path) {
  ir::ReadResult r = ir::readAlgorithmFile(path);
  if (!r.algorithm) {
    std::string msg;
    for (const auto& d : r.diagnostics.items()) msg += d.format() + "\n";
    ADD_FAILURE() << "cannot read " << path << ":\n" << msg;
    return ir::Algorithm{};
  }
  return std::move(*r.algorithm);
}

}  // namespace chorus::testing
