// chorus::generate (include/chorus/gen.hpp): the compiler, then the
// independent verifier, then the MSCCL XML writer.
#include "api/generate.h"

#include <chorus/gen.hpp>

#include "compiler/compiler.h"
#include "ir/xml_writer.h"
#include "verify/collective.h"
#include "verify/verifier.h"

namespace chorus {

std::optional<verify::PostCondition> postconditionOf(const lang::Program& program,
                                                     const compiler::Compiled& compiled) {
  if (!program.custom()) return std::nullopt;
  verify::PostCondition spec;
  spec.collective = program.options().collective;
  spec.inputChunks = spec.outputChunks = compiled.algo.nchunksPerLoop;
  for (const lang::Expected& e : compiled.postconditions) {
    verify::PostCondition::Entry entry{e.rank, e.index, {}};
    for (const lang::Source& s : e.holds) entry.holds.emplace_back(s.rank, s.index);
    spec.entries.push_back(std::move(entry));
  }
  return spec;
}

CheckedProgram compileAndVerify(const lang::Program& program, const GenerateOptions& options) {
  CheckedProgram out;
  compiler::CompileOptions co;
  co.printAfter = options.printAfter;
  co.timePasses = options.timePasses;
  out.compiled = compiler::compile(program, co);
  out.compiled.diagnostics.sort();
  out.diagnostics = out.compiled.diagnostics;
  if (!out.compiled.ok()) return out;
  // A custom collective's meaning, for the verifier and for `chorus run --spec`.
  out.spec = postconditionOf(program, out.compiled);
  if (options.verify) {
    verify::Options vo;
    vo.spec = out.spec ? &*out.spec : nullptr;
    verify::Report rep = verify::verifyAlgorithm(out.compiled.algo, vo);
    // Errors, and the MSCCL executor's limits (W5xx) the result exceeds.
    for (const Diagnostic& d : rep.diagnostics.items())
      if (d.severity != Severity::kNote) out.diagnostics.items().push_back(d);
    if (!rep.correct()) return out;
  }
  out.ok = true;
  return out;
}

Generated generate(const lang::Program& program, const GenerateOptions& options) {
  Generated g;
  CheckedProgram c = compileAndVerify(program, options);
  g.printed = std::move(c.compiled.printed);
  g.timings = std::move(c.compiled.timings);
  for (const Diagnostic& d : c.diagnostics.items()) g.diagnostics += d.format() + "\n";
  if (!c.compiled.ok()) return g;
  const bool emit = options.printAfter == "emit";
  std::string xml = options.xml || emit ? ir::writeXml(c.compiled.algo) : std::string();
  if (emit) g.printed = xml;
  if (!c.ok) {
    g.diagnostics +=
        "the compiled algorithm does not verify: the program computes something "
        "other than " +
        program.options().collective + " (or the compiler has a bug)\n";
    return g;
  }
  g.xml = std::move(xml);
  if (c.spec) g.spec = verify::writePostCondition(*c.spec);
  g.ok = true;
  return g;
}

}  // namespace chorus
