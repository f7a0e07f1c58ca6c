#include "core/env.h"

#include <cstdlib>
#include <string>

#include "core/log.h"

namespace chorus {

long envLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v || *end != '\0' || x < 0) {
    logLine(LogLevel::kWarn, std::string("ignoring ") + name + "=" + v + ": not a number");
    return fallback;
  }
  return x;
}

}  // namespace chorus
