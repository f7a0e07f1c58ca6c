// Forests (forest.h) as programs of the Chorus language, compiled to IR:
// each tree's pieces are copied down it (allgather, broadcast), reduced up
// it toward its root (reduce-scatter, reduce: on the reversed forest), or
// both (allreduce: the reduce-scatter forest's sums, then the allgather
// forest from them).
// The compiler schedules, fuses and assigns threadblocks and channels.
#pragma once

#include <string>
#include <vector>

#include "compiler/compiler.h"
#include "core/types.h"
#include "ir/validate.h"
#include "synth/forest.h"

namespace chorus::synth {

// What a schedule is lowered for:
// - kMsccl: MSCCL's executor inside NCCL, within its limits
//   (docs/spec/IR.md section 6; ir::checkExecutorLimits): 64 steps per
//   threadblock, cnt <= 71, offsets below 32768, ...;
// - kChorus: Chorus's runtimes (threads, processes, hosts, the CUDA
//   executor), which take any number of steps, any count and offset. The
//   limits on channels and threadblocks stay: a GPU runs all of a rank's
//   threadblocks at once.
enum class Target { kMsccl, kChorus };
// The executor limits a target does not have (ir::checkExecutorLimits'
// codes): MSCCL's on a step's encoding, for kChorus.
bool targetAllows(Target target, DiagCode limit);
// Steps a threadblock may take on the target; 0: no limit.
inline int maxSteps(Target target) { return target == Target::kMsccl ? ir::kMscclMaxSteps : 0; }
// The parts a step's slice moves in on the target, as the simulator takes
// them (sim::Options::partsPerSlice): MSCCL's executor moves a Simple slice
// in two, each forwarded as it arrives (0: the protocol's); Chorus's step
// engine moves it whole, one message a slot, and starts a step once its
// message is all there and a slot is free (runtime/exec/engine.h), as the
// verifier's slot rule has it.
inline size_t simulatedParts(Target target) { return target == Target::kChorus ? 1 : 0; }

struct LowerOptions {
  std::string name = "chorus_synth";
  std::string protocol = "Simple";
  bool inplace = false;
  // Copies of the schedule on channels of their own, each moving 1/instances
  // of every piece: while one waits (for data, a slot, a step's latency)
  // another moves bytes.
  int instances = 1;
  // Pieces per connection on an arc (lower.cc, assignChannels): 1 gives
  // every piece crossing an arc a connection of its own where 32 channels
  // allow; more means fewer, busier connections, which forward a slice
  // sooner but couple more pieces in one threadblock. The CLI simulates
  // 1 and 2 and keeps the faster.
  int piecesPerConnection = 1;
  // Chunks each piece is cut into, sent down its tree one after another by
  // the same threadblocks: a rank forwards a chunk while the next arrives.
  // A connection whose pieces would then take more than the target's
  // steps per threadblock moves several consecutive chunks per step (lower.cc, chunksPerStep);
  // the others keep one.
  int chunksPerPiece = 1;
  // The slice the runtimes cut each chunk into (ir::Algorithm::sliceBytes;
  // 0: the protocol's). A chunk moves hop by hop a slice at a time, so small
  // slices pipeline a piece down its tree as many chunks do, in a schedule
  // of few steps (Target::kChorus alone: MSCCL's executor ignores it).
  uint64_t sliceBytes = 0;
  // What runs the schedule, and so the steps a threadblock may take.
  Target target = Target::kMsccl;
  // Rounds by which a reduce forest's sums for a root in the sender's own
  // box follow those bound for other boxes (0: none; needs `boxes`). Each
  // connection inside a box then carries both kinds, the other boxes'
  // first, so a box's links carry the sums its NICs wait for before its
  // own: as an allgather's remote pieces reach a box one hop after its
  // own, reversed (docs/synthesis.md, "Later local sums").
  // Pipelined by slices (sliceBytes, callBytes), the own sums follow over
  // the whole call instead: see callBytes.
  int laterLocalSums = 0;
  // In a broadcast forest (allgather), the pieces of a box's own roots take
  // 1/N of the connections of each arc inside the box, those from other
  // boxes the rest (0: all spread alike; needs `boxes`). Links are shared
  // by connection, so the pieces the NICs bring in keep up with them and
  // the box's own, there from the start, fill what is left
  // (docs/synthesis.md, "Fewer connections for a box's own pieces").
  int fewerLocalConnections = 0;
  // An allreduce's halves one after the other on each connection: each
  // forest's pieces spread over the channels as if it were alone (with its
  // own box-own option above), and on a connection carrying both, every
  // reduce-scatter step before any allgather step (but where the compiler
  // fuses a root's last receive of a sum with its first send down the
  // allgather tree: that step forwards the sum as it is made). Otherwise
  // the two forests share each arc's channels, pipelined chunk by chunk.
  // Pipelined by slices (sliceBytes), halves in turn over the whole call
  // instead: see callBytes.
  bool halvesInTurn = false;
  // The call (bytes, as nccl-tests count them) a schedule pipelined by
  // slices orders over: with laterLocalSums or halvesInTurn, the later
  // steps lag by the call's slice iterations (ir::Step::lag; wholeCallLag),
  // so each connection moves every slice of the earlier kind before any of
  // the later, as rounds of chunks order them, in few steps. The sums that
  // lag are the box's own ones whose way to their root stays in the box
  // (those that crossed a NIC go on at once, and a rank adds them first),
  // and the allgather. A smaller call runs as well (each later step idles
  // the iterations it has fewer); a larger one overlaps the two kinds and
  // runs far slower, so the schedule serves calls up to this size
  // (workflows: its maxBytes). 0: no lags.
  uint64_t callBytes = 0;
  // Each rank's box (topo::Node::box), or empty: arcs between boxes get a
  // connection per tree depth rather than per piece (assignChannels).
  std::vector<int> boxes;
};

// `gather`: the allgather forest (allgather, allreduce) or the root's
// broadcast forest; `scatter`: the reduce-scatter forest (reducescatter,
// allreduce) or the root's reduce forest; the other may be null.
// The program's options (its chunk factor comes from the forests' pieces):
lang::ProgramOptions forestProgramOptions(CollectiveKind collective, int ranks,
                                          const Forest* gather, const Forest* scatter,
                                          const LowerOptions& options);
// Records the forests' operations into a program made with those options.
void recordForests(lang::Program& p, const Forest* gather, const Forest* scatter,
                   const LowerOptions& options);
// The most pieces any connection carries (lower.cc, assignChannels): a
// chunk count c puts ceil(c / g) steps of g chunks each on its connections,
// so c = 64 g / busiestConnection fills them.
int busiestConnection(CollectiveKind collective, int ranks, const Forest* gather,
                      const Forest* scatter, const LowerOptions& options);
// The slice iterations of a call of `options.callBytes` in a program made
// with `po` (LowerOptions::callBytes), an upper bound for any element size;
// 0 where the lowering has no slices or no call size.
uint64_t wholeCallIterations(const lang::ProgramOptions& po, const LowerOptions& options);
// The most a step can lag (ir::Step::lag): a call of more slice iterations
// cannot be ordered over the whole call (the search passes such a lowering
// over).
inline constexpr uint64_t kMostLag = UINT16_MAX;
// The lag that puts a step after every slice of that call: its iterations,
// at most kMostLag.
int wholeCallLag(const lang::ProgramOptions& po, const LowerOptions& options);
// Both, then compiles.
compiler::Compiled lowerForests(CollectiveKind collective, int ranks, const Forest* gather,
                                const Forest* scatter, const LowerOptions& options);

}  // namespace chorus::synth
