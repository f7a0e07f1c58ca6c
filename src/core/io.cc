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
  // Read straight into a string of the file's size (a string stream grows
  // by doubling and then copies: three times a 256 MB file at its peak);
  // then whatever more there is (a file that grew while being read).
  std::string text(static_cast<size_t>(std::filesystem::file_size(path, ec)), '\0');
  if (ec) text.clear();
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (in) {
    std::ostringstream rest;
    rest << in.rdbuf();
    text += rest.str();
  }
  if (in.bad()) return Status(StatusCode::kIoError, "reading '" + path + "' failed");
  return text;
}

Status writeTextFile(const std::string& text, const std::string& path) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) return Status(StatusCode::kIoError, "cannot open '" + path + "' for writing");
  f << text;
  f.flush();
  if (!f) return Status(StatusCode::kIoError, "writing '" + path + "' failed");
  return Status::ok();
}

bool isValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    int len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + static_cast<size_t>(len) > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    // Reject overlong forms, surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) return false;
    i += static_cast<size_t>(len);
  }
  return true;
}

}  // namespace chorus
