// What each collective is, in one table: its name, whether it has a root and
// reduces, how large a rank's buffers are for a call's `count`, where input
// and output overlap in place (NCCL's rule), whose buffers it reads and
// writes, and where every output element comes from. The verifier proves
// algorithms against `source`, the runtime sizes, lays out and checks calls
// with the rest (docs/architecture.md, "Adding a collective").
//
// Counts follow NCCL: `count` is per rank (allgather's sendcount,
// reducescatter's recvcount), except for gather and scatter, whose `count`
// is the root's whole vector (docs/spec/IR.md section 3: m = 1), so a
// rank's share is count / n. `block` below is that per-rank unit: count, or
// count / n for those two.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string_view>

#include "core/types.h"

namespace chorus {

// A buffer's length as a multiple of the call's count.
enum class Extent { kCount, kCountTimesN, kCountOverN };

// In place (sendbuff and recvbuff overlap as NCCL allows): the input is the
// output (kSame), the rank's block of it (kInputInOutput: allgather,
// gather), or the output is the rank's block of the input (kOutputInInput:
// reducescatter, scatter).
enum class InPlace { kSame, kInputInOutput, kOutputInInput };

// Which ranks' buffers a collective uses.
enum class Ranks { kAll, kRoot };

// Where output element (or chunk) `k` of a rank comes from: element `index`
// of the inputs of ranks [first, last), reduced when there are several.
struct Source {
  int first = 0, last = 0;
  size_t index = 0;
  bool operator==(const Source&) const = default;
};

struct CollectiveTraits {
  CollectiveKind kind;
  std::string_view name;  // canonical MSCCL spelling
  bool rooted;            // one root rank (broadcast, reduce, gather, scatter)
  bool reduces;           // the output is a reduction (what avg divides)
  bool ncclSignature;     // one of NCCL's six fixed signatures
  Extent input, output;
  InPlace inPlace;
  Ranks reads, writes;  // whose input is read, whose output written
  // Output element `k` of rank `r` on `n` ranks, with `block` the per-rank
  // unit: where it comes from; nullopt where nothing is asked of it (a
  // non-root rank's output of reduce or gather). Null: no closed form (the
  // call's peers or counts are not in the algorithm: send, recv, alltoallv).
  std::optional<Source> (*source)(int n, int root, int r, size_t block, size_t k);
  // nccl-tests' bus bandwidth factor on `n` ranks (busbw = algbw x it).
  double (*busFactor)(int n);
};

// Every collective but kCustom, in enum order.
std::span<const CollectiveTraits> collectiveTable();
// kCustom's row has no source and extents kCount.
const CollectiveTraits& traits(CollectiveKind k);

// A buffer of `extent` for `count` on `n` ranks, in elements.
size_t extentElems(Extent extent, size_t count, int n);
// The per-rank unit of a call's count (count, or count / n for gather and
// scatter).
size_t blockElems(CollectiveKind k, size_t count, int n);
// IR terms: how many per-rank counts the larger buffer holds (n for
// allgather, reducescatter and alltoall, else 1).
size_t countMultiplier(CollectiveKind k, int n);

}  // namespace chorus
