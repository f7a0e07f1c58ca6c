// Lowers a recorded program (include/chorus/lang.hpp) to the Algorithm IR:
// one ordered pipeline of passes, each in its own file, each linear in the
// number of chunk operations, each printable.
//
//   schedule   the operations by depth (hops from what they depend on), then
//              program order: every rank does every chunk's first hop first
//   replicate  the operations once per instance, chunks interleaved or blocked
//   lower      each operation becomes instructions on the ranks it touches
//              (a send and a receive, or a local copy / reduce)
//   fuse       a receive whose chunk is sent on next becomes rcs / rrcs, and
//              rrs where the reduced chunk is scratch nobody reads again
//   assign     threadblocks (one peer each way per channel) and channels,
//              honouring hints and naming the lines that make it impossible
//   deps       the fewest cross-threadblock dependencies that keep every
//              rank's reads and writes in program order (nops for extras)
//   emit       the IR, with scratch buffers laid out one after another
#pragma once

#include <chorus/lang.hpp>
#include <string>
#include <vector>

#include "core/diagnostic.h"
#include "ir/ir.h"
#include "lang/registry.h"

namespace chorus::compiler {

struct CompileOptions {
  std::string printAfter;  // a pass name: its result goes to Compiled::printed
  bool timePasses = false;
};

struct Compiled {
  ir::Algorithm algo;
  // What a custom collective's outputs hold (all instances); the verifier
  // proves `algo` against it. Empty for the collectives it knows.
  std::vector<lang::Expected> postconditions;
  DiagnosticList diagnostics;  // the program's problems and the compiler's
  std::string printed;
  std::string timings;  // one line per pass when timePasses
  // A per-rank compile (ProgramOptions::focus): algo.ranks holds only this
  // rank; algo.nchannels counts the channels it uses.
  int focus = -1;
  bool fromRankForm = false;  // built by the program's per-rank form
  bool ok() const { return !diagnostics.hasErrors(); }
};

// A program recorded whole, or by its per-rank form (options().focus set:
// then only that rank's part comes out, and every operation needs a depth).
Compiled compile(const lang::Program& program, const CompileOptions& options = {});
// The same for a program the caller gives up: its operations are freed as
// soon as they are lowered (at scale, they are the largest thing alive).
Compiled compile(lang::Program&& program, const CompileOptions& options = {});

// Rank `options.focus`'s part of registered program `entry` (options from
// lang::programOptions), no more: from its per-rank form where it has one,
// in time and memory proportional to the rank's own steps; otherwise the
// whole program is compiled and the rest dropped.
Compiled compileRank(const lang::ProgramEntry& entry, const lang::ProgramOptions& options);

// The whole algorithm of registered program `entry`, assembled from every
// rank's part (compileRank, on `threads` threads; 0: one per core): equal to
// compile()'s (per_rank_test.cc checks each part), in time proportional to
// the steps and memory of the result plus one part per thread. Without
// postconditions (a custom collective's come from compile()).
Compiled compileByRanks(const lang::ProgramEntry& entry, const lang::ProgramOptions& options,
                        unsigned threads = 0);

// The passes, in order.
const std::vector<std::string>& passNames();

}  // namespace chorus::compiler
