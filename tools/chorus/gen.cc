// `chorus gen NAME`: runs a registered program of the Chorus language,
// compiles it, verifies the result and writes MSCCL XML.
#include <fmt/core.h>

#include <chorus/gen.hpp>
#include <chrono>
#include <cstdio>

#include "core/io.h"
#include "lang/registry.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

int runGen(const GenArgs& args) {
  if (args.list) {
    for (const lang::ProgramEntry& e : lang::programs())
      fmt::print("{:<30} {:<14} ranks: {:<14} {}\n", e.name, e.collective, e.ranks, e.description);
    fmt::print(
        "options: --ranks N --instances I --protocol Simple|LL|LL128 --inplace "
        "--gpus-per-node G\n");
    return 0;
  }
  const lang::ProgramEntry* e = lang::findProgram(args.name);
  if (e == nullptr) {
    fmt::print(stderr, "chorus gen: no program named '{}' (chorus gen --list)\n", args.name);
    return 2;
  }
  if (!e->ranksOk(args.ranks)) {
    fmt::print(stderr, "chorus gen {}: --ranks {} does not suit it (ranks: {})\n", e->name,
               args.ranks, e->ranks);
    return 2;
  }
  if (args.output.empty() && args.printAfter.empty()) {
    fmt::print(stderr, "chorus gen {}: say where the XML goes (-o FILE, or -o - for stdout)\n",
               e->name);
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  lang::ProgramOptions o;
  o.name = args.name;
  o.collective = e->collective;
  o.ranks = args.ranks;
  o.chunkFactor = e->chunkFactor(args.ranks);
  o.inplace = args.inplace;
  o.protocol = args.protocol;
  o.instances = args.instances;
  o.gpusPerNode = args.gpusPerNode;
  lang::Program program(o);
  e->build(program);
  GenerateOptions go;
  go.verify = !args.noVerify;
  go.printAfter = args.printAfter;
  go.timePasses = args.timePasses;
  Generated g = generate(program, go);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!g.printed.empty()) fmt::print("{}", g.printed);
  if (args.timePasses)
    fmt::print(stderr, "{}total (record + compile + verify) {:.3f} ms\n", g.timings, ms);
  fmt::print(stderr, "{}", g.diagnostics);
  if (!g.ok) {
    fmt::print(stderr, "chorus gen {}: nothing written\n", e->name);
    return 1;
  }
  const std::string& xml = g.xml;
  if (args.output.empty()) return 0;
  if (args.output == "-") {
    std::fwrite(xml.data(), 1, xml.size(), stdout);
    return 0;
  }
  Status st = writeTextFile(xml, args.output);
  if (!st.isOk()) {
    fmt::print(stderr, "chorus gen: {}\n", st.message());
    return 1;
  }
  return 0;
}

}  // namespace chorus::cli
