// Planning one call: which algorithm(s) serve it, for in-process and
// multi-process communicators alike. An explicit algorithm if the call names
// one, else the first eligible registered file (AlgorithmRegistry), else a
// built-in chosen by the rule table below (kBuiltinRules: each rule says
// why, and CHORUS_DEBUG=INFO prints it). A built-in allreduce whose chunks
// do not divide the count runs the divisible prefix and leaves the
// remainder to the one-chunk chain (two parts).
#pragma once

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/exec/executor.h"
#include "runtime/plan/selection.h"

namespace chorus::runtime {

// Built-in algorithms for one world size, generated and verified once.
//
// With a `focus` rank (a process of a multi-process world), each is that
// rank's part only (docs/scale.md): where the world has at most `proveUpTo`
// ranks, the whole algorithm is generated, verified and dropped but for the
// part; beyond, the part is generated alone (algorithms::makeClassic with a
// focus), in time and memory proportional to its own steps, and rests on
// the family's proof (kBuiltinFamilyBasis).
class BuiltinCache {
 public:
  explicit BuiltinCache(int nranks, int focus = -1, int proveUpTo = kProveRanks)
      : n_(nranks), focus_(focus), proveUpTo_(proveUpTo) {}
  Result<std::shared_ptr<const VerifiedAlgorithm>> get(const std::string& name, int root);

 private:
  int n_, focus_, proveUpTo_;
  std::map<std::pair<std::string, int>, std::shared_ptr<const VerifiedAlgorithm>> cache_;
};

// What proves a built-in part that was never verified whole: what CI
// proves of every built-in family (tests/algorithms/classic_test.cc).
extern const char* const kBuiltinFamilyBasis;

// One row of the built-in choice: for `collective`, the first rule whose
// `applies` holds names the built-in; `why` is the reason given for it.
struct BuiltinRule {
  CollectiveKind collective;
  const char* builtin;
  const char* why;
  bool (*applies)(const SelectionRequest& req);
};
// The table, in the order rules are tried. Every collective with a built-in
// ends in a rule that always applies.
std::span<const BuiltinRule> builtinRules();

struct PlanPart {
  std::shared_ptr<const VerifiedAlgorithm> va;
  size_t offset = 0;  // first element of the call this part covers
  size_t count = 0;
  // The slots' layout the part runs on (an ir::Protocol), or -1: the
  // algorithm's. GPU worlds run built-ins on LL up to
  // SelectionRequest::gpuLLBytes: a message is seen by its flags, with no
  // counter to poll and no barrier before the data is read. A file keeps
  // the protocol its author chose.
  int protocol = -1;
};

// `req` describes the call (its collective is replaced by the explicit
// algorithm's, if any); `registry` holds the candidate files. `why`
// (optional) receives the reasons.
Result<std::vector<PlanPart>> planParts(SelectionRequest req,
                                        const std::shared_ptr<const VerifiedAlgorithm>& algo,
                                        const AlgorithmRegistry& registry, BuiltinCache& builtins,
                                        std::vector<std::string>* why);

// `c` shifted to cover part `p` (in elements of the call's type; used for
// allreduce remainders, where input and output have the same layout).
CallArgs partArgs(const CallArgs& c, const PlanPart& p);

}  // namespace chorus::runtime
