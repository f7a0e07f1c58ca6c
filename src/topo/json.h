// The JSON topology format (docs/topology.md): read and written.
//   {"name": "...", "memory_bandwidth": 1500,
//    "nodes": [{"name": "gpu0", "kind": "rank", "box": 0}, {"name": "sw", "kind": "switch"}],
//    "links": [{"from": "gpu0", "to": "sw", "bandwidth": 300, "latency_us": 0.35,
//               "kind": "nvswitch", "both_ways": true}]}
// Ranks are the "rank" nodes, numbered in the order listed.
#pragma once

#include <string>

#include "topo/topology.h"

namespace chorus::topo {

// Errors (kParseError / kInvalidArgument) name the file and the JSON path.
Result<Topology> readTopologyFile(const std::string& path);
Result<Topology> parseTopology(const std::string& text, const std::string& origin);
// One link per direction ("both_ways" is for people writing files).
std::string writeTopology(const Topology& t);

}  // namespace chorus::topo
