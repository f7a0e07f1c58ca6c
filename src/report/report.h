// `chorus report` (docs/report.md): one self-contained HTML page about
// algorithms — what each does (its chunk flow), whether it is correct (the
// verifier's findings, each linked to its step), where its time goes on a
// topology (the simulator's step times, critical path and link loads over
// time, its busbw over sizes against the optimum), the synthesizer's trees
// and measured curves from `chorus perf --csv` and bench/peer_compare.sh.
//
// The page is data plus a viewer: reportData() computes everything (the
// browser only draws), renderHtml() inlines that JSON with the viewer's
// script and style (src/report/assets, embedded at build time), so the file
// opens offline and fetches nothing.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/diagnostic.h"
#include "core/status.h"
#include "ir/ir.h"
#include "topo/topology.h"

namespace chorus::report {

// One algorithm as its file was read: the reader's findings, and the
// algorithm where it could be read.
struct AlgorithmInput {
  std::string label;  // its path, or the synthesizer's name for it
  std::optional<ir::Algorithm> algorithm;
  DiagnosticList readDiagnostics;
};

// Measured busbw over sizes, one implementation on one collective.
struct PerfSeries {
  std::string implementation;  // "chorus", "chorus in place", "mpi", "gloo"
  std::string collective;
  int ranks = 0;
  std::vector<std::pair<double, double>> points;  // (bytes, busbw GB/s)
};

struct PerfFile {
  std::string path;
  std::vector<PerfSeries> series;
  double memcpyGBs = 0;  // the machine's memcpy bandwidth as measured (0: none)
  double socketGBs = 0;  // peer_compare.sh over TCP: what the sockets carry
};

// Reads `chorus perf --csv` or bench/peer_compare.sh output; columns are
// found by name, so either tool's later columns may be added or missing.
// kInvalidArgument names path:line for a row that does not fit its header
// or a cell that is not a number.
Result<PerfFile> parsePerfCsv(std::string_view text, const std::string& path);

struct Options {
  std::string title;
  const topo::Topology* topology = nullptr;  // none: no simulation
  // The size the flow's times, the critical path and the links' loads
  // are simulated at (nccl-tests' meaning).
  size_t bytes = size_t{1} << 20;
  // The predicted busbw curve: minBytes, x factor, ... maxBytes.
  size_t minBytes = size_t{1} << 10, maxBytes = size_t{1} << 30;
  int factor = 4;
  // The parts a step moves its slice in (sim::Options::partsPerSlice; 0:
  // the protocol's, as MSCCL's executor; 1: whole, as Chorus's runtimes).
  size_t partsPerSlice = 0;
  int timelineBuckets = 60;  // intervals of the links' utilization over time
  // An algorithm with more steps than this is drawn aggregated (a rank by
  // rank traffic matrix) with only `detailRanks`' lanes drawn step by step
  // (default: the first 8 ranks), so a 1024-rank report stays light.
  size_t detailSteps = 20000;
  std::vector<int> detailRanks;
  // `chorus synth --json`'s result for the first algorithm: its trees and
  // binding cut are drawn on the topology.
  const nlohmann::ordered_json* synth = nullptr;
};

// Everything the page draws. Never fails: an algorithm that cannot be
// read, is wrong or cannot be simulated says so in its entry.
nlohmann::json reportData(const std::vector<AlgorithmInput>& algorithms,
                          const std::vector<PerfFile>& perf, const Options& options);

// The page: `data` and the viewer's script and style inlined.
std::string renderHtml(const nlohmann::json& data);

}  // namespace chorus::report
