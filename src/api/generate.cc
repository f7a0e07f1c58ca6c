// chorus::generate (include/chorus/gen.hpp): the compiler, then the
// independent verifier, then the MSCCL XML writer.
#include <chorus/gen.hpp>

#include "compiler/compiler.h"
#include "ir/xml_writer.h"
#include "verify/verifier.h"

namespace chorus {

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
  if (options.verify) {
    verify::Report rep = verify::verifyAlgorithm(c.algo);
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
