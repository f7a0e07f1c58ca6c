// Classic collective algorithms as IR generators: the built-ins the runtime
// falls back to when no algorithm file matches a call (docs/spec/IR.md section 7). They
// are ordinary IR and go through the verifier and the executor like any file.
//
// Every generator takes any world size n >= 1 (non-powers of two included)
// and returns an algorithm that serves both in-place and out-of-place calls
// unless its comment says otherwise.
//
// `focus` >= 0 builds one rank's part (docs/scale.md): rank `focus`'s
// threadblocks, exactly as in the whole algorithm, and every other rank with
// its chunk counts but no threadblocks, in time and memory proportional to
// that rank's steps (plus O(n) for the rank headers).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/types.h"
#include "ir/ir.h"

namespace chorus::algorithms {

// Ring allreduce: reduce-scatter then allgather around r -> r+1, n chunks,
// 2(n-1) steps. Bandwidth-optimal; the large-message choice.
ir::Algorithm ringAllReduce(int n, int focus = -1);
// Recursive halving-doubling allreduce (Rabenseifner): reduce-scatter by
// halving, allgather by doubling, 2 log2(p) steps over the largest power of
// two p <= n; the n - p extra ranks fold their data into a partner first and
// get the result back last. p chunks. The small-message choice.
ir::Algorithm halvingDoublingAllReduce(int n, int focus = -1);
// Recursive doubling allreduce: partners at distance 1, 2, 4... swap their
// whole partial sums, log2(p) steps over the largest power of two p <= n
// (extra ranks fold in first and get the result last). Moves log2(p) times
// the data, in the fewest steps: the small-message algorithm.
ir::Algorithm recursiveDoublingAllReduce(int n, int focus = -1);
// Chain allreduce with one chunk: reduce along 0 -> 1 -> ... -> n-1, then
// broadcast back down the chain. Serves any count (used for the remainder of
// a count that the chunked algorithms cannot split).
ir::Algorithm chainAllReduce(int n, int focus = -1);
// Ring allgather and ring reduce-scatter, n chunks, n-1 steps.
ir::Algorithm ringAllGather(int n, int focus = -1);
ir::Algorithm ringReduceScatter(int n, int focus = -1);
// Pairwise alltoall: in round k rank r sends to r+k and receives from r-k.
// In-place calls receive into scratch and copy once the slot's data has left.
ir::Algorithm pairwiseAllToAll(int n, int focus = -1);
// All ranks exchange at once, each block one hop from the sender's input to
// the receiver's output (the shared-memory algorithms: with references, one
// copy per byte). direct_alltoall serves out-of-place calls only.
ir::Algorithm directAllGather(int n, int focus = -1);
ir::Algorithm directAllToAll(int n, int focus = -1);
// Direct reduce-scatter: every block straight to its owner in one round,
// summed there as it arrives (n chunks, n-1 messages per rank).
ir::Algorithm directReduceScatter(int n, int focus = -1);
// Pipelined chain broadcast / reduce rooted at `root` (slices pipeline it).
ir::Algorithm chainBroadcast(int n, int root, int focus = -1);
ir::Algorithm chainReduce(int n, int root, int focus = -1);
// Gather / scatter straight between the root and every other rank.
ir::Algorithm directGather(int n, int root, int focus = -1);
ir::Algorithm directScatter(int n, int root, int focus = -1);

// The ring for a collective (broadcast, reduce: the pipelined chain from
// `root`; alltoall: pairwise): the bandwidth built-in that synthesized
// schedules are compared with.
ir::Algorithm classicRing(CollectiveKind collective, int n, int root = 0);

// The built-ins by name, for `--algo NAME` and `chorus gen`-style listing.
struct ClassicInfo {
  std::string name;  // "ring_allreduce", ...
  CollectiveKind collective;
  std::string summary;
};
const std::vector<ClassicInfo>& classicAlgorithms();
// kNotFound for an unknown name; kInvalidArgument for n < 1, a bad root or
// a bad focus.
Result<ir::Algorithm> makeClassic(std::string_view name, int n, int root = 0, int focus = -1);

}  // namespace chorus::algorithms
