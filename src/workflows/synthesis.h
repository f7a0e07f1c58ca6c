// Synthesis as one step, for every front end (`chorus synth`, the Python
// package's synthesize()): the bandwidth-optimal time of a collective on a
// topology and the cut that binds it, and the schedule that attains it,
// lowered to verified IR and chosen by simulation (docs/synthesis.md).
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace chorus::workflows {

struct SynthArgs {
  std::string collective;
  std::string topo;
  std::string ranks;  // a subset, "0,1,4,5"
  int root = 0;
  bool boundOnly = false, json = false;
  std::string output;  // -o FILE.xml
  std::string name;    // the algorithm's name (default synth_COLL)
  std::string protocol = "Simple";
  bool inplace = false;
  int maxPieces = 64;
  int instances = 0;               // 0: chosen by simulating 1, 2, 4, 8
  size_t size = size_t{1} << 30;   // the message size to simulate and choose for
  std::string method = "optimal";  // optimal (exact forest) or blink (blink.h)
  int trees = 4;                   // blink: trees per root
  int headroom = -1;        // percent of the links between boxes left idle; -1: 0, 10, 25 simulated
  double timeBudget = 30;   // seconds the command may take; 0: no limit
  bool candidates = false;  // print every lowering tried
  // msccl: the schedule fits the MSCCL executor's limits; chorus: Chorus's
  // runtimes' (synth::Target).
  std::string target = "msccl";
  // --sizes FROM:TO: a schedule per size range into the directory -o names
  // (sizesTo 0: one schedule, for `size`).
  size_t sizesFrom = 0, sizesTo = 0;
  std::string report;  // --report FILE.html: the schedule, its trees and cut on the topology
};

// The search for `args`: with `json` its result goes there (the schedule's
// MSCCL XML to `xml`), with `print` it is printed to stdout as `chorus
// synth` prints it; -o and --sizes files are written either way. 0, or 2
// with `error` saying why.
int synth(const SynthArgs& args, nlohmann::ordered_json* json, std::string* xml, std::string* error,
          bool print);
// The same for other front ends: `chorus synth --json`'s object into
// `json`, the schedule's XML (when one was built) into `xml`.
int synthesize(const SynthArgs& args, std::string* json, std::string* xml, std::string* error);

// The parts a slice moves in when the schedule of `args` is simulated, as
// its target's runtime moves them (synth::simulatedParts; sim::Options).
size_t simulatedParts(const SynthArgs& args);

// A byte count for people: "64 MiB", "1.5 GiB".
std::string sizeText(double bytes);

}  // namespace chorus::workflows
