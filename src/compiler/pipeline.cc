#include <chrono>
#include <cstdio>
#include <functional>

#include "compiler/compiler.h"
#include "compiler/passes.h"

namespace chorus::compiler {

const std::vector<std::string>& passNames() {
  static const std::vector<std::string> names = {"schedule", "replicate",    "lower", "fuse",
                                                 "assign",   "dependencies", "emit"};
  return names;
}

Compiled compile(const lang::Program& program, const CompileOptions& options) {
  Compiled out;
  for (const lang::Problem& p : program.problems()) {
    Location loc;
    loc.file = p.file;
    loc.line = p.line;
    loc.column = p.column;
    out.diagnostics.add(DiagCode::kProgramMisuse, loc, p.message);
  }
  if (program.custom() && program.postconditions().empty() && !out.diagnostics.hasErrors()) {
    Location loc;
    loc.file = program.file();
    loc.line = program.line();
    out.diagnostics.add(DiagCode::kProgramMisuse, loc,
                        "custom collective '" + program.options().collective +
                            "' has no postcondition(): say what its outputs hold (or name a "
                            "collective the verifier knows, e.g. allreduce)");
  }
  if (out.diagnostics.hasErrors()) return out;
  Mir m;
  auto run = [&](const std::string& name, const std::function<void()>& pass) {
    auto t0 = std::chrono::steady_clock::now();
    pass();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (options.timePasses) {
      char line[96];
      std::snprintf(line, sizeof line, "%-13s %10.3f ms\n", name.c_str(), ms);
      out.timings += line;
    }
    if (options.printAfter == name && name != "emit") out.printed = print(m);
  };
  m.source = &program.operations();
  run("schedule", [&] { schedule(program, m); });
  run("replicate", [&] { replicate(program, m); });
  run("lower", [&] { lower(m); });
  run("fuse", [&] { fuse(m); });
  run("assign", [&] { assign(m, out.diagnostics); });
  if (out.diagnostics.hasErrors()) return out;
  run("dependencies", [&] { dependencies(m); });
  run("emit", [&] { out.algo = emit(m); });
  out.postconditions = std::move(m.post);
  return out;
}

}  // namespace chorus::compiler
