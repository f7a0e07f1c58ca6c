#include "lang/registry.h"

#include <algorithm>

#include "lang/programs/programs.h"

namespace chorus::lang {

const std::vector<ProgramEntry>& programs() {
  static const std::vector<ProgramEntry> all = [] {
    std::vector<ProgramEntry> v;
    addRingPrograms(v);
    addAllToAllPrograms(v);
    addAllPairsPrograms(v);
    addRecursivePrograms(v);
    addTreePrograms(v);
    addHierarchicalPrograms(v);
    addNvidiaPrograms(v);
    addAllToNextPrograms(v);
    std::sort(v.begin(), v.end(),
              [](const ProgramEntry& a, const ProgramEntry& b) { return a.name < b.name; });
    return v;
  }();
  return all;
}

const ProgramEntry* findProgram(const std::string& name) {
  for (const ProgramEntry& e : programs())
    if (e.name == name) return &e;
  return nullptr;
}

}  // namespace chorus::lang
