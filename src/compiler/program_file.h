// Compact program files (docs/scale.md): `<program name="..." ranks="..."
// .../>` names a registered program of the Chorus language and its options.
// Reading one compiles the program for that rank count; writing one stores
// the name and options, so the file stays a few hundred bytes at any scale.
#pragma once

#include <cstdint>
#include <string>

#include "ir/xml_reader.h"
#include "lang/registry.h"

namespace chorus::compiler {

// Reading a program file expands the whole algorithm: up to this many ranks
// (and as many chunks as a ring allreduce of them). Past that, a rank
// builds its own part (compileRank, chorus gen --rank).
inline constexpr int kMostProgramFileRanks = 4096;

// Expands a <program> element: checks its attributes (each problem names
// file:line:column), records the program and compiles it. The result is
// the whole algorithm, not yet verified (readers never verify).
ir::ReadResult expandProgramFile(const ir::ProgramReference& ref);
// The same checks, then rank `rank`'s part only (compileRank), at any rank
// count: ReadResult::part is `rank`, every other rank has no threadblocks.
ir::ReadResult expandProgramPart(const ir::ProgramReference& ref, int rank);

// What a reader needs to expand program files (ir::ReadOptions::programs),
// and read options with them (and `focus`, a rank's part) for callers that
// take compact program files: the chorus command, the C API's registry and
// loaded files, the Python package.
const ir::ProgramFiles& programFiles();
ir::ReadOptions readOptions(int focus = -1);

// The compact file for `entry` with the options as a user gives them
// (chorus gen's: chunk-factor a multiple of the program's own) and a size
// range for selection (0: none).
std::string writeProgramFile(const lang::ProgramEntry& entry, const lang::ProgramOptions& given,
                             uint64_t minBytes = 0, uint64_t maxBytes = 0);

}  // namespace chorus::compiler
