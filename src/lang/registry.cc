#include "lang/registry.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>

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

std::string optionList(const ProgramEntry& e) {
  std::string s;
  for (const std::string& o : e.options) s += (s.empty() ? "--" : " --") + o;
  return s;
}

bool programOptions(const ProgramEntry& e, const ProgramOptions& given, ProgramOptions* out,
                    std::string* problem) {
  if (!e.ranksOk(given.ranks)) {
    *problem =
        "--ranks " + std::to_string(given.ranks) + " does not suit it (ranks: " + e.ranks + ")";
    return false;
  }
  // An option the program does not read would be silently ignored: refuse it.
  const std::pair<const char*, bool> set[] = {{"gpus-per-node", given.gpusPerNode != 0},
                                              {"channels", given.channels != 1},
                                              {"chunk-factor", given.chunkFactor != 1},
                                              {"root", given.root != 0}};
  for (auto [name, on] : set)
    if (on && std::find(e.options.begin(), e.options.end(), name) == e.options.end()) {
      *problem = std::string("it does not read --") + name + " (" +
                 (e.options.empty() ? "it reads none beyond the common options"
                                    : "it reads " + optionList(e)) +
                 ")";
      return false;
    }
  if (given.root < 0 || given.root >= given.ranks) {
    *problem =
        "--root " + std::to_string(given.root) + " is not a rank of " + std::to_string(given.ranks);
    return false;
  }
  if (given.focus < -1 || given.focus >= given.ranks) {
    *problem =
        "rank " + std::to_string(given.focus) + " is not a rank of " + std::to_string(given.ranks);
    return false;
  }
  *out = given;
  out->name = e.name;
  out->collective = e.collective;
  const int64_t factor = int64_t{e.chunkFactor(*out)} * given.chunkFactor;
  if (given.chunkFactor < 1 || factor > kMostChunkFactor) {
    *problem = "--chunk-factor " + std::to_string(given.chunkFactor) + " times the program's " +
               std::to_string(e.chunkFactor(*out)) + " is not in 1.." +
               std::to_string(kMostChunkFactor);
    return false;
  }
  out->chunkFactor = static_cast<int>(factor);
  return true;
}

const ProgramEntry* findProgram(const std::string& name) {
  for (const ProgramEntry& e : programs())
    if (e.name == name) return &e;
  return nullptr;
}

std::unique_ptr<Program> recordProgram(const std::string& name, const ProgramOptions& given,
                                       std::string* problem) {
  const ProgramEntry* e = findProgram(name);
  if (e == nullptr) {
    *problem = "no program named '" + name + "' (chorus gen --list)";
    return nullptr;
  }
  ProgramOptions o;
  if (!programOptions(*e, given, &o, problem)) return nullptr;
  auto program = std::make_unique<Program>(o);
  e->build(*program);
  return program;
}

}  // namespace chorus::lang
