// The passes of the pipeline (compiler.h describes each); one file each.
#pragma once

#include "compiler/mir.h"

namespace chorus::compiler {

void schedule(const lang::Program& program, Mir& m);
void replicate(const lang::Program& program, Mir& m);
void lower(Mir& m);
void fuse(Mir& m);
void assign(Mir& m, DiagnosticList& diags);
void dependencies(Mir& m, DiagnosticList& diags);
ir::Algorithm emit(const Mir& m);

}  // namespace chorus::compiler
