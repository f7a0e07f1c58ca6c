// The schedule search behind `chorus synth` (docs/synthesis.md, "The
// search"): forests of several shapes — the exact packed forest and its
// shortened form, the same packed with headroom on the links between
// boxes, the hierarchical forest, the shallow one, or Blink's rounded
// trees; where the exact forest needs too many pieces, the relaxed one —
// each lowered to IR several ways and simulated at the size asked
// for; the fastest is kept.
//
// Every shape's plain lowering is simulated first; only the shapes within
// kVariantShare of the best of those get their other lowerings (pieces per
// connection, chunks per piece, quarter-slice steps, instances), best
// first, and of shapes whose plain lowerings simulate alike only the
// first; they run cheapest first (by the plain lowering's time), so a
// budget leaves out the costly ones. Forests alike are lowered once. Work runs on the usable cores,
// and a time budget stops the search where it is: the best lowering found
// by then is kept, and what was not tried is said.
//
// Nothing here verifies: the caller proves the lowering it keeps
// (chorus::generate) before writing it.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/types.h"
#include "synth/forest.h"
#include "synth/lower.h"
#include "topo/topology.h"

namespace chorus::synth {

// A shape whose plain lowering reaches less than this share of the best
// plain lowering gets no other lowering.
inline constexpr double kVariantShare = 0.95;
// How much slower than the fastest lowering an earlier, simpler one may
// simulate and still be kept; for Chorus's runtimes, also what a chain's
// next slice or chunk count must gain for the chain to go on.
inline constexpr double kSimplerShare = 0.002;

struct SearchOptions {
  CollectiveKind collective = CollectiveKind::kAllGather;
  int root = 0;                    // broadcast / reduce
  std::string method = "optimal";  // or "blink": Blink's rounded trees alone
  int trees = 4;                   // blink: trees per root
  int maxPieces = 64;              // pieces per shard the exact forest may cut
  int headroom = -1;               // percent; -1: 0, 10 and 25 tried
  int instances = 0;               // 0: searched (1, 2, 4, 8)
  size_t bytes = size_t{1} << 30;  // the size simulated and chosen for
  // Name, protocol and form of the lowering; the search sets the rest.
  LowerOptions lower;
  // When the search must stop starting work (packing, lowering); none:
  // it runs to the end. At least one lowering is always simulated.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  int threads = 0;  // 0: the cores this process may use
};

struct Shape {
  std::optional<Forest> gather, scatter;
  // "packed", "shortened", "relaxed", "relaxed shortened", "hierarchical",
  // "rail", "rail shortened", "routed", "routed shortened", "shallow", "blink".
  std::string kind = "packed";
  int headroom = 0;  // percent of the links between boxes left idle
  // The shape this one repeats (the same forests), or -1.
  int sameAs = -1;
};

// One lowering simulated (or passed over).
struct Tried {
  int shape = 0;
  int perConnection = 1, chunksPerPiece = 1, instances = 1;
  uint64_t sliceBytes = 0;        // LowerOptions::sliceBytes (0: the protocol's)
  int laterLocalSums = 0;         // LowerOptions::laterLocalSums
  int fewerLocalConnections = 0;  // LowerOptions::fewerLocalConnections
  bool halvesInTurn = false;      // LowerOptions::halvesInTurn
  double algbw = 0, busbw = 0;    // GB/s at SearchOptions::bytes
  size_t iterations = 0;          // slice iterations per threadblock
  // What was simulated (ir::contentDigest) and its wire bytes per topology
  // link: the schedule proved later is this one where the digests agree,
  // and its simulation need not run again.
  uint64_t digest = 0;
  std::vector<double> linkBytes;
  double seconds = 0;      // lowering and simulating it
  std::string passedOver;  // why it could not serve (then algbw is 0)
  // Passed over for the executor's limits on channels and threadblocks
  // alone, which fewer, busier connections may meet.
  bool crowded = false;
  // Passed over for the MSCCL executor's steps per threadblock among
  // others (Target::kChorus has no such limit).
  bool overSteps = false;
};

// Whether a lowering orders its connections over the whole call by lags
// (LowerOptions::callBytes): pipelined by slices, with the halves in turn
// or the box's own sums later.
inline bool ordersWholeCall(const Tried& t) {
  return t.sliceBytes > 0 && (t.halvesInTurn || t.laterLocalSums > 0);
}

struct Found {
  std::vector<Shape> shapes;
  // In the order of the search's items (shape, then its lowerings), not
  // the order they finished.
  std::vector<Tried> tried;
  int best = -1;     // index into tried: the first within 0.2 % of the fastest
  int maxflows = 0;  // of every forest packed
  size_t bytes = 0;  // the size every lowering was simulated at (SearchOptions::bytes)
  // Shapes out of reach and why (the exact forest needs too many pieces, a
  // switch cannot be split off), and work the budget left undone.
  std::vector<std::string> notes;
  bool budgetSpent = false;

  const Tried& kept() const { return tried[static_cast<size_t>(best)]; }
  const Shape& keptShape() const { return shapes[static_cast<size_t>(kept().shape)]; }
  // The LowerOptions of the lowering kept (base: the search's), its lags
  // for calls of `bytes` (ordersWholeCall).
  LowerOptions keptLowering(const LowerOptions& base) const;
};

// kInvalidArgument where no shape can be built or no lowering serves the
// size (each reason said).
Result<Found> searchSchedule(const topo::Topology& t, const SearchOptions& options);

}  // namespace chorus::synth
