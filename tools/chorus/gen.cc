// `chorus gen NAME`: runs a registered program of the Chorus language,
// compiles it, verifies the result and writes MSCCL XML.
#include <fmt/core.h>

#include <algorithm>
#include <chorus/gen.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "compiler/compiler.h"
#include "compiler/program_file.h"
#include "core/io.h"
#include "ir/xml_writer.h"
#include "lang/registry.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

namespace {
// The options as given (lang::programOptions checks and completes them).
lang::ProgramOptions givenOptions(const GenArgs& args) {
  lang::ProgramOptions given;
  given.ranks = args.ranks;
  given.inplace = args.inplace;
  given.protocol = args.protocol;
  given.instances = args.instances;
  given.blockedInstances = args.blockedInstances;
  given.gpusPerNode = args.gpusPerNode;
  given.channels = args.channels;
  given.root = args.root;
  given.chunkFactor = args.chunkFactor;
  return given;
}
}  // namespace

namespace {

// `chorus gen NAME --rank R`: rank R's part alone. Whether the program is
// right is the whole program's proof (chorus gen without --rank).
int genRank(const GenArgs& args) {
  const lang::ProgramEntry* e = lang::findProgram(args.name);
  if (e == nullptr) {
    fmt::print(stderr, "chorus gen {}: no program named '{}' (chorus gen --list)\n", args.name,
               args.name);
    return 2;
  }
  lang::ProgramOptions given = givenOptions(args);
  given.focus = args.rank;
  lang::ProgramOptions o;
  std::string problem;
  if (!lang::programOptions(*e, given, &o, &problem)) {
    fmt::print(stderr, "chorus gen {}: {}\n", args.name, problem);
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  compiler::Compiled c = compiler::compileRank(*e, o);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (const Diagnostic& d : c.diagnostics.items()) fmt::print(stderr, "{}\n", d.format());
  if (!c.ok()) {
    fmt::print(stderr, "chorus gen {}: nothing written\n", e->name);
    return 1;
  }
  const ir::Rank& part = c.algo.ranks.front();
  size_t steps = 0;
  for (const ir::Threadblock& tb : part.tbs) steps += tb.steps.size();
  fmt::print(stderr,
             "chorus gen {}: rank {} of {}: {} threadblocks, {} steps, built in {:.3f} ms ({})\n",
             e->name, args.rank, args.ranks, part.tbs.size(), steps, ms,
             c.fromRankForm ? "its per-rank form" : "compiled whole, the other ranks dropped");
  if (args.output.empty()) return 0;
  const std::string xml = ir::writeXml(c.algo);
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

}  // namespace

int runGen(const GenArgs& args) {
  if (args.list) {
    for (const lang::ProgramEntry& e : lang::programs()) {
      fmt::print("{:<28} {:<13} ranks: {:<18} {}\n", e.name, e.collective, e.ranks, e.description);
      if (!e.options.empty()) fmt::print("{:<28} also reads: {}\n", "", lang::optionList(e));
    }
    fmt::print(
        "every program reads --ranks N --instances I [--blocked-instances] --protocol "
        "Simple|LL|LL128 --inplace\n");
    return 0;
  }
  if (args.rank >= 0) return genRank(args);  // before recording: it never sees the whole
  if (args.compact && args.ranks > compiler::kMostProgramFileRanks) {
    fmt::print(stderr,
               "chorus gen {}: a compact file is read whole, up to {} ranks (past that, a rank "
               "builds its part: --rank R)\n",
               args.name, compiler::kMostProgramFileRanks);
    return 2;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string problem;
  std::unique_ptr<lang::Program> recorded =
      lang::recordProgram(args.name, givenOptions(args), &problem);
  if (recorded == nullptr) {
    fmt::print(stderr, "chorus gen {}: {}\n", args.name, problem);
    return 2;
  }
  if (args.output.empty() && args.printAfter.empty() && args.rank < 0) {
    fmt::print(stderr, "chorus gen {}: say where the XML goes (-o FILE, or -o - for stdout)\n",
               args.name);
    return 2;
  }
  const lang::Program& program = *recorded;
  const lang::ProgramEntry* e = lang::findProgram(args.name);
  GenerateOptions go;
  go.verify = !args.noVerify;
  go.printAfter = args.printAfter;
  go.timePasses = args.timePasses;
  go.xml = !args.compact;  // a compact file is the program's name and options
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
  if (!args.specOutput.empty() && g.spec.empty()) {
    fmt::print(stderr, "chorus gen {}: --spec is for custom collectives; the verifier knows {}\n",
               e->name, e->collective);
    return 2;
  }
  const std::string xml =
      args.compact ? compiler::writeProgramFile(*e, givenOptions(args)) : std::move(g.xml);
  if (args.output.empty()) return 0;
  if (args.output == "-") {
    std::fwrite(xml.data(), 1, xml.size(), stdout);
    return 0;
  }
  Status st = writeTextFile(xml, args.output);
  if (st.isOk() && !args.specOutput.empty()) st = writeTextFile(g.spec, args.specOutput);
  if (!st.isOk()) {
    fmt::print(stderr, "chorus gen: {}\n", st.message());
    return 1;
  }
  return 0;
}

}  // namespace chorus::cli
