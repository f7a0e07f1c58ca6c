#include "lang/collectives.h"

namespace chorus::lang {

Shape shapeOf(const std::string& collective, int ranks, int chunkFactor) {
  int one = chunkFactor, all = ranks * chunkFactor;
  const std::string& c = collective;
  if (c == "allreduce" || c == "broadcast" || c == "reduce") return {true, one, one};
  if (c == "allgather" || c == "gather") return {true, one, all};
  if (c == "reducescatter" || c == "scatter") return {true, all, one};
  if (c == "alltoall") return {true, all, all};
  return {};
}

InPlace inPlaceOf(const std::string& collective) {
  if (collective == "allgather" || collective == "gather") return InPlace::kInputInOutput;
  if (collective == "reducescatter" || collective == "scatter") return InPlace::kOutputInInput;
  return InPlace::kOutputIsInput;
}

}  // namespace chorus::lang
