// The registered programs, by family (one file each).
#pragma once

#include <vector>

#include "lang/registry.h"

namespace chorus::lang {

void addRingPrograms(std::vector<ProgramEntry>& out);
void addAllToAllPrograms(std::vector<ProgramEntry>& out);
void addAllPairsPrograms(std::vector<ProgramEntry>& out);
void addRecursivePrograms(std::vector<ProgramEntry>& out);
void addTreePrograms(std::vector<ProgramEntry>& out);
void addHierarchicalPrograms(std::vector<ProgramEntry>& out);
void addNvidiaPrograms(std::vector<ProgramEntry>& out);
void addAllToNextPrograms(std::vector<ProgramEntry>& out);

// GPUs per node from --gpus-per-node (unset: all ranks on one node); 0,
// with a problem recorded at the caller's line, when they do not divide the
// ranks. Rank r is GPU r % G of node r / G.
int gpusPerNode(Program& p, Where where = std::source_location::current());

}  // namespace chorus::lang
