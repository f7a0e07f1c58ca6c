#include "core/io.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace chorus {

Result<std::string> readTextFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status(StatusCode::kNotFound, "'" + path + "' is missing or not a regular file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status(StatusCode::kIoError, "cannot open '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return Status(StatusCode::kIoError, "reading '" + path + "' failed");
  return ss.str();
}

Status writeTextFile(const std::string& text, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(StatusCode::kIoError, "cannot open '" + path + "' for writing");
  f << text;
  f.flush();
  if (!f) return Status(StatusCode::kIoError, "writing '" + path + "' failed");
  return Status::ok();
}

}  // namespace chorus
