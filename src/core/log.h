// Logging to stderr, gated by CHORUS_DEBUG (read once): WARN (the default)
// prints warnings, INFO adds per-call decisions such as which algorithm ran
// and why, NONE silences everything.
#pragma once

#include <string_view>

namespace chorus {

enum class LogLevel { kNone = 0, kWarn = 1, kInfo = 2 };

LogLevel logLevel();
inline bool logEnabled(LogLevel l) { return l <= logLevel(); }
// One line, prefixed "chorus WARN " or "chorus INFO "; thread-safe.
void logLine(LogLevel l, std::string_view text);
// For tests: override CHORUS_DEBUG.
void setLogLevel(LogLevel l);

}  // namespace chorus
