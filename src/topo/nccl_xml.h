// NCCL's topology XML (the files NCCL_TOPO_FILE names, e.g. Azure's
// ndv4/ndv5 ones) as a topology: CPUs and PCI switches become switches,
// GPUs ranks (ordered by their `rank` attribute, else by `dev`, else as
// listed), NICs NICs; PCI links from link_speed x link_width, NVLinks from
// their count (25 GB/s each; an NVSwitch target becomes one NVSwitch
// node), NICs join one network switch at their net speed. `boxes` copies of
// the box share that network. docs/topology.md lists the assumptions.
#pragma once

#include <string>

#include "topo/topology.h"

namespace chorus::topo {

Result<Topology> parseNcclTopology(const std::string& text, const std::string& origin, int boxes);
Result<Topology> readNcclTopologyFile(const std::string& path, int boxes);

}  // namespace chorus::topo
