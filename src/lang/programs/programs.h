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

}  // namespace chorus::lang
