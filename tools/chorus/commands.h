// The `chorus` subcommands. Each returns the process exit code.
#pragma once

#include <chorus/lang.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "workflows/report_page.h"
#include "workflows/synthesis.h"

namespace chorus::cli {

// What the front ends share (src/workflows): the requests of `chorus
// synth` and `chorus report`, and how a byte count reads.
using workflows::ReportArgs;
using workflows::sizeText;
using workflows::SynthArgs;

struct VerifyArgs {
  std::vector<std::string> files;
  bool json = false;
  bool targetMsccl = false;
  std::string spec;         // post-condition file for custom collectives
  int maxDiagnostics = 20;  // per file, in text mode
};
// Exit: 0 all correct, 1 any algorithm wrong, 2 any input unreadable.
int runVerify(const VerifyArgs& args);

int runShow(const std::string& file);

struct ConvertArgs {
  std::string input;
  std::string output;  // "-" = stdout
  std::string to;      // "xml" | "json" | "" (from the output's extension)
};
int runConvert(const ConvertArgs& args);

// Where `run` and `perf` run calls: CPU ranks, the step engine on host
// threads, or a GPU (tools/chorus/device.h).
struct DeviceArgs {
  std::string device = "cpu";  // cpu, engine (the CUDA executor's code on host threads), cuda
  int gpu = 0;                 // cuda: the GPU every rank runs on
  int hostThreads = 1;         // engine: its threads
  int threadsPerBlock = 0;     // cuda: CUDA threads per block; engine: team threads (0: default)
  int instances = 0;           // engine, cuda: blocks per IR threadblock (0: the backend's choice)
  std::string protocol;        // engine, cuda: the slots' layout ("": the algorithm's)
};

struct RunArgs {
  std::string file;
  size_t bytes = 1 << 20;  // nccl-tests "size"; count = bytes / (type size x m)
  size_t count = 0;        // overrides bytes when set
  std::string dtype = "fp32";
  std::string op = "sum";
  bool inplace = false, outofplace = false;
  bool check = false;
  std::string driver = "threads";  // or "deterministic"
  std::string order = "random";    // deterministic driver: rr, reverse, random
  uint64_t seed = 1;
  size_t sliceBytes = 0;
  int slots = 8;
  int iters = 20, warmup = 5;
  int ranks = 0;     // > 0: must be the file's rank count (a check that says so)
  int procs = 0;     // > 0: as that many processes (must be the file's rank count), via chorus perf
  std::string spec;  // a custom collective's postcondition JSON, for --check
  DeviceArgs dev;
};
// Runs one algorithm file on CPU ranks (threads of this process), or with
// `procs` as processes through `chorus perf --algo FILE --procs N`.
// Exit: 0 ok, 1 wrong results (--check), 2 bad input or a failed run.
int runRun(const RunArgs& args);

struct PerfArgs {
  std::string collective;  // allreduce allgather reducescatter alltoall broadcast reduce
  size_t minBytes = 4 << 10, maxBytes = 64 << 20;
  int factor = 2;
  int iters = 20, warmup = 5;
  int ranks = 4;
  std::string dtype = "fp32";
  std::string op = "sum";
  int root = 0;
  std::string algo;  // a file, or a built-in name; empty = automatic selection
  bool check = false;
  bool csv = false;
  int procs = 0;  // > 0: run as that many processes (relaunches itself via `chorus launch`)
  // Processes: buffers from the heap instead of chorusMemAlloc (which peers
  // read in place): what a program that does not use chorusMemAlloc gets.
  bool heapBuffers = false;
  // Also each form's median and 99th percentile time per call, as the
  // timing rank saw each call (not on --device, whose calls are queued).
  bool percentiles = false;
  DeviceArgs dev;
};
// nccl-tests-style sweep through the C API. Exit: 0 ok, 1 wrong results
// (--check), 2 bad arguments or a failed call.
int runPerf(const PerfArgs& args);

struct SoakArgs {
  long calls = 1000;
  uint64_t seed = 1;
  int ranks = 4;                   // thread ranks (unless launched: one process's rank)
  int procs = 0;                   // > 0: as this many processes (via chorus launch)
  size_t maxBytes = 1 << 20;       // most bytes a call moves per rank
  std::vector<std::string> algos;  // algorithm files or directories in the mix
  bool builtins = true;            // the built-ins by name in the mix
};
// A seeded mix of collectives, sizes, types, ops, forms and algorithms, each
// call checked; resident memory and descriptors compared after the first
// tenth and at the end. Exit: 0 all right, 1 wrong data or growth, 2 bad
// arguments, 3 a call failed.
int runSoak(const SoakArgs& args);

struct LaunchArgs {
  int nprocs = 1;
  bool keepGoing = false;          // do not stop the others when a rank fails
  std::vector<std::string> hosts;  // empty: all local; else ranks in blocks per host
  std::string agent = "ssh -o BatchMode=yes {host}";  // how to run a command on a host
  std::string root;  // HOST[:PORT] rank 0 listens at (default: first host)
  // Local ranks' CPU binding: "core" (rank i on the i-th CPU this launcher
  // may use, wrapping around), "none", or "auto" (core where the ranks are
  // no more than those CPUs, as mpirun binds 2 ranks; else none). Empty:
  // CHORUS_BIND's, else auto.
  std::string bind;
  std::vector<std::string> command;  // PROGRAM ARGS
};
// Starts N processes as ranks (environment: CHORUS_RANK, CHORUS_WORLD_SIZE,
// CHORUS_LOCAL_RANK, CHORUS_ROOT, CHORUS_SECRET), locally or on `hosts`
// through `agent` (its words, {host} replaced, then one shell command line
// that also carries the launcher's CHORUS_* and MSCCL_* variables).
// Exit: 0 when all succeed, else the first failing rank's code (128 + signal
// for a signal), 2 for bad arguments.
int runLaunch(const LaunchArgs& args);

struct GenArgs {
  std::string name;
  bool list = false;
  int ranks = 4;
  int instances = 1;
  bool blockedInstances = false;
  std::string protocol = "Simple";
  bool inplace = false;
  int gpusPerNode = 0;     // hierarchical programs
  int channels = 1;        // channels per ring (ring programs), parts (threestep_alltoall)
  int chunkFactor = 1;     // pieces per block (pipelined programs)
  int root = 0;            // rooted programs
  std::string output;      // "-" = stdout
  std::string specOutput;  // custom collectives: the postcondition JSON
  bool noVerify = false;   // for debugging the compiler only
  std::string printAfter;  // a pass name
  bool timePasses = false;
  int rank = -1;         // only this rank's part (per-rank lowering, docs/scale.md)
  bool compact = false;  // write the compact program file (<program .../>, docs/scale.md)
};
// Runs a registered program, compiles and verifies it, writes MSCCL XML.
// Exit: 0 written, 1 the program or its result is wrong, 2 bad arguments.
int runGen(const GenArgs& args);

struct TopoArgs {
  bool list = false;
  std::string name;  // a preset (NAME[:ARGS][@RANKS]) or a .json file
  bool dot = false, json = false;
};
// Lists the presets, or shows one topology as text, Graphviz or JSON.
int runTopo(const TopoArgs& args);

struct SimArgs {
  std::vector<std::string> files;  // several: compared side by side
  std::string topo;
  size_t bytes = 0;  // one size; else -b .. -e by -f
  size_t minBytes = 1 << 10, maxBytes = size_t{1} << 30;
  int factor = 4;
  bool inplace = false;
  size_t sliceBytes = 0;
  size_t parts = 0;  // per slice; 0: the protocol's
  int slots = 8;
  int instances = 1;
  std::string protocol;  // the slots' layout ("": the algorithm's)
  double stepLatencyUs = -1;
  std::string trace;  // Chrome trace of the largest size (first file)
  int timeline = 0;   // intervals of the busiest links' utilization (0: none)
  std::string links;  // the timeline's links: those whose name has this in it (empty: busiest)
  bool json = false;
};
// Predicts each algorithm's time on the topology. Exit 0, or 2 for bad input.
int runSim(const SimArgs& args);

// One self-contained HTML page (docs/report.md). Exit 0 when written (the
// algorithms' verdicts are in it), 2 for bad input.
int runReport(const ReportArgs& args);

// The bandwidth-optimal algbw of a collective on a topology and its binding
// cut. Exit 0, or 2 for bad input.
int runSynth(const SynthArgs& args);

// Lists diagnostic codes, or explains one.
int runExplain(const std::string& code);

}  // namespace chorus::cli
