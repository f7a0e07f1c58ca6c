// libFuzzer target for MSCCL++ execution plans: the reader never crashes,
// what parses writes back to text that reads and writes identically, and the
// plan verifier runs on it to a verdict (bounded: it refuses plans too large
// to run symbolically); a plan it proves is lowered to two-sided steps, and
// a lowering the algorithm verifier rejects is a bug (abort).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/mscclpp_plan.h"
#include "verify/plan_verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = chorus::ir::mscclpp::readPlan(text, "fuzz.json");
  if (!r.plan) return 0;
  const std::string once = chorus::ir::mscclpp::writePlan(*r.plan);
  auto again = chorus::ir::mscclpp::readPlan(once, "again.json");
  if (!again.plan || chorus::ir::mscclpp::writePlan(*again.plan) != once) std::abort();
  auto low = chorus::verify::lowerPlan(*r.plan, "fuzz.json");
  for (const auto& d : low.diagnostics.items())
    if (d.code == chorus::DiagCode::kPlanNotRunnable &&
        d.message.find("does not prove") != std::string::npos)
      std::abort();
  return 0;
}
