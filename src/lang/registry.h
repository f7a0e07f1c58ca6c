// Programs that `chorus gen NAME` can run: each has a name, a one-line
// description, the collective it implements, the options it reads and a
// function that records it into a Program made from those options.
#pragma once

#include <chorus/lang.hpp>
#include <functional>
#include <string>
#include <vector>

namespace chorus::lang {

struct ProgramEntry {
  std::string name;
  std::string description;
  std::string collective;
  // Which rank counts it serves, in words ("any", "powers of two").
  std::string ranks;
  // Whether a rank count suits it (checked before building).
  std::function<bool(int ranks)> ranksOk;
  // The chunk factor the program needs (chunks per rank's share; `chorus
  // gen --chunk-factor K` multiplies it for programs that read it).
  std::function<int(const ProgramOptions&)> chunkFactor;
  std::function<void(Program&)> build;
  // The options beyond --ranks, --instances, --protocol and --inplace it
  // reads: "gpus-per-node", "channels", "chunk-factor", "root".
  std::vector<std::string> options = {};
};

// Every registered program, in name order.
const std::vector<ProgramEntry>& programs();
const ProgramEntry* findProgram(const std::string& name);

}  // namespace chorus::lang
