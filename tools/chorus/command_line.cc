// The `chorus` command line parsed into a CommandLine (the arguments of one
// subcommand), apart from running it, so the parser can be fuzzed
// (tests/fuzz/fuzz_cli.cc). The work happens in the libraries; see commands.cc.
#include "tools/chorus/command_line.h"

#include <CLI/CLI.hpp>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

#include "compiler/compiler.h"

namespace chorus::cli {
namespace {

// --device and its settings, the same for `run` and `perf`.
void addDeviceOptions(CLI::App* app, DeviceArgs& d) {
  app->add_option("--device", d.device,
                  "cpu (CPU ranks, default), engine (the CUDA executor's code on host threads), "
                  "cuda (every rank on one GPU)")
      ->check(CLI::IsMember({"cpu", "engine", "cuda"}));
  app->add_option("--gpu", d.gpu, "--device cuda: the GPU every rank runs on (default 0)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--host-threads", d.hostThreads, "--device engine: host threads (default 1)")
      ->check(CLI::PositiveNumber);
  app->add_option("--threads-per-block", d.threadsPerBlock,
                  "--device cuda: CUDA threads per block, a multiple of 32 (default 256, or "
                  "fewer where the algorithm's blocks need room on the GPU); --device engine: "
                  "host threads that run each block together (default 1)")
      ->check(CLI::Range(1, 1024));
  app->add_option("--instances", d.instances,
                  "--device engine or cuda: blocks per IR threadblock, each with its share of "
                  "every slice (default: cuda, one block per SM of the GPU, at most 16; "
                  "engine, 1)")
      ->check(CLI::Range(1, 64));
  app->add_option("--protocol", d.protocol,
                  "--device engine or cuda: run the algorithm on this protocol's slots (Simple, LL "
                  "or LL128; default: the algorithm's)")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}));
}

// "1K:1G" (K, M, G: binary) into its bounds; false where it is not one.
bool parseSizeRange(const std::string& text, size_t* from, size_t* to) {
  auto one = [](std::string part, size_t* out) {
    if (part.empty()) return false;
    size_t unit = 1;
    switch (part.back()) {
      case 'K':
      case 'k':
        unit = size_t{1} << 10;
        break;
      case 'M':
      case 'm':
        unit = size_t{1} << 20;
        break;
      case 'G':
      case 'g':
        unit = size_t{1} << 30;
        break;
      default:
        break;
    }
    if (unit != 1) part.pop_back();
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos ||
        part.size() > 12)
      return false;
    *out = std::stoull(part) * unit;
    return *out > 0;
  };
  const size_t colon = text.find(':');
  return colon != std::string::npos && one(text.substr(0, colon), from) &&
         one(text.substr(colon + 1), to) && *from <= *to;
}

// Each subcommand: its options, bound to its part of the CommandLine, and
// what to check once it is the one given (returns -1 when fine, 2 after a
// line on stderr when not).
struct Subcommand {
  CLI::App* app;
  std::function<int()> finish;
};
using Command = CommandLine::Command;

int chosen(CommandLine* cl, Command c) {
  cl->command = c;
  return -1;
}

Subcommand addVerify(CLI::App& app, CommandLine* cl) {
  VerifyArgs& verify = cl->verify;
  auto* v =
      app.add_subcommand("verify", "prove algorithm files correct, or say where they are wrong");
  v->add_option("files", verify.files, "algorithm files (MSCCL XML or Chorus JSON)")->required();
  v->add_flag("--json", verify.json, "print machine-readable results");
  v->add_flag("--target-msccl,--msccl", verify.targetMsccl,
              "treat MSCCL executor limits (W5xx) as errors");
  v->add_option("--spec", verify.spec, "post-condition JSON for a custom collective")
      ->check(CLI::ExistingFile);
  v->add_option("--max-diagnostics", verify.maxDiagnostics, "diagnostics shown per file (text)")
      ->check(CLI::NonNegativeNumber);
  auto target = std::make_shared<std::string>();
  v->add_option("--target", *target, "compatibility target: 'msccl' = the MSCCL executor")
      ->check(CLI::IsMember({"msccl", "chorus"}));
  return {v, [cl, target] {
            cl->verify.targetMsccl = cl->verify.targetMsccl || *target == "msccl";
            cl->command = Command::kVerify;
            return -1;
          }};
}

Subcommand addShow(CLI::App& app, CommandLine* cl) {
  std::string& showFile = cl->showFile;
  auto* s = app.add_subcommand("show", "summarize an algorithm: threadblocks, steps, peers, links");
  s->add_option("file", showFile, "algorithm file")->required();
  return {s, [cl] { return chosen(cl, Command::kShow); }};
}

Subcommand addConvert(CLI::App& app, CommandLine* cl) {
  ConvertArgs& convert = cl->convert;
  auto* c = app.add_subcommand("convert", "convert XML <-> JSON, or XML -> normalized XML");
  c->add_option("input", convert.input, "algorithm file")->required();
  c->add_option("-o,--output", convert.output, "output file ('-' = stdout)")->required();
  c->add_option("--to", convert.to,
                "output format: xml, json (Chorus's), mscclpp (an MSCCL++ execution plan); "
                "default: from the output's extension")
      ->check(CLI::IsMember({"xml", "json", "mscclpp"}));
  return {c, [cl] { return chosen(cl, Command::kConvert); }};
}

Subcommand addPerf(CLI::App& app, CommandLine* cl) {
  PerfArgs& perf = cl->perf;
  auto* p = app.add_subcommand("perf", "nccl-tests-style sweep of one collective on thread ranks");
  p->add_option(
       "collective", perf.collective,
       "allreduce allgather reducescatter alltoall broadcast reduce gather scatter sendrecv")
      ->required();
  p->add_option("--minbytes,-b", perf.minBytes, "smallest size (default 4K)")
      ->transform(CLI::AsSizeValue(false));
  p->add_option("--maxbytes,-e", perf.maxBytes, "largest size (default 64M)")
      ->transform(CLI::AsSizeValue(false));
  p->add_option("--stepfactor,-f", perf.factor, "size multiplier between rows (default 2)");
  p->add_option("--iters,-n", perf.iters, "timed calls per size")->check(CLI::PositiveNumber);
  p->add_option("--warmup_iters,-w", perf.warmup, "untimed calls first")
      ->check(CLI::NonNegativeNumber);
  p->add_option("--ranks", perf.ranks, "ranks (threads), default 4")->check(CLI::PositiveNumber);
  p->add_option("--dtype,-d", perf.dtype, "data type (default fp32)");
  p->add_option("--op,-o", perf.op, "sum prod max min avg (default sum)");
  p->add_option("--root,-r", perf.root, "root of broadcast/reduce (default 0)");
  p->add_option("--algo", perf.algo, "an algorithm file or a built-in name (default: automatic)");
  p->add_flag("--check,-c", perf.check, "check every result; exit 1 if any is wrong");
  p->add_flag("--csv", perf.csv, "CSV rows with a header instead of the table");
  addDeviceOptions(p, perf.dev);
  p->add_option("--procs", perf.procs,
                "run the ranks as N processes over shared memory (via chorus launch)")
      ->check(CLI::PositiveNumber);
  p->add_flag("--heap-buffers", perf.heapBuffers,
              "processes: buffers from the heap, not chorusMemAlloc (peers then cannot read "
              "them in place)");
  p->add_flag("--percentiles", perf.percentiles,
              "also the median and 99th percentile time per call (each timed call on one rank)");
  return {p, [cl] { return chosen(cl, Command::kPerf); }};
}

Subcommand addSoak(CLI::App& app, CommandLine* cl) {
  SoakArgs& soak = cl->soak;
  auto* so = app.add_subcommand(
      "soak", "a seeded mix of collectives, sizes, types and algorithms, every call checked");
  so->add_option("--calls,-n", soak.calls, "calls (default 1000)")->check(CLI::PositiveNumber);
  so->add_option("--seed", soak.seed, "the sequence's seed (default 1)");
  so->add_option("--ranks", soak.ranks, "ranks (threads), default 4")->check(CLI::Range(1, 64));
  so->add_option("--procs", soak.procs, "as N processes (via chorus launch)")
      ->check(CLI::Range(1, 64));
  so->add_option("--max-bytes,-e", soak.maxBytes, "most bytes a call moves per rank (default 1M)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(size_t{1}, size_t{1} << 30));
  so->add_option("--algo", soak.algos,
                 "algorithm files or directories to mix in (those for this rank count)");
  so->add_flag("!--no-builtins", soak.builtins, "leave out the built-ins by name");
  return {so, [cl] { return chosen(cl, Command::kSoak); }};
}

Subcommand addLaunch(CLI::App& app, CommandLine* cl) {
  LaunchArgs& launch = cl->launch;
  auto* l = app.add_subcommand(
      "launch", "start N processes (local, or on --hosts) as the ranks of one communicator");
  l->add_option("-n,--nprocs", launch.nprocs, "number of processes (ranks)")
      ->required()
      ->check(CLI::PositiveNumber);
  l->add_flag("--keep-going", launch.keepGoing,
              "let the other ranks run on when one fails (they see the failure themselves)");
  l->add_option("--hosts", launch.hosts,
                "run the ranks on these hosts, in equal blocks in rank order (h1,h2,...)")
      ->delimiter(',');
  l->add_option("--agent", launch.agent,
                "how to run a command on a host: words with {host}, then the command line as one "
                "more word (default: ssh -o BatchMode=yes {host})");
  l->add_option("--root", launch.root,
                "HOST[:PORT] where rank 0 listens, as the other hosts reach it (default: the "
                "first host, a free port)");
  l->add_option("--bind", launch.bind,
                "local ranks' CPUs: core (rank i on the i-th CPU allowed here), none, or auto "
                "(core where ranks <= CPUs; default, or CHORUS_BIND)")
      ->check(CLI::IsMember({"auto", "core", "none"}));
  l->add_option("command", launch.command, "-- PROGRAM ARGS")->required();
  return {l, [cl] { return chosen(cl, Command::kLaunch); }};
}

Subcommand addRun(CLI::App& app, CommandLine* cl) {
  RunArgs& run = cl->run;
  auto* r = app.add_subcommand("run", "run an algorithm file on CPU ranks (threads) and time it");
  r->add_option("file", run.file, "algorithm file (MSCCL XML or Chorus JSON)")->required();
  r->add_option("--bytes,-b", run.bytes,
                "message size as nccl-tests counts it: 4K, 64M (default 1M)")
      ->transform(CLI::AsSizeValue(false));
  r->add_option("--count,-c", run.count, "elements per rank (overrides --bytes)");
  r->add_option("--dtype,-d", run.dtype,
                "int8 uint8 int32 uint32 int64 uint64 fp16 bf16 fp32 fp64 fp8e4m3 fp8e5m2");
  r->add_option("--op,-o", run.op, "sum prod max min avg");
  r->add_flag("--inplace", run.inplace, "in-place call");
  r->add_flag("--outofplace", run.outofplace, "out-of-place call");
  r->add_flag("--check", run.check, "check every output element; exit 1 if any is wrong");
  r->add_option("--driver", run.driver, "threads (one per rank) or deterministic (one thread)")
      ->check(CLI::IsMember({"threads", "deterministic"}));
  r->add_option("--order", run.order, "deterministic driver's rank order")
      ->check(CLI::IsMember({"rr", "reverse", "random"}));
  r->add_option("--seed", run.seed, "seed of the random order");
  r->add_option("--slice-bytes", run.sliceBytes, "slice size per chunk (default: the protocol's)")
      ->transform(CLI::AsSizeValue(false));
  r->add_option("--slots", run.slots, "messages in flight per connection")
      ->check(CLI::PositiveNumber);
  r->add_option("--iters,-n", run.iters, "timed calls")->check(CLI::PositiveNumber);
  r->add_option("--warmup,-w", run.warmup, "untimed calls first")->check(CLI::NonNegativeNumber);
  r->add_option("--spec", run.spec,
                "postcondition JSON of a custom collective (what --check compares against)");
  r->add_option("--ranks", run.ranks, "the ranks to run on: must be the file's (checked)")
      ->check(CLI::PositiveNumber);
  addDeviceOptions(r, run.dev);
  r->add_option("--procs", run.procs,
                "run the ranks as N processes (N = the file's ranks; via chorus perf --algo)")
      ->check(CLI::PositiveNumber);
  return {r, [cl] { return chosen(cl, Command::kRun); }};
}

Subcommand addGen(CLI::App& app, CommandLine* cl) {
  GenArgs& gen = cl->gen;
  auto* g = app.add_subcommand(
      "gen", "compile a registered program of the Chorus language to verified MSCCL XML");
  g->add_option("name", gen.name, "the program (chorus gen --list)");
  g->add_flag("--list", gen.list, "list the programs and their options");
  g->add_option("--ranks", gen.ranks, "ranks")->check(CLI::Range(1, 1 << 16));
  g->add_option("--instances", gen.instances, "copies of the program side by side")
      ->check(CLI::Range(1, 64));
  g->add_flag("--blocked-instances", gen.blockedInstances,
              "each instance's chunks together in every rank's share (default: interleaved)");
  g->add_option("--protocol", gen.protocol, "Simple, LL or LL128")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}));
  g->add_flag("--inplace", gen.inplace, "the in-place form");
  g->add_option("--gpus-per-node", gen.gpusPerNode, "ranks per node (hierarchical programs)")
      ->check(CLI::PositiveNumber);
  g->add_option("--channels", gen.channels, "channels per ring (ring programs)")
      ->check(CLI::Range(1, 32));
  g->add_option("--chunk-factor", gen.chunkFactor,
                "pieces per block, pipelined one after another (ring programs)")
      ->check(CLI::Range(1, 1024));
  g->add_option("--root", gen.root, "root rank (rooted programs)")->check(CLI::NonNegativeNumber);
  g->add_option("-o,--output", gen.output, "the XML file ('-' = stdout)");
  g->add_option("--spec", gen.specOutput,
                "custom collectives: write the postcondition JSON here (for chorus run/verify "
                "--spec)");
  g->add_flag("--no-verify", gen.noVerify, "write without verifying (debugging the compiler)");
  g->add_option("--print-after", gen.printAfter, "print the program after this pass")
      ->check(CLI::IsMember(compiler::passNames()));
  g->add_flag("--time-passes", gen.timePasses, "time each pass (stderr)");
  g->add_flag("--compact", gen.compact,
              "write the compact program file (<program name=... ranks=.../>, docs/scale.md): "
              "read wherever an algorithm file is; the program is checked and verified first");
  g->add_option("--rank", gen.rank,
                "build only this rank's part, from the program's per-rank form (docs/scale.md); "
                "-o writes it (its <gpu> alone: for reading, not a runnable file)")
      ->check(CLI::NonNegativeNumber);
  return {g, [cl] {
            if (!cl->gen.list && cl->gen.name.empty()) {
              std::fprintf(stderr, "chorus gen: name a program (chorus gen --list)\n");
              return 2;
            }
            return chosen(cl, Command::kGen);
          }};
}

Subcommand addTopo(CLI::App& app, CommandLine* cl) {
  TopoArgs& topoArgs = cl->topo;
  auto* tp = app.add_subcommand("topo", "topology presets: list them, show one");
  auto* tpList = tp->add_subcommand("list", "the presets and their arguments");
  auto* tpShow = tp->add_subcommand("show", "a topology as text (or --dot, --json)");
  tpShow->add_option("topology", topoArgs.name, "a preset (NAME[:ARGS][@RANKS]) or a .json file")
      ->required();
  tpShow->add_flag("--dot", topoArgs.dot, "Graphviz");
  tpShow->add_flag("--json", topoArgs.json, "the JSON topology format");
  tp->require_subcommand(1);
  return {tp, [cl, tpList] {
            cl->topo.list = tpList->parsed();
            return chosen(cl, Command::kTopo);
          }};
}

Subcommand addSim(CLI::App& app, CommandLine* cl) {
  SimArgs& simArgs = cl->sim;
  auto* sm = app.add_subcommand("sim", "predict how fast algorithms run on a topology");
  sm->add_option("files", simArgs.files,
                 "algorithm files or built-in names (several: compared side by side; 'compare' "
                 "may come first)")
      ->required();
  sm->add_option("--topo,-t", simArgs.topo, "a preset (chorus topo list) or a .json file")
      ->required();
  sm->add_option("--bytes", simArgs.bytes, "one size (nccl-tests' meaning)")
      ->transform(CLI::AsSizeValue(false));
  sm->add_option("--minbytes,-b", simArgs.minBytes, "smallest size (default 1K)")
      ->transform(CLI::AsSizeValue(false));
  sm->add_option("--maxbytes,-e", simArgs.maxBytes, "largest size (default 1G)")
      ->transform(CLI::AsSizeValue(false));
  sm->add_option("--stepfactor,-f", simArgs.factor, "size multiplier between rows (default 4)");
  sm->add_flag("--inplace", simArgs.inplace, "the in-place call");
  sm->add_option("--slice-bytes", simArgs.sliceBytes, "slice per chunk (default: the protocol's)")
      ->transform(CLI::AsSizeValue(false));
  sm->add_option("--parts", simArgs.parts,
                 "parts a step moves its slice in, each forwarded on its own (default: the "
                 "protocol's as MSCCL's executor moves them, Simple 2, LL/LL128 1; Chorus's "
                 "runtimes move a slice whole: 1)")
      ->check(CLI::PositiveNumber);
  sm->add_option("--slots", simArgs.slots, "messages in flight per connection (default 8)")
      ->check(CLI::PositiveNumber);
  sm->add_option("--instances", simArgs.instances,
                 "each threadblock run as N instances on its own share of the slices, as "
                 "run/perf --instances do (default 1)")
      ->check(CLI::Range(1, 64));
  sm->add_option("--protocol", simArgs.protocol,
                 "run on this protocol's slots, as run/perf --protocol do: its latency, wire "
                 "overhead and parts, the algorithm's slices (Simple, LL or LL128; default: the "
                 "algorithm's)")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}));
  sm->add_option("--step-latency-us", simArgs.stepLatencyUs,
                 "per-step latency besides the links' (default: the protocol's)")
      ->check(CLI::NonNegativeNumber);
  sm->add_option("--trace", simArgs.trace, "Chrome trace (Perfetto) of the largest size");
  sm->add_option("--timeline", simArgs.timeline,
                 "the busiest links' utilization over the largest size's run, in N intervals")
      ->check(CLI::Range(1, 200));
  sm->add_option("--links", simArgs.links,
                 "with --timeline: every link whose name contains this (e.g. 'nic', 'gpu0 ->') "
                 "instead of the 8 busiest")
      ->needs("--timeline");
  sm->add_flag("--json", simArgs.json, "machine-readable results");
  return {sm, [cl] {
            SimArgs& args = cl->sim;
            if (!args.files.empty() && args.files.front() == "compare")
              args.files.erase(args.files.begin());
            if (args.files.empty()) {
              std::fprintf(stderr, "chorus sim: name at least one algorithm file\n");
              return 2;
            }
            return chosen(cl, Command::kSim);
          }};
}

Subcommand addSynth(CLI::App& app, CommandLine* cl) {
  SynthArgs& synthArgs = cl->synth;
  auto sizesRange = std::make_shared<std::string>();
  auto* sy = app.add_subcommand("synth", "the optimal schedule of a collective on a topology");
  sy->add_option("collective", synthArgs.collective,
                 "allgather, reducescatter, allreduce, broadcast, reduce or alltoall (its bound)")
      ->required();
  sy->add_option("--topo,-t", synthArgs.topo, "a preset (chorus topo list) or a topology file")
      ->required();
  sy->add_option("--ranks", synthArgs.ranks, "only these ranks of the topology (e.g. 0,1,4,5)");
  sy->add_option("--root", synthArgs.root, "broadcast / reduce root (default 0)")
      ->check(CLI::NonNegativeNumber);
  sy->add_flag("--bound-only", synthArgs.boundOnly, "the optimum and its cut, without trees");
  sy->add_option("-o,--output", synthArgs.output, "write the verified MSCCL XML here");
  sy->add_option("--name", synthArgs.name, "the algorithm's name (default synth_COLL)");
  sy->add_option("--protocol", synthArgs.protocol, "Simple, LL or LL128")
      ->check(CLI::IsMember({"Simple", "LL", "LL128"}));
  sy->add_flag("--inplace", synthArgs.inplace, "the in-place form");
  sy->add_option("--instances", synthArgs.instances,
                 "copies of the schedule on channels of their own (default: the "
                 "simulator's pick)")
      ->check(CLI::PositiveNumber);
  sy->add_option("--max-pieces", synthArgs.maxPieces,
                 "most pieces per shard the exact forest may cut (default 64)")
      ->check(CLI::PositiveNumber);
  sy->add_option("--size", synthArgs.size,
                 "the message size the schedule is chosen for and simulated at (default 1G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  sy->add_option("--method", synthArgs.method,
                 "optimal (exact forest, default) or blink (approximate packing rounded to "
                 "--trees per root)")
      ->check(CLI::IsMember({"optimal", "blink"}));
  auto* treesOpt = sy->add_option("--trees", synthArgs.trees, "blink: trees per root (default 4)")
                       ->check(CLI::PositiveNumber);
  sy->add_option("--headroom", synthArgs.headroom,
                 "percent of the links between boxes the exact forest leaves idle, so what they "
                 "deliver last is forwarded before the end (default: the simulator's pick of 0, "
                 "10, 25)")
      ->check(CLI::Range(0, 90));
  sy->add_option("--time-budget", synthArgs.timeBudget,
                 "seconds the command may take (default 30; 0: no limit): the search stops at 85 % "
                 "of it and the best lowering found by then is kept")
      ->check(CLI::NonNegativeNumber);
  sy->add_option("--target", synthArgs.target,
                 "what runs the schedule: msccl (default: within the MSCCL executor's limits, 64 "
                 "steps per threadblock) or chorus (Chorus's runtimes: any number of steps)")
      ->check(CLI::IsMember({"msccl", "chorus"}));
  sy->add_flag("--candidates", synthArgs.candidates, "list every lowering simulated");
  sy->add_option("--sizes", *sizesRange,
                 "FROM:TO (e.g. 1K:1G): a verified schedule per size range, each with its "
                 "minBytes / maxBytes, into the directory -o names (for CHORUS_ALGO_DIR)");
  sy->add_flag("--json", synthArgs.json, "machine-readable results");

  sy->add_option("--report", synthArgs.report,
                 "write an HTML report: the schedule's flow, its trees and the binding cut on the "
                 "topology, its predicted busbw against the optimum (docs/report.md)");
  return {
      sy, [cl, treesOpt, sizesRange] {
        SynthArgs& args = cl->synth;
        if (treesOpt->count() > 0 && args.method != "blink") {
          std::fprintf(stderr,
                       "chorus synth: --trees needs --method blink (the exact forest has as "
                       "many trees as the optimum needs)\n");
          return 2;
        }
        if (!sizesRange->empty() && !parseSizeRange(*sizesRange, &args.sizesFrom, &args.sizesTo)) {
          std::fprintf(stderr,
                       "chorus synth: --sizes takes FROM:TO, each bytes with K, M or G (e.g. "
                       "1K:1G), FROM <= TO; got '%s'\n",
                       sizesRange->c_str());
          return 2;
        }
        if (!args.report.empty() && (args.boundOnly || args.sizesTo > 0)) {
          std::fprintf(stderr,
                       "chorus synth: --report draws one schedule (not with --bound-only or "
                       "--sizes)\n");
          return 2;
        }
        if (args.headroom > 0 && args.method == "blink") {
          std::fprintf(stderr,
                       "chorus synth: --headroom applies to the exact forest (--method optimal)\n");
          return 2;
        }
        return chosen(cl, Command::kSynth);
      }};
}

Subcommand addReport(CLI::App& app, CommandLine* cl) {
  ReportArgs& reportArgs = cl->report;
  auto* rp = app.add_subcommand(
      "report", "one HTML page: an algorithm's flow, proof, timeline on a topology, curves");
  rp->add_option("files", reportArgs.files, "algorithm files (MSCCL XML or JSON)");
  rp->add_option("--topo,-t", reportArgs.topo,
                 "a preset (chorus topo list) or a .json file: simulate on it");
  rp->add_option(
      "--perf", reportArgs.perf,
      "measured curves: `chorus perf --csv` or bench/peer_compare.sh output (repeatable)");
  rp->add_option("-o,--output", reportArgs.output, "the HTML file (default report.html)");
  rp->add_option("--title", reportArgs.title, "the page's title");
  rp->add_option("--bytes", reportArgs.bytes,
                 "the size the step times, critical path and link loads are simulated at "
                 "(default 1M)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  rp->add_option("--minbytes,-b", reportArgs.minBytes, "the busbw curve's smallest size (1K)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  rp->add_option("--maxbytes,-e", reportArgs.maxBytes, "the busbw curve's largest size (1G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::PositiveNumber);
  rp->add_option("--stepfactor,-f", reportArgs.factor, "size multiplier along the curve (4)")
      ->check(CLI::Range(2, 1024));
  rp->add_option("--detail-steps", reportArgs.detailSteps,
                 "algorithms with more steps are drawn aggregated (default 20000)");
  rp->add_option("--detail-ranks", reportArgs.detailRanks,
                 "aggregated: these ranks' lanes are drawn step by step (default 0-7)")
      ->delimiter(',');
  return {rp, [cl] {
            const ReportArgs& args = cl->report;
            if (args.files.empty() && args.perf.empty()) {
              std::fprintf(stderr, "chorus report: name an algorithm file or a --perf CSV\n");
              return 2;
            }
            if (args.minBytes > args.maxBytes) {
              std::fprintf(stderr, "chorus report: --minbytes exceeds --maxbytes\n");
              return 2;
            }
            return chosen(cl, Command::kReport);
          }};
}

Subcommand addExplain(CLI::App& app, CommandLine* cl) {
  std::string& code = cl->code;
  auto* e = app.add_subcommand("explain", "list diagnostic codes, or explain one");
  e->add_option("code", code, "a code such as E110 or its name (offset-range)");
  return {e, [cl] { return chosen(cl, Command::kExplain); }};
}

}  // namespace

int parseCommandLine(int argc, const char* const* argv, CommandLine* cl) {
  CLI::App app{"Chorus: programmable collective communication"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "chorus 0.1.0");
  const std::vector<Subcommand> subcommands = {
      addVerify(app, cl), addShow(app, cl),   addConvert(app, cl), addPerf(app, cl),
      addSoak(app, cl),   addLaunch(app, cl), addRun(app, cl),     addGen(app, cl),
      addTopo(app, cl),   addSim(app, cl),    addSynth(app, cl),   addReport(app, cl),
      addExplain(app, cl)};
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? 0 : 2;
  }
  for (const Subcommand& sub : subcommands)
    if (sub.app->parsed()) return sub.finish();
  return 2;
}

int runCommandLine(const CommandLine& cl) {
  switch (cl.command) {
    case Command::kVerify:
      return runVerify(cl.verify);
    case Command::kShow:
      return runShow(cl.showFile);
    case Command::kConvert:
      return runConvert(cl.convert);
    case Command::kExplain:
      return runExplain(cl.code);
    case Command::kGen:
      return runGen(cl.gen);
    case Command::kRun:
      return runRun(cl.run);
    case Command::kTopo:
      return runTopo(cl.topo);
    case Command::kSim:
      return runSim(cl.sim);
    case Command::kSynth:
      return runSynth(cl.synth);
    case Command::kPerf:
      return runPerf(cl.perf);
    case Command::kSoak:
      return runSoak(cl.soak);
    case Command::kLaunch:
      return runLaunch(cl.launch);
    case Command::kReport:
      return runReport(cl.report);
    case Command::kNone:
      break;
  }
  return 2;
}

}  // namespace chorus::cli
