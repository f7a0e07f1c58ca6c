#include "core/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"

namespace chorus::failpoint_detail {

namespace {

struct Point {
  std::string name;
  long at = 1;  // fires at this pass (1-based)
  enum class Kind { kKill, kStop, kExit, kDelay, kReset, kDrop } kind = Kind::kKill;
  long delayMs = 0;
  long passes = 0;
};

struct Points {
  std::mutex mu;
  std::vector<Point> points;
};

bool parseLong(std::string_view s, long* out) {
  if (s.empty() || s.size() > 9) return false;
  long v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

// "NAME[@N]=ACTION"; false if malformed.
bool parsePoint(std::string_view item, Point* p) {
  size_t eq = item.find('=');
  if (eq == std::string_view::npos) return false;
  std::string_view lhs = item.substr(0, eq), action = item.substr(eq + 1);
  if (size_t at = lhs.find('@'); at != std::string_view::npos) {
    if (!parseLong(lhs.substr(at + 1), &p->at) || p->at < 1) return false;
    lhs = lhs.substr(0, at);
  }
  if (lhs.empty()) return false;
  p->name = std::string(lhs);
  using K = Point::Kind;
  if (action == "kill")
    p->kind = K::kKill;
  else if (action == "stop")
    p->kind = K::kStop;
  else if (action == "exit")
    p->kind = K::kExit;
  else if (action == "reset")
    p->kind = K::kReset;
  else if (action == "drop")
    p->kind = K::kDrop;
  else if (action.substr(0, 6) == "delay:" && parseLong(action.substr(6), &p->delayMs))
    p->kind = K::kDelay;
  else
    return false;
  return true;
}

Points& table() {
  static Points* t = [] {
    auto* p = new Points;  // never destroyed: points may be passed during exit
    const char* v = std::getenv("CHORUS_FAILPOINT");
    std::string_view rest = v == nullptr ? "" : v;
    while (!rest.empty()) {
      size_t semi = rest.find(';');
      std::string_view item = rest.substr(0, semi);
      rest = semi == std::string_view::npos ? "" : rest.substr(semi + 1);
      Point pt;
      if (parsePoint(item, &pt)) {
        p->points.push_back(std::move(pt));
      } else {
        logLine(LogLevel::kWarn, "ignoring CHORUS_FAILPOINT item '" + std::string(item) +
                                     "': want NAME[@N]=kill|stop|exit|delay:MS|reset|drop");
      }
    }
    return p;
  }();
  return *t;
}

}  // namespace

std::atomic<bool> armed{std::getenv("CHORUS_FAILPOINT") != nullptr};

FailAction hit(std::string_view name) {
  Points& t = table();
  long delayMs = 0;
  FailAction out = FailAction::kNone;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    for (Point& p : t.points) {
      if (p.name != name) continue;
      ++p.passes;
      using K = Point::Kind;
      const bool lasting = p.kind == K::kDelay || p.kind == K::kDrop;
      if (p.passes < p.at || (p.passes > p.at && !lasting)) continue;
      if (p.passes == p.at)
        logLine(LogLevel::kWarn, "CHORUS_FAILPOINT: " + p.name + " pass " +
                                     std::to_string(p.passes) + ": injecting the fault");
      switch (p.kind) {
        case K::kKill:
          ::kill(::getpid(), SIGKILL);
          break;
        case K::kStop:
          ::kill(::getpid(), SIGSTOP);
          break;
        case K::kExit:
          ::_exit(7);
        case K::kDelay:
          delayMs += p.delayMs;
          break;
        case K::kReset:
          out = FailAction::kReset;
          break;
        case K::kDrop:
          out = FailAction::kDrop;
          break;
      }
    }
  }
  if (delayMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
  return out;
}

}  // namespace chorus::failpoint_detail
