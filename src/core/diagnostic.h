// Diagnostics: findings about a user's input (an algorithm file, a program,
// command-line arguments). Each has a stable code (documented in
// docs/diagnostics.md, never renumbered), a severity, and a location that
// names the file:line:column and/or the rank / threadblock / step at fault.
// Producers append to a DiagnosticList; consumers sort it into a
// deterministic order and print or serialize it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

// X(enumerator, code, slug, default severity, summary)
#define CHORUS_DIAGNOSTICS(X)                                                                      \
  /* Reading the file. */                                                                          \
  X(kXmlSyntax, "E001", "xml-syntax", kError, "the file is not well-formed XML")                   \
  X(kMissingAttribute, "E002", "missing-attribute", kError, "a mandatory attribute is absent")     \
  X(kBadAttribute, "E003", "bad-attribute", kError, "an attribute value is not valid")             \
  X(kBadStructure, "E004", "bad-structure", kError, "elements are missing or misplaced")           \
  X(kIoFailure, "E005", "io", kError, "the file cannot be read or written")                        \
  X(kLegacyDialect, "N006", "legacy-dialect", kNote, "an older MSCCL dialect was read")            \
  /* Structure (docs/spec/IR.md sections 1, 4, 6). */                                              \
  X(kRankIds, "E101", "rank-ids", kError, "gpu ids are not exactly 0..ngpus-1")                    \
  X(kTbIds, "E102", "tb-ids", kError, "threadblock ids are not contiguous from 0")                 \
  X(kPeerSelf, "E103", "peer-self", kError, "a threadblock's peer is its own rank")                \
  X(kPeerRange, "E104", "peer-range", kError, "a peer is not a rank of the algorithm")             \
  X(kChannelRange, "E105", "channel-range", kError, "a channel is outside 0..nchannels-1")         \
  X(kDuplicateConnection, "E106", "duplicate-connection", kError,                                  \
    "two threadblocks own the same (channel, peer, direction)")                                    \
  X(kStepPosition, "E107", "step-position", kError, "a step's s differs from its position")        \
  X(kMissingPeer, "E108", "missing-peer", kError,                                                  \
    "a step sends or receives but its threadblock has no such peer")                               \
  X(kNegativeCount, "E109", "negative-count", kError, "a step has cnt < 0")                        \
  X(kOffsetRange, "E110", "offset-range", kError,                                                  \
    "a step's off+cnt exceeds the chunks its rank declares")                                       \
  X(kBadDependency, "E111", "bad-dependency", kError,                                              \
    "a dependency names a missing threadblock or step, or itself")                                 \
  X(kDependencyWithoutHasdep, "E112", "dep-without-hasdep", kError,                                \
    "a dependency target does not have hasdep=1")                                                  \
  X(kNopWithoutDependency, "E113", "nop-without-dep", kError, "a nop carries no dependency")       \
  X(kNopRunWithoutDependency, "E114", "nop-run-without-dep", kError,                               \
    "a run of nops ends at a step without its own dependency")                                     \
  X(kBadAlgoAttribute, "E115", "bad-algo-attribute", kError,                                       \
    "ngpus, nchannels, nchunksperloop or the call forms are unusable")                             \
  X(kUnusedOperand, "E116", "bad-operand", kError,                                                 \
    "an operand the instruction uses has no chunk (offset -1)")                                    \
  X(kFusionHazard, "E117", "fusion-hazard", kError,                                                \
    "a fusable run of re steps reads the chunk it writes")                                         \
  X(kLagDependency, "E118", "lag-dependency", kError, "a step depends on a step of a larger lag")  \
  /* Matching and deadlock. */                                                                     \
  X(kUnmatchedSend, "E201", "unmatched-send", kError, "a send has no matching receive")            \
  X(kUnmatchedRecv, "E202", "unmatched-recv", kError, "a receive has no matching send")            \
  X(kCountMismatch, "E203", "count-mismatch", kError, "a matched send and receive differ in cnt")  \
  X(kDeadlock, "E204", "deadlock", kError, "the happens-before graph has a cycle")                 \
  X(kSlotDeadlock, "E205", "slot-deadlock", kError,                                                \
    "sends wait on each other for free slots (8 per connection)")                                  \
  X(kLagMismatch, "E206", "lag-mismatch", kError, "a matched send and receive differ in lag")      \
  /* Semantics (docs/spec/IR.md section 5). */                                                     \
  X(kWrongResult, "E301", "wrong-result", kError, "an output chunk holds the wrong data")          \
  X(kDuplicateContribution, "E302", "duplicate-contribution", kError,                              \
    "an output chunk holds a contribution more than once")                                         \
  X(kMissingContribution, "E303", "missing-contribution", kError,                                  \
    "an output chunk lacks a contribution")                                                        \
  X(kInputModified, "E304", "input-modified", kError,                                              \
    "an out-of-place call overwrites its input buffer")                                            \
  X(kOutOfBuffer, "E305", "out-of-buffer", kError,                                                 \
    "a step touches chunks past the buffer the call provides")                                     \
  X(kRemoteOperand, "E306", "remote-operand", kError,                                              \
    "a reducing receive names the remote chunk as its local operand")                              \
  X(kIndivisible, "E307", "indivisible", kError,                                                   \
    "nchunksperloop does not fit the collective's buffer shape")                                   \
  X(kSemanticsUnproven, "N308", "semantics-unproven", kNote,                                       \
    "no specification: the result is not proven")                                                  \
  X(kSpecInvalid, "E309", "bad-spec", kError, "a post-condition file is malformed")                \
  /* Races. */                                                                                     \
  X(kRace, "E401", "race", kError, "two unordered steps of one rank conflict on a chunk")          \
  /* MSCCL executor limits (warnings unless --target msccl). */                                    \
  X(kLimitChannels, "W501", "limit-channels", kWarning, "more than 32 channels")                   \
  X(kLimitTbsPerChannel, "W502", "limit-tbs-per-channel", kWarning,                                \
    "more than 32 send or receive threadblocks on one channel")                                    \
  X(kLimitCount, "W503", "limit-count", kWarning, "a step has cnt > 71")                           \
  X(kLimitOffset, "W504", "limit-offset", kWarning, "an offset is 32768 or more")                  \
  X(kLimitDepTb, "W505", "limit-dep-tb", kWarning, "a dependency names a tb id above 127")         \
  X(kLimitSteps, "W506", "limit-steps", kWarning, "a threadblock has more than 64 steps")          \
  X(kLimitAttributes, "W507", "limit-attributes", kWarning,                                        \
    "the algo element lacks attributes, or names a coll, the current executor refuses")            \
  X(kSliceIgnored, "W508", "slice-ignored", kWarning,                                              \
    "sliceBytes, Chorus's own, which the MSCCL executor ignores")                                  \
  X(kLagIgnored, "W509", "lag-ignored", kWarning,                                                  \
    "a step's lag, Chorus's own, which the MSCCL executor ignores")                                \
  /* Programs in the Chorus language (the compiler). */                                            \
  X(kProgramMisuse, "E601", "program-misuse", kError,                                              \
    "a program operation is invalid at its line")                                                  \
  X(kAssignmentConflict, "E602", "assignment-conflict", kError,                                    \
    "threadblocks or channels cannot be assigned as the program needs")                            \
  /* MSCCL++ execution plans (ir/mscclpp_plan.h, verify/plan_verifier.h). */                       \
  X(kPlanFormat, "E701", "plan-format", kError,                                                    \
    "the plan's JSON is malformed or a field is wrong")                                            \
  X(kPlanUnreadKey, "N702", "plan-unread-key", kNote, "a key MSCCL++'s parser does not read")      \
  X(kPlanStructure, "E703", "plan-structure", kError,                                              \
    "an id, index, channel or buffer of the plan does not resolve")                                \
  X(kPlanDeadlock, "E704", "plan-deadlock", kError,                                                \
    "operations wait for a signal, barrier, semaphore or packet that never comes")                 \
  X(kPlanRace, "E705", "plan-race", kError, "two unordered operations conflict on the same bytes") \
  X(kPlanLimit, "W706", "plan-limit", kWarning, "the plan exceeds a limit of MSCCL++'s executor")  \
  X(kPlanIgnored, "W707", "plan-ignored", kWarning,                                                \
    "MSCCL++'s executor does not do what the plan says")                                           \
  X(kPlanNotRunnable, "E708", "plan-not-runnable", kError,                                         \
    "a proven plan that Chorus cannot run as two-sided steps")

enum class DiagCode {
#define CHORUS_DIAG_ENUM(e, code, slug, sev, summary) e,
  CHORUS_DIAGNOSTICS(CHORUS_DIAG_ENUM)
#undef CHORUS_DIAG_ENUM
};

enum class Severity { kNote, kWarning, kError };

struct DiagInfo {
  DiagCode code;
  const char* id;       // stable: "E110"
  const char* slug;     // stable: "offset-range"
  Severity severity;    // default severity
  const char* summary;  // one line
};

const DiagInfo& diagInfo(DiagCode code);
const std::vector<DiagInfo>& allDiagnostics();
std::optional<DiagCode> diagCodeFromId(std::string_view id);
const char* severityName(Severity s);

// Where a finding is. Any part may be absent (-1 / empty).
struct Location {
  std::string file;
  int line = -1;
  int column = -1;
  int rank = -1;
  int tb = -1;
  int step = -1;
};

struct Diagnostic {
  DiagCode code;
  Severity severity;
  Location loc;
  std::string message;

  const char* id() const { return diagInfo(code).id; }
  // "file:12:5: error[E110]: rank 3 tb 1 step 7: <message>"
  std::string format() const;
};

class DiagnosticList {
 public:
  // Adds a finding with the code's default severity, or `severity` if given.
  Diagnostic& add(DiagCode code, Location loc, std::string message);
  void append(const DiagnosticList& other);

  // Turns warnings of the given codes into errors (e.g. --target msccl).
  void promoteWarnings(bool (*pred)(DiagCode));
  // Deterministic order: by rank, tb, step, line, code, message.
  void sort();

  bool hasErrors() const;
  size_t count(Severity s) const;
  bool contains(DiagCode code) const;
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  const std::vector<Diagnostic>& items() const { return items_; }
  std::vector<Diagnostic>& items() { return items_; }

 private:
  std::vector<Diagnostic> items_;
};

// "rank 3 tb 1 step 7" (only the parts that are set), or "" if none is.
std::string describeSite(int rank, int tb, int step);

}  // namespace chorus
