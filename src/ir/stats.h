// Counting what an algorithm contains, for summaries (`chorus verify`,
// `chorus show`): threadblocks and steps per rank, steps by type, channels,
// peers, and chunks moved per link.
#pragma once

#include <array>
#include <map>
#include <set>
#include <vector>

#include "ir/ir.h"

namespace chorus::ir {

struct RankStats {
  int threadblocks = 0;
  int steps = 0;
  std::array<int, 9> stepsByType{};  // indexed by StepType
  std::set<int> channels;
  std::set<int> sendPeers, recvPeers;
};

struct AlgorithmStats {
  std::vector<RankStats> ranks;
  int maxTbsPerRank = 0;
  int maxStepsPerTb = 0;
  // (sender, receiver) -> chunks sent (sum of cnt over sending steps).
  std::map<std::pair<int, int>, long long> chunksPerLink;
};

AlgorithmStats computeStats(const Algorithm& algo);

}  // namespace chorus::ir
