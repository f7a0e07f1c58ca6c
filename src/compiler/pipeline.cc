#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>

#include "compiler/compiler.h"
#include "compiler/passes.h"
#include "core/check.h"

namespace chorus::compiler {

const std::vector<std::string>& passNames() {
  static const std::vector<std::string> names = {"schedule", "replicate",    "lower", "fuse",
                                                 "assign",   "dependencies", "emit"};
  return names;
}

namespace {

// `owned`: the same program, when the caller gives it up: its operations
// are freed once lowered (per-rank compiles at scale: they are the largest
// thing alive then).
Compiled compileImpl(const lang::Program& program, const CompileOptions& options,
                     lang::Program* owned) {
  Compiled out;
  for (const lang::Problem& p : program.problems()) {
    Location loc;
    loc.file = p.file;
    loc.line = p.line;
    loc.column = p.column;
    out.diagnostics.add(DiagCode::kProgramMisuse, loc, p.message);
  }
  if (program.custom() && program.postconditions().empty() && program.focus() < 0 &&
      !out.diagnostics.hasErrors()) {
    Location loc;
    loc.file = program.file();
    loc.line = program.line();
    out.diagnostics.add(DiagCode::kProgramMisuse, loc,
                        "custom collective '" + program.options().collective +
                            "' has no postcondition(): say what its outputs hold (or name a "
                            "collective the verifier knows, e.g. allreduce)");
  }
  for (const lang::Operation& op : program.operations()) {
    if (program.focus() < 0 || op.depth >= 1) continue;
    Location loc;
    loc.file = op.file;
    loc.line = op.line;
    loc.column = op.column;
    out.diagnostics.add(DiagCode::kProgramMisuse, loc,
                        "an operation of a per-rank form has no depth: call Program::depth(d) "
                        "with the depth the whole program's schedule gives it");
    break;
  }
  if (out.diagnostics.hasErrors()) return out;
  out.focus = program.focus();
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
  m.fuseWhileLowering = options.printAfter != "lower";  // that print shows the sends unfused
  run("schedule", [&] { schedule(program, m); });
  run("replicate", [&] { replicate(program, m); });
  run("lower", [&] { lower(m); });
  if (owned != nullptr) owned->releaseOperations();
  run("fuse", [&] { fuse(m); });
  run("assign", [&] { assign(m, out.diagnostics); });
  if (out.diagnostics.hasErrors()) return out;
  run("dependencies", [&] { dependencies(m, out.diagnostics); });
  if (out.diagnostics.hasErrors()) return out;
  run("emit", [&] { out.algo = emit(m); });
  out.postconditions = std::move(m.post);
  return out;
}

}  // namespace

Compiled compile(const lang::Program& program, const CompileOptions& options) {
  return compileImpl(program, options, nullptr);
}

Compiled compile(lang::Program&& program, const CompileOptions& options) {
  return compileImpl(program, options, &program);
}

Compiled compileRank(const lang::ProgramEntry& entry, const lang::ProgramOptions& options) {
  CHORUS_CHECK(options.focus >= 0 && options.focus < options.ranks, "compileRank needs a rank");
  if (entry.buildRank) {
    lang::Program p(options);
    entry.buildRank(p);
    Compiled c = compile(std::move(p));
    c.fromRankForm = true;
    return c;
  }
  lang::ProgramOptions whole = options;
  whole.focus = -1;
  lang::Program p(whole);
  entry.build(p);
  Compiled c = compile(p);
  c.focus = options.focus;
  if (!c.ok()) return c;
  ir::Rank mine = std::move(c.algo.ranks[static_cast<size_t>(options.focus)]);
  c.algo.ranks.clear();
  c.algo.ranks.push_back(std::move(mine));
  c.algo.nchannels = 1;  // as a per-rank form counts them: its own
  for (const ir::Threadblock& tb : c.algo.ranks.front().tbs)
    c.algo.nchannels = std::max(c.algo.nchannels, tb.channel + 1);
  c.postconditions.clear();
  return c;
}

Compiled compileByRanks(const lang::ProgramEntry& entry, const lang::ProgramOptions& options,
                        unsigned threads) {
  const int n = options.ranks;
  std::vector<Compiled> parts(static_cast<size_t>(n));
  std::atomic<int> next{0};
  std::vector<std::string> failed(static_cast<size_t>(n));  // a rank's exception, if any
  auto work = [&] {
    for (int r = next++; r < n; r = next++) {
      lang::ProgramOptions o = options;
      o.focus = r;
      try {
        parts[static_cast<size_t>(r)] = compileRank(entry, o);
      } catch (const std::exception& e) {  // out of memory: no exception leaves a thread
        failed[static_cast<size_t>(r)] = e.what();
        next = n;
      }
    }
  };
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, static_cast<unsigned>(std::max(n, 1)));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  Compiled out;
  for (int r = 0; r < n; ++r) {
    Compiled& part = parts[static_cast<size_t>(r)];
    if (!failed[static_cast<size_t>(r)].empty()) {
      Location loc;
      loc.file = entry.name;
      out.diagnostics.add(DiagCode::kProgramMisuse, loc,
                          "rank " + std::to_string(r) +
                              "'s part could not be built: " + failed[static_cast<size_t>(r)]);
      return out;
    }
    // Problems with the options are every rank's: the first rank's say it.
    for (Diagnostic& d : part.diagnostics.items()) out.diagnostics.items().push_back(std::move(d));
    if (!out.ok()) return out;
  }
  if (parts.empty()) return out;
  out.algo.nchannels = 1;
  std::vector<ir::Rank> ranks;
  ranks.reserve(static_cast<size_t>(n));
  for (Compiled& part : parts) {
    out.algo.nchannels = std::max(out.algo.nchannels, part.algo.nchannels);
    ranks.push_back(std::move(part.algo.ranks.front()));
    part.algo.ranks.clear();
  }
  const int nchannels = out.algo.nchannels;
  out.algo = std::move(parts.front().algo);  // the header (every part's is the same)
  out.algo.nchannels = nchannels;
  out.algo.ranks = std::move(ranks);
  return out;
}

}  // namespace chorus::compiler
