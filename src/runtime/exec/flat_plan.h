// A verified algorithm lowered to plain arrays: every rank's threadblocks
// ("blocks") in one list, their steps in another, and the (channel, sender,
// receiver) connections between them, all indexed by integers. It holds no
// pointers and no strings, so it copies to a GPU as it is and the step engine
// (engine.h) walks it the same way on a CPU thread and in a CUDA block.
//
// What depends on a call (buffers, data type, op, slice geometry) is not in
// the plan: engine.h's CallView carries it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/types.h"
#include "ir/ir.h"
#include "ir/slicing.h"
#include "runtime/exec/executor.h"

namespace chorus::runtime {

// One step of one block. Offsets are chunk indices (-1: none).
struct PlanStep {
  uint8_t type = 0;    // ir::StepType
  uint8_t srcBuf = 0;  // ir::Buffer
  uint8_t dstBuf = 0;  // ir::Buffer
  uint8_t pad = 0;
  uint16_t lag = 0;  // ir::Step::lag: at its block's round r it moves its instance's slice r - lag
  uint16_t depBack = 0;  // its lag less its dependency's: that block's round for the same slice
  int32_t srcOff = -1;
  int32_t dstOff = -1;
  int32_t count = 0;
  int32_t depBlock = -1;  // the block this step waits for (plan index), -1: none
  int32_t depStep = -1;   // its step
  int32_t depSteps = 0;   // that block's steps per iteration
};

// One IR threadblock of one rank, or one instance of it: a plan lowered
// with K instances runs each threadblock as K blocks, instance i taking
// slice iterations i, i + K, i + 2K, ... (disjoint parts of every chunk)
// over connections of its own.
struct PlanBlock {
  int32_t rank = 0;
  int32_t tb = 0;        // IR threadblock id within its rank
  int32_t instance = 0;  // which of the plan's instances
  int32_t firstStep = 0;
  int32_t nsteps = 0;
  int32_t sendConn = -1;  // the connection it sends on (plan index), -1: none
  int32_t recvConn = -1;  // the connection it receives on
  int32_t maxLag = 0;     // its steps' largest lag: its loop runs that many rounds more
};

// One (instance, channel, sender, receiver) connection.
struct PlanConn {
  int32_t instance = 0;
  int32_t channel = 0;
  int32_t from = 0, to = 0;  // ranks
  int32_t sendBlock = -1;    // plan block indices
  int32_t recvBlock = -1;
  int32_t maxCount = 0;  // chunks of the largest message sent on it
};

// The most instances a plan may be lowered with.
inline constexpr int kMostInstances = ir::kMostInstances;

struct FlatPlan {
  int nranks = 0;
  int instances = 1;  // blocks per IR threadblock
  ir::Protocol protocol = ir::Protocol::kSimple;
  CollectiveKind collective = CollectiveKind::kCustom;
  int root = -1;  // rooted collectives; -1 otherwise
  std::vector<PlanStep> steps;
  std::vector<PlanBlock> blocks;
  std::vector<PlanConn> conns;
  std::vector<int32_t> rankFirstBlock;  // rank r's blocks: [rankFirstBlock[r], [r + 1])
  std::vector<int32_t> scratchChunks;   // per rank

  // Lowers a verified algorithm (every rank), each threadblock as
  // `instances` blocks (1 to kMostInstances). The verifier's structural
  // rules make this total: each connection has one sending and one
  // receiving block, dependencies name existing steps. Rank r's blocks are
  // contiguous: instance i of threadblock t is rankFirstBlock[r] + i x
  // (its threadblocks) + t, and a step waits for the same instance of its
  // dependency. Each instance is the algorithm run on its own iterations,
  // so the verifier's proof covers every instance count.
  static FlatPlan lower(const VerifiedAlgorithm& va, int instances = 1);

  // Cuts `g`'s slices for the plan's instances (ir::Slicing::splitForInstances).
  void splitSlices(ir::Slicing* g) const;

  int blocksOf(int rank) const {
    return rankFirstBlock[static_cast<size_t>(rank) + 1] -
           rankFirstBlock[static_cast<size_t>(rank)];
  }
  // The largest message on any connection, in chunks.
  int maxCount() const;
  // ... and in bytes, for a call sliced as `g`: what a slot must hold.
  size_t largestMessageBytes(const ir::Slicing& g) const {
    return static_cast<size_t>(maxCount()) * g.largestSliceBytes();
  }
  // Bytes one call's steps read and write in memory, every rank together:
  // buffers and scratch as the steps touch them, slots at `protocol`'s line
  // size (LL's 8 bytes per 4, LL128's 128 per 120). What `chorus perf
  // --device` rates against the device's copy bandwidth.
  double bytesMoved(const ir::Slicing& g, ir::Protocol p) const;
  // Bytes of rank r's scratch buffer for a call sliced as `g`.
  size_t scratchBytes(int rank, const ir::Slicing& g) const {
    return static_cast<size_t>(scratchChunks[static_cast<size_t>(rank)]) * g.chunkElems *
           g.elemSize;
  }
  // Whether rank r's output must be divided by the rank count at the end of
  // a call with `op` (avg on a reducing collective; for reduce, the root).
  bool dividesOutput(int rank, ReduceOp op) const;
};

}  // namespace chorus::runtime
