// From a program of the Chorus language (lang.hpp) to an algorithm file:
// compile, verify, and write MSCCL XML — what `chorus gen` does for the
// registered programs, for your own.
//
//   chorus::lang::Program p({.name = "my_allgather", .collective = "allgather", .ranks = 4});
//   ... record the journeys ...
//   chorus::Generated g = chorus::generate(p);
//   if (!g.ok) std::fputs(g.diagnostics.c_str(), stderr);  // file:line: error[E601]: ...
//   else write g.xml to a file: chorus run / CHORUS_ALGO_DIR / MSCCL take it as it is.
#pragma once

#include <chorus/lang.hpp>
#include <string>

namespace chorus {

struct GenerateOptions {
  bool verify = true;      // prove the result before returning it (leave on)
  std::string printAfter;  // a compiler pass: its result goes to Generated::printed
  bool timePasses = false;
  // Write Generated::xml. Off: the algorithm is compiled and proven alone
  // (a 4096-rank ring allreduce's XML text is gigabytes).
  bool xml = true;
};

struct Generated {
  bool ok = false;
  std::string xml;  // when ok and GenerateOptions::xml
  // One line per finding: file:line:column: error[Exxx]: ..., and warnings
  // (W5xx) where the result exceeds a limit of MSCCL's executor (it is
  // still correct and Chorus runs it).
  std::string diagnostics;
  // A custom collective's postconditions as JSON (docs/postcondition.md),
  // for `chorus verify --spec` and `chorus run --spec`; empty otherwise.
  std::string spec;
  std::string printed;  // GenerateOptions::printAfter
  std::string timings;  // GenerateOptions::timePasses: one line per pass
};

Generated generate(const lang::Program& program, const GenerateOptions& options = {});

}  // namespace chorus
