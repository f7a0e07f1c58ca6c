// A deliberately simple, independent concrete interpreter of the IR, used as
// an oracle in tests: it shares no code with the verifier. Every input
// element is a distinct random 64-bit value and the reduction is wrapping
// addition, so a missing, duplicated or misplaced contribution changes the
// result with overwhelming probability. Threadblocks advance round-robin;
// queues are unbounded; uninitialized memory holds distinct random values.
#pragma once

#include <string>

#include "ir/ir.h"

namespace chorus::testing {

enum class Outcome { kCorrect, kWrongResult, kDeadlock, kInvalid, kUnsupported };
const char* outcomeName(Outcome o);

struct InterpretResult {
  Outcome outcome = Outcome::kUnsupported;
  std::string detail;
};

// Runs `algo` as an in-place or out-of-place call of its collective
// (allreduce, allgather, reducescatter, alltoall) and checks the result.
InterpretResult interpret(const ir::Algorithm& algo, bool inplace, uint64_t seed = 1);

}  // namespace chorus::testing
