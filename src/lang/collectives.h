// What each collective gives a program to work with: the chunks of the
// input and output buffers per rank, and how the two alias in place.
// (The verifier proves programs against core/collectives.h, a statement of
// each collective's result kept apart from this on purpose: the checker
// must not share the code it checks.)
#pragma once

#include <string>

namespace chorus::lang {

struct Shape {
  bool known = false;
  int input = 0, output = 0;  // chunks per rank, one instance
};

// `ranks` ranks, `chunkFactor` chunks per rank's share.
Shape shapeOf(const std::string& collective, int ranks, int chunkFactor);

enum class InPlace {
  kOutputIsInput,  // one buffer: the input (allreduce, alltoall, broadcast, reduce)
  kInputInOutput,  // rank r's input is output[r*c ...] (allgather, gather)
  kOutputInInput,  // rank r's output is input[r*c ...] (reducescatter, scatter)
};
InPlace inPlaceOf(const std::string& collective);

}  // namespace chorus::lang
