#include "core/diagnostic.h"

#include <algorithm>
#include <tuple>

#include "core/check.h"

namespace chorus {

const std::vector<DiagInfo>& allDiagnostics() {
  static const std::vector<DiagInfo> kAll = {
#define CHORUS_DIAG_INFO(e, code, slug, sev, summary) \
  DiagInfo{DiagCode::e, code, slug, Severity::sev, summary},
      CHORUS_DIAGNOSTICS(CHORUS_DIAG_INFO)
#undef CHORUS_DIAG_INFO
  };
  return kAll;
}

const DiagInfo& diagInfo(DiagCode code) {
  const auto& all = allDiagnostics();
  size_t i = static_cast<size_t>(code);
  CHORUS_CHECK(i < all.size() && all[i].code == code, "diagnostic table out of order");
  return all[i];
}

std::optional<DiagCode> diagCodeFromId(std::string_view id) {
  for (const auto& d : allDiagnostics()) {
    if (id == d.id || id == d.slug) return d.code;
  }
  return std::nullopt;
}

const char* severityName(Severity s) {
  switch (s) {
    case Severity::kNote:
      return "note";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "?";
}

std::string describeSite(int rank, int tb, int step) {
  std::string out;
  auto part = [&out](const char* name, int v) {
    if (v < 0) return;
    if (!out.empty()) out += ' ';
    out += name;
    out += ' ';
    out += std::to_string(v);
  };
  part("rank", rank);
  part("tb", tb);
  part("step", step);
  return out;
}

std::string Diagnostic::format() const {
  std::string out;
  if (!loc.file.empty()) {
    out += loc.file;
    if (loc.line > 0) {
      out += ':' + std::to_string(loc.line);
      if (loc.column > 0) out += ':' + std::to_string(loc.column);
    }
    out += ": ";
  }
  out += severityName(severity);
  out += '[';
  out += id();
  out += "]: ";
  std::string site = describeSite(loc.rank, loc.tb, loc.step);
  if (!site.empty()) out += site + ": ";
  out += message;
  return out;
}

Diagnostic& DiagnosticList::add(DiagCode code, Location loc, std::string message) {
  items_.push_back(Diagnostic{code, diagInfo(code).severity, std::move(loc), std::move(message)});
  return items_.back();
}

void DiagnosticList::append(const DiagnosticList& other) {
  items_.insert(items_.end(), other.items_.begin(), other.items_.end());
}

void DiagnosticList::promoteWarnings(bool (*pred)(DiagCode)) {
  for (auto& d : items_) {
    if (d.severity == Severity::kWarning && pred(d.code)) d.severity = Severity::kError;
  }
}

void DiagnosticList::sort() {
  std::stable_sort(items_.begin(), items_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    // Findings without a rank (file-level) come first.
    return std::tie(a.loc.rank, a.loc.tb, a.loc.step, a.loc.line, a.code, a.message) <
           std::tie(b.loc.rank, b.loc.tb, b.loc.step, b.loc.line, b.code, b.message);
  });
}

bool DiagnosticList::hasErrors() const { return count(Severity::kError) > 0; }

size_t DiagnosticList::count(Severity s) const {
  return static_cast<size_t>(std::count_if(items_.begin(), items_.end(),
                                           [s](const Diagnostic& d) { return d.severity == s; }));
}

bool DiagnosticList::contains(DiagCode code) const {
  return std::any_of(items_.begin(), items_.end(),
                     [code](const Diagnostic& d) { return d.code == code; });
}

}  // namespace chorus
