// `chorus gen NAME`: runs a registered program of the Chorus language,
// compiles it, verifies the result and writes MSCCL XML.
#include <fmt/core.h>

#include <algorithm>
#include <chorus/gen.hpp>
#include <chrono>
#include <cstdio>
#include <memory>

#include "core/io.h"
#include "lang/registry.h"
#include "tools/chorus/commands.h"

namespace chorus::cli {

namespace {
std::string optionList(const lang::ProgramEntry& e) {
  std::string s;
  for (const std::string& o : e.options) s += (s.empty() ? "--" : " --") + o;
  return s;
}
}  // namespace

std::unique_ptr<lang::Program> recordProgram(const GenArgs& args, std::string* problem) {
  const lang::ProgramEntry* e = lang::findProgram(args.name);
  if (e == nullptr) {
    *problem = "no program named '" + args.name + "' (chorus gen --list)";
    return nullptr;
  }
  if (!e->ranksOk(args.ranks)) {
    *problem = fmt::format("--ranks {} does not suit it (ranks: {})", args.ranks, e->ranks);
    return nullptr;
  }
  // An option the program does not read would be silently ignored: refuse it.
  const std::pair<const char*, bool> given[] = {{"gpus-per-node", args.gpusPerNode != 0},
                                                {"channels", args.channels != 1},
                                                {"chunk-factor", args.chunkFactor != 1},
                                                {"root", args.root != 0}};
  for (auto [name, set] : given)
    if (set && std::find(e->options.begin(), e->options.end(), name) == e->options.end()) {
      *problem = fmt::format("it does not read --{} ({})", name,
                             e->options.empty() ? "it reads none beyond the common options"
                                                : "it reads " + optionList(*e));
      return nullptr;
    }
  if (args.root >= args.ranks) {
    *problem = fmt::format("--root {} is not a rank of {}", args.root, args.ranks);
    return nullptr;
  }
  lang::ProgramOptions o;
  o.name = args.name;
  o.collective = e->collective;
  o.ranks = args.ranks;
  o.inplace = args.inplace;
  o.protocol = args.protocol;
  o.instances = args.instances;
  o.blockedInstances = args.blockedInstances;
  o.gpusPerNode = args.gpusPerNode;
  o.channels = args.channels;
  o.root = args.root;
  o.chunkFactor = e->chunkFactor(o) * args.chunkFactor;
  auto program = std::make_unique<lang::Program>(o);
  e->build(*program);
  return program;
}

int runGen(const GenArgs& args) {
  if (args.list) {
    for (const lang::ProgramEntry& e : lang::programs()) {
      fmt::print("{:<28} {:<13} ranks: {:<18} {}\n", e.name, e.collective, e.ranks, e.description);
      if (!e.options.empty()) fmt::print("{:<28} also reads: {}\n", "", optionList(e));
    }
    fmt::print(
        "every program reads --ranks N --instances I [--blocked-instances] --protocol "
        "Simple|LL|LL128 --inplace\n");
    return 0;
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string problem;
  std::unique_ptr<lang::Program> recorded = recordProgram(args, &problem);
  if (recorded == nullptr) {
    fmt::print(stderr, "chorus gen {}: {}\n", args.name, problem);
    return 2;
  }
  if (args.output.empty() && args.printAfter.empty()) {
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
  const std::string& xml = g.xml;
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
