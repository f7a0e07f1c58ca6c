#include "verify/verifier.h"

#include "ir/validate.h"
#include "verify/graph.h"
#include "verify/semantics.h"

namespace chorus::verify {

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
  return finish();
}

}  // namespace chorus::verify
