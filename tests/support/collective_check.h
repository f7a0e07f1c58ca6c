// Runs a collective through the runtime with data distinct per rank and
// chunk and exact in every type, and checks every output element bit for
// bit against the collective's closed form (nccl-tests style).
#pragma once

#include <memory>
#include <string>

#include "runtime/exec/driver.h"
#include "verify/collective.h"

namespace chorus::testing {

struct Case {
  DataType type = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  size_t count = 0;
  bool inplace = false;
  runtime::DeterministicOptions options;
  bool threaded = false;                        // run with runThreaded (same slices and slots)
  const verify::PostCondition* spec = nullptr;  // a custom collective's meaning
  // > 0: run on the step engine (engine_host.h, the CUDA executor's code)
  // with this many host threads, `protocol` choosing the slot layout
  // (-1: the algorithm's); options.sliceBytes and options.slots apply.
  int engineThreads = 0;
  int protocol = -1;
  int instances = 1;  // the step engine's blocks per IR threadblock
  int team = 1;       // host threads per block (engine_host.h's Team)
};

// Loads and verifies an algorithm file (ADD_FAILURE and nullptr if it fails).
std::shared_ptr<const runtime::VerifiedAlgorithm> load(const std::string& path);
// The smallest count whose total splits into the algorithm's chunks.
size_t unitCount(const ir::Algorithm& a);
// Runs `va` for `c` on fresh buffers and checks every output element.
void runAndCheck(const runtime::VerifiedAlgorithm& va, const Case& c);

// The step engine (engine_host.h) on `va` in each call form it serves, with
// each protocol's slot layout, at two slice sizes (4 bytes: many iterations
// and odd LL / LL128 tails; the protocol's default), int32 sums checked;
// each IR threadblock run as `instances` blocks.
void runOnEngineEveryWay(const runtime::VerifiedAlgorithm& va, const verify::PostCondition* spec,
                         int threads, int slots, int instances = 1);

// Lags (ir::Step::lag) for tests: each step of `a` lags the index of the
// first chunk it names, mod `period`, plus `base` slices. Valid where an
// index names the same data on every rank and in every step (the classic
// rings): each chunk's steps then share a lag, and every connection
// interleaves several.
ir::Algorithm lagByChunk(ir::Algorithm a, int period, int base = 0);

}  // namespace chorus::testing
