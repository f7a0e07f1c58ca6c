// The machines of docs/spec/TOPOLOGIES.md, by name (`chorus topo list`):
//   NAME[:ARG[:ARG]][@R,R,...]
// e.g. "ndv4:2" (two boxes), "ring:8", "ring:8:50" (8 ranks, 50 GB/s),
// "dgx1@0,1,4,5" (a job given four GPUs of the box: their links only);
// "dgx-a100x2" is "dgx-a100:2".
#pragma once

#include <string>
#include <vector>

#include "topo/topology.h"

namespace chorus::topo {

struct PresetInfo {
  std::string name;
  std::string arguments;  // e.g. "[BOXES]"
  std::string description;
};
const std::vector<PresetInfo>& presets();

// Builds a preset; kInvalidArgument naming what is wrong for an unknown
// name or unusable arguments.
Result<Topology> makePreset(const std::string& spec);

// A preset name, a JSON topology file (a path ending in .json), or NCCL's
// topology XML (FILE.xml, or FILE.xml:BOXES for that many such boxes).
Result<Topology> loadTopology(const std::string& nameOrFile);

}  // namespace chorus::topo
