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

Generated generate(const lang::Program& program, const GenerateOptions& options) {
  Generated g;
  compiler::CompileOptions co;
  co.printAfter = options.printAfter;
  co.timePasses = options.timePasses;
  compiler::Compiled c = compiler::compile(program, co);
  g.printed = std::move(c.printed);
  g.timings = std::move(c.timings);
  c.diagnostics.sort();
  for (const Diagnostic& d : c.diagnostics.items()) g.diagnostics += d.format() + "\n";
  if (!c.ok()) return g;
  g.xml = ir::writeXml(c.algo);
  if (options.printAfter == "emit") g.printed = g.xml;
  // A custom collective's meaning, for the verifier and for `chorus run --spec`.
  std::optional<verify::PostCondition> spec = postconditionOf(program, c);
  if (spec) g.spec = verify::writePostCondition(*spec);
  if (options.verify) {
    verify::Options vo;
    vo.spec = spec ? &*spec : nullptr;
    verify::Report rep = verify::verifyAlgorithm(c.algo, vo);
    // Errors, and the MSCCL executor's limits (W5xx) the result exceeds.
    for (const Diagnostic& d : rep.diagnostics.items())
      if (d.severity != Severity::kNote) g.diagnostics += d.format() + "\n";
    if (!rep.correct()) {
      g.diagnostics +=
          "the compiled algorithm does not verify: the program computes something "
          "other than " +
          program.options().collective + " (or the compiler has a bug)\n";
      g.xml.clear();
      return g;
    }
  }
  g.ok = true;
  return g;
}

}  // namespace chorus
