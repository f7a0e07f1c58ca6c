#include "verify/verifier.h"

#include <algorithm>

#include "ir/validate.h"
#include "verify/graph.h"
#include "verify/semantics.h"

namespace chorus::verify {

namespace {

// One slice's order (ir::sliceOrder) proven as the file's is: its
// diagnostics, each at the step of the file it names.
void verifySliceOrder(const ir::Algorithm& algo, const Options& options, Report& report) {
  std::vector<std::vector<std::vector<int>>> position;
  const ir::Algorithm slice = ir::sliceOrder(algo, &position);
  Options o = options;
  o.targetMscclExecutor = false;
  Report r = verifyAlgorithm(slice, o);
  for (Diagnostic d : r.diagnostics.items()) {
    if (d.severity != Severity::kError && d.code != DiagCode::kSemanticsUnproven) continue;
    if (d.loc.rank >= 0 && d.loc.tb >= 0 && d.loc.step >= 0) {
      const std::vector<int>& at =
          position[static_cast<size_t>(d.loc.rank)][static_cast<size_t>(d.loc.tb)];
      const auto it = std::find(at.begin(), at.end(), d.loc.step);
      if (it != at.end()) d.loc.step = static_cast<int>(it - at.begin());
    }
    d.message +=
        " [in one slice's order: each threadblock's steps by lag, then position; step "
        "numbers in this message count in that order]";
    report.diagnostics.items().push_back(std::move(d));
  }
  for (size_t f = 0; f < report.forms.size() && f < r.forms.size(); ++f)
    report.forms[f].proven = report.forms[f].proven && r.forms[f].proven;
  report.semanticsChecked = report.semanticsChecked && r.semanticsChecked;
}

}  // namespace

Report verifyAlgorithm(const ir::Algorithm& algo, const Options& options) {
  Report report;
  DiagnosticList& d = report.diagnostics;
  if (algo.inplace) report.forms.push_back(FormVerdict{true, false});
  if (algo.outofplace) report.forms.push_back(FormVerdict{false, false});

  ir::validateStructure(algo, d);
  ir::checkExecutorLimits(algo, d);
  if (options.targetMscclExecutor) d.promoteWarnings(ir::isExecutorLimit);
  auto finish = [&]() {
    d.sort();
    return std::move(report);
  };
  if (d.hasErrors()) return finish();

  StepGraph graph(algo, d);
  if (d.hasErrors()) return finish();
  bool racesChecked = true;

  for (FormVerdict& form : report.forms) {
    std::string whyNot;
    DiagCode whyCode;
    std::optional<CallModel> model =
        CallModel::make(algo, form.inplace, options.spec, &whyNot, &whyCode);
    if (!model) {
      bool indivisible = whyCode == DiagCode::kIndivisible;
      d.add(whyCode, ir::siteLocation(algo, -1),
            whyNot + (indivisible ? ""
                                  : "; structure, matching and deadlock were checked, "
                                    "the result is not proven (give a post-condition with "
                                    "--spec)"));
      if (indivisible) break;
      continue;
    }
    report.semanticsChecked = true;
    racesChecked = checkRaces(graph, *model, d) && racesChecked;
    SemanticsResult sem = checkSemantics(graph, *model, d);
    form.proven = sem.correct;
    if (sem.correct && sem.root >= 0) report.root = sem.root;
  }
  if (!racesChecked) {
    d.add(DiagCode::kSemanticsUnproven, ir::siteLocation(algo, -1),
          "too large for race analysis (" + std::to_string(graph.size()) + " steps x " +
              std::to_string(graph.totalTbs()) + " threadblocks); races were not checked");
  }
  // With lags, Chorus's runtimes run each slice in another order than the
  // file's (which MSCCL's executor runs, and the checks above prove): a
  // proof of that order too. (Deadlock freedom carries over: within one
  // iteration the runtimes keep the file's order, and a dependency on a
  // smaller lag waits for an earlier iteration.)
  if (!d.hasErrors() && ir::hasLags(algo)) verifySliceOrder(algo, options, report);
  return finish();
}

}  // namespace chorus::verify
