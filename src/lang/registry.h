// Programs that `chorus gen NAME` can run: each has a name, a one-line
// description, the collective it implements, the options it reads and a
// function that records it into a Program made from those options.
#pragma once

#include <chorus/lang.hpp>
#include <functional>
#include <memory>
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
  // Its per-rank form, if it has one: records what rank
  // Program::focus() does, in time and memory proportional to that, with
  // the depth of each operation and the extent of each scratch buffer
  // (docs/scale.md). Its compile equals that rank's part of the whole
  // program's compile, instruction for instruction (tests/lang).
  std::function<void(Program&)> buildRank = {};
};

// The most chunks a program's share may be cut into (chunk factor, the
// program's own times the user's).
inline constexpr int kMostChunkFactor = 1 << 20;

// "--gpus-per-node --channels": the options beyond the common ones it reads.
std::string optionList(const ProgramEntry& e);

// The options to run `e` with, from what a user gave (`given`: name, ranks,
// inplace, protocol, instances, blockedInstances, gpusPerNode, channels,
// root, focus, and chunkFactor as a multiple of the program's own): false,
// with the problem in words, for an option it does not read, a rank count
// it does not serve, or a root outside the ranks.
bool programOptions(const ProgramEntry& e, const ProgramOptions& given, ProgramOptions* out,
                    std::string* problem);

// The registered program `name` recorded with the options a user gave
// (programOptions), as `chorus gen` and the Python package's gen() run it;
// nullptr with `problem` saying why (an unknown name, a rank count or
// option it does not take).
std::unique_ptr<Program> recordProgram(const std::string& name, const ProgramOptions& given,
                                       std::string* problem);

// Every registered program, in name order.
const std::vector<ProgramEntry>& programs();
const ProgramEntry* findProgram(const std::string& name);

}  // namespace chorus::lang
