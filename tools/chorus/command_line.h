// The `chorus` command line: parsing (CLI11) apart from running, so that
// tests and the fuzzer (tests/fuzz/fuzz_cli.cc) can parse without running.
#pragma once

#include <string>

#include "tools/chorus/commands.h"

namespace chorus::cli {

// The subcommand a command line names and its arguments (only that
// subcommand's member is meaningful).
struct CommandLine {
  enum class Command {
    kNone,
    kVerify,
    kShow,
    kConvert,
    kExplain,
    kGen,
    kRun,
    kTopo,
    kSim,
    kSynth,
    kPerf,
    kSoak,
    kLaunch,
    kReport
  };
  Command command = Command::kNone;
  VerifyArgs verify;
  std::string showFile;
  ConvertArgs convert;
  std::string code;  // explain
  GenArgs gen;
  RunArgs run;
  TopoArgs topo;
  SimArgs sim;
  SynthArgs synth;
  ReportArgs report;
  PerfArgs perf;
  SoakArgs soak;
  LaunchArgs launch;
};

// Parses argv into *cl. Returns -1 when cl names a subcommand to run;
// otherwise the exit code, after printing help, the version or the usage
// error (0 for --help and --version, 2 for a bad command line).
int parseCommandLine(int argc, const char* const* argv, CommandLine* cl);

// Runs the parsed subcommand; returns the process exit code.
int runCommandLine(const CommandLine& cl);

}  // namespace chorus::cli
