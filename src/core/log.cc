#include "core/log.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace chorus {

namespace {

LogLevel fromEnvironment() {
  const char* v = std::getenv("CHORUS_DEBUG");
  if (v == nullptr) return LogLevel::kWarn;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (s == "INFO" || s == "TRACE") return LogLevel::kInfo;
  if (s == "NONE" || s == "VERSION") return LogLevel::kNone;
  return LogLevel::kWarn;
}

std::atomic<int>& level() {
  static std::atomic<int> l{static_cast<int>(fromEnvironment())};
  return l;
}

}  // namespace

LogLevel logLevel() { return static_cast<LogLevel>(level().load(std::memory_order_relaxed)); }

void setLogLevel(LogLevel l) { level().store(static_cast<int>(l), std::memory_order_relaxed); }

void logLine(LogLevel l, std::string_view text) {
  if (!logEnabled(l)) return;
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  std::fprintf(stderr, "chorus %s %.*s\n", l == LogLevel::kInfo ? "INFO" : "WARN",
               static_cast<int>(text.size()), text.data());
}

}  // namespace chorus
