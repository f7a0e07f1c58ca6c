#include "synth/search.h"

#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/parallel.h"
#include "ir/validate.h"
#include "sim/simulator.h"
#include "synth/blink.h"
#include "synth/bound.h"

namespace chorus::synth {

namespace {

using Clock = std::chrono::steady_clock;

// Pieces per shard of the relaxed forest. Fewer pieces lower its bound but
// lower what the simulator finds more slowly: 2 x MI250 allgather at 1 GiB,
// 5 pieces: 90.4 % bound, 75.2 % simulated; 11 pieces (8 to 16 allowed):
// 99.4 %, 64.9 % (docs/synthesis.md).
constexpr int kRelaxedPieces = 8;

// Chunks per piece at most: MSCCL's executor runs 64 steps per
// threadblock; for Chorus's runtimes, up to 256 while faster (4 x MI250
// allreduce, halves in turn: 64 chunks 94.4 %, 128 95.8 %, 256 96.4 %, in
// a 1.5 GB XML file and 48 s a simulation).
constexpr size_t kMostChunks = 64;
constexpr size_t kMostChunksUnlimited = 256;
// Another shape whose fastest lowering simulates within this share of the
// kept one gets the kept one's other forms too (keptOtherForms).
constexpr double kNearShare = 0.99;
// An allreduce for Chorus's runtimes also tries its halves in turn on the
// finest lowering pipelined by chunks of each shape whose fastest simulates
// within this share of the kept one: in turn, a half runs as fast as its
// forest alone, not as the two pipelined together (2 x MI250, each slice
// moved whole: the rail forest's fastest, 256 chunks, 1.5 % below the
// shortened forest's 128, simulates 168.7 GB/s in turn, 95.3 % of the
// optimum, where the shortened one's 128 chunks in turn give 166.2).
constexpr double kNearTurnShare = 0.98;
// A lowering with twice the chunks of one that took s seconds takes about
// 2 s (twice the steps to record, compile and simulate) and a little
// more: 4 x MI250 reduce-scatter for Chorus's runtimes, 128 -> 256 chunks,
// 7.9 -> 17.4 s and 9.1 -> 20.8 s. Under a time budget, one predicted to
// end past the deadline is not started (it would be stopped, its time
// lost, and the proof of the one kept would start late).
constexpr double kDoubledCost = 2.3;
// Half the slice, the same steps: only the simulation's transfers double,
// and it takes twice as long (2 x MI250 allreduce, halves in turn over the
// whole call: 256 -> 128 -> 64 -> 32 KiB, 0.110, 0.221, 0.418, 0.841 s;
// plain slices 512 -> 64 KiB, 1.7-2.0 times each).
constexpr double kHalvedSliceCost = 2.0;
// For Chorus's runtimes, the slice (LowerOptions::sliceBytes) halves from
// the protocol's while faster, down to this. A piece then moves hop by hop
// in slices as it would in chunks, in a schedule of few steps (2 x MI250
// allgather, one chunk per piece: 2 MiB slices 74.0 %, 128 KiB 94.0 %, 32
// KiB 95.5 %; 256 chunks of 2 MiB slices, 95.4 %, took 770 times the steps
// and 172 MiB of XML). Smaller slices can leave a connection's 8 slots too
// few bytes to keep a link busy over a step's latency (2 x MI250's
// allgather, each slice moved whole, simulatedParts: 338.7 GB/s at 16 KiB,
// 261.6 at 8 KiB; its chain stops at 16 KiB, 0.04 % over 32 KiB), but where
// 16 KiB still gains, 8 KiB may too (4 x MI250 reduce-scatter: 32, 16, 8
// KiB 318.1, 322.5, 324.4 GB/s, 95.04 % of the optimum).
constexpr uint64_t kLeastSlice = uint64_t{8} << 10;
// The first slice of the chain of forms that order over the whole call
// (ordersWholeCall; Item::kWhole): larger ones only fill and drain longer
// (2 x MI250 allreduce, halves in turn: 1 MiB 148.0, 512 KiB 153.9, 256
// KiB 160.1 GB/s).
constexpr uint64_t kWholeSlice = uint64_t{256} << 10;
// Lowerings one work item's chain may run, at most: its results' order key
// leaves this many places (far more than the fine chain takes).
constexpr size_t kChainSlots = 1024;
// Pieces per connection at most, where the executor's limits pass over a
// lowering with fewer (the fine lowering, below).
constexpr int kBusiestConnection = 8;

// A shape whose forests bound its rate below this share of the fastest
// bound is lowered after the others, and not at all where it is below this
// share of a schedule simulated already (the bound holds as the simulator
// routes, so the factor is slack for packed forests' arcs, not a guess at
// their speed): 4 x MI250's hierarchical forest, 5.9 % of the optimum,
// took 3.6 of the 18 s allreduce search.
constexpr double kHopelessShare = 0.5;

bool sameForest(const std::optional<Forest>& a, const std::optional<Forest>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->k == b->k && a->trees == b->trees);
}

// `base` with what `tried` chose (pieces per connection, chunks, ...), its
// lags for calls of `bytes` (ordersWholeCall).
LowerOptions loweringOf(const LowerOptions& base, const Tried& tried, size_t bytes) {
  LowerOptions lo = base;
  lo.piecesPerConnection = tried.perConnection;
  lo.chunksPerPiece = tried.chunksPerPiece;
  lo.instances = tried.instances;
  lo.laterLocalSums = tried.laterLocalSums;
  lo.fewerLocalConnections = tried.fewerLocalConnections;
  lo.halvesInTurn = tried.halvesInTurn;
  lo.sliceBytes = tried.sliceBytes;
  lo.callBytes = ordersWholeCall(tried) ? bytes : 0;
  return lo;
}

// Lowers a shape one way and simulates it (no verification: the caller
// proves what it keeps). `bug` is set where the compiler refuses a forest.
// `stoppable`: the simulation may stop at the deadline (not before some
// lowering has served, so there is always an answer), and where `yield`
// reads true (another chain's halvings take both cores).
Tried lowerAndSimulate(const topo::Topology& t, const SearchOptions& o, const Shape& shape,
                       Tried tried, bool stoppable, std::string* bug,
                       const std::atomic<bool>* yield = nullptr) {
  const auto t0 = Clock::now();
  const LowerOptions lo = loweringOf(o.lower, tried, o.bytes);
  const Forest* g = shape.gather ? &*shape.gather : nullptr;
  const Forest* s = shape.scatter ? &*shape.scatter : nullptr;
  auto done = [&] {
    tried.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return tried;
  };
  // Lags of the whole call past the IR's largest would order part of it.
  if (const uint64_t iterations =
          lo.callBytes == 0
              ? 0
              : wholeCallIterations(forestProgramOptions(o.collective, t.ranks(), g, s, lo), lo);
      iterations > kMostLag) {
    tried.passedOver = fmt::format(
        "a call of {} slice iterations: its lags would order only {} of them (the most a step "
        "lags)",
        iterations, kMostLag);
    return done();
  }
  compiler::Compiled c = lowerForests(o.collective, t.ranks(), g, s, lo);
  if (!c.ok()) {
    *bug = "the lowered forest does not compile (a bug):\n" +
           (c.diagnostics.items().empty() ? std::string() : c.diagnostics.items().front().format());
    tried.passedOver = "does not compile";
    return done();
  }
  // Many chunks per piece can exceed what the target runs (MSCCL's
  // executor: steps per threadblock, offsets; any: threadblocks): such a
  // lowering is passed over.
  if (tried.chunksPerPiece > 2) {
    DiagnosticList found;
    ir::checkExecutorLimits(c.algo, found);
    std::vector<Diagnostic> limits;
    for (const Diagnostic& d : found.items())
      if (!targetAllows(lo.target, d.code)) limits.push_back(d);
    if (!limits.empty()) {
      tried.passedOver = limits.front().format();
      tried.crowded = std::all_of(limits.begin(), limits.end(), [](const Diagnostic& d) {
        return d.code == DiagCode::kLimitChannels || d.code == DiagCode::kLimitTbsPerChannel ||
               d.code == DiagCode::kLimitDepTb;
      });
      tried.overSteps = std::any_of(limits.begin(), limits.end(), [](const Diagnostic& d) {
        return d.code == DiagCode::kLimitSteps;
      });
      return done();
    }
  }
  sim::Options so;
  so.bytes = o.bytes;
  so.inplace = o.lower.inplace;
  so.partsPerSlice = simulatedParts(o.lower.target);
  so.criticalPath = false;
  if (stoppable) {
    so.deadline = o.deadline;
    so.abort = yield;
  }
  auto r = sim::simulate(c.algo, t, so);
  if (!r.isOk() && r.status().code() == StatusCode::kAborted) {
    tried.passedOver = "stopped: the time budget went to another chain's last halvings";
    return done();
  }
  if (!r.isOk()) {
    tried.passedOver = "simulating it: " + r.status().message();
    return done();
  }
  tried.algbw = r.value().algbw;
  tried.busbw = r.value().busbw;
  tried.iterations = r.value().iterations;
  tried.digest = ir::contentDigest(c.algo);
  tried.linkBytes = std::move(r.value().linkBytes);
  return done();
}

// searchSchedule's stages, in the order run() takes them: check the options
// and learn the topology's boxes; pack the forests (shapes) in parallel;
// lower and simulate them on a pool, cheapest first, giving the shapes near
// the best their other lowerings; pick the fastest, in an order that does
// not depend on the threads.
class ScheduleSearch {
 public:
  ScheduleSearch(const topo::Topology& t, const SearchOptions& o)
      : t_(t),
        o_(o),
        coll_(o.collective),
        rooted_(coll_ == CollectiveKind::kBroadcast || coll_ == CollectiveKind::kReduce),
        root_(rooted_ ? o.root : -1),
        blink_(o.method == "blink"),
        threads_(o.threads > 0 ? o.threads : usableCores()),
        first_(o.instances > 0 ? o.instances : 1),
        mostChunks_(o.lower.target == Target::kMsccl ? kMostChunks : kMostChunksUnlimited) {}

  Result<Found> run() {
    CHORUS_RETURN_IF_ERROR(prepare());
    CHORUS_RETURN_IF_ERROR(makeShapes());
    markAlikeShapes();
    CHORUS_RETURN_IF_ERROR(lowerShapes());
    CHORUS_RETURN_IF_ERROR(pick());
    CHORUS_RETURN_IF_ERROR(keptOtherForms());
    noteBudget();
    return std::move(out_);
  }

 private:
  // A forest maker: one kind of shape, made for one direction at a time.
  struct Maker {
    std::string kind;
    int headroom = 0;
    std::function<Result<Forest>(bool reversed)> make;
    bool required = false;  // its failure is the command's
    // Its forest of the reverse is its forest (packed on links as fast
    // each way: linksSymmetric), made once where both are needed.
    bool mirrored = false;
  };
  struct Made {
    Shape shape;
    std::string problem;  // empty: made
    bool skipped = false, late = false;
    bool mirrored = false;  // its scatter forest is its gather forest (Maker::mirrored)
  };
  // One work item of the lowering pool: one lowering or a chain run one
  // after another (instances: each needs the last one's iterations).
  struct Item {
    int shape;
    enum Kind { kPlain, kVariant, kFine, kWhole, kInstances } kind;
    int per = 1, chunks = 1;
    int slot = 0;  // its place among its shape's lowerings: the results' order
    // Cheapest first: a plain lowering by its forests' arcs, the others by the
    // seconds their shape's plain lowering took (so before plain ones left).
    // The fine and instance chains, many lowerings each and the finest the
    // costliest, after every plain lowering and variant: a shape deferred
    // for its bound waits for the others' plain results (queueDeferred),
    // and must not wait for their chains too.
    // Of the chains, those that order over the whole call first: where
    // they win (the allreduces across MI250 boxes) they need the time of
    // their finest slices, and where they do not, they stop after a few
    // coarse ones (4 x MI250 allreduce, default budget: the shortened
    // forest's plain lowering had come in a few milliseconds faster, its
    // fine chain then ran first, and the rail forest's halves in turn at 32
    // KiB, 95.4 %, were left out in one run of two: 94.4 %).
    double cost = 0;
    bool chain() const { return kind == kFine || kind == kWhole || kind == kInstances; }
    bool laterChain() const { return chain() && kind != kWhole; }
  };
  static bool later(const Item& a, const Item& b) {
    return std::tuple(a.chain(), a.laterChain(), a.cost, a.shape, a.slot) >
           std::tuple(b.chain(), b.laterChain(), b.cost, b.shape, b.slot);
  }
  // Shapes alike in their plain lowerings' results (4 x DGX A100: the
  // packed forest, shortened and with either headroom) are taken as alike.
  // By how much a chain's slices lead another's for it to take both cores
  // (leadsAt): 4 x MI250's reduce-scatter, the shortened rail forest over
  // the rail forest, 0.5-0.6 % a slice.
  static constexpr double kLeadShare = 0.003;
  static bool alike(double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); }

  bool passed() const { return o_.deadline && Clock::now() > *o_.deadline; }
  // A chain of slices, a shape's (whole: of its whole-call forms), runs or
  // not; what its slices simulated at (sliceRates_).
  using ChainId = std::pair<int, bool>;  // (shape, whole)
  void chainRuns(ChainId chain, bool runs) {
    std::lock_guard guard(sliceMu_);
    if (runs)
      chainsRunning_.insert(chain);
    else
      chainsRunning_.erase(chain);
  }
  void noteSlice(ChainId chain, uint64_t slice, double algbw) {
    std::lock_guard guard(sliceMu_);
    sliceRates_[slice][chain] = algbw;
  }
  // Whether this chain, whose slices from its first down to `slice` are
  // in (`slice` at `algbw`), is ahead of every other chain of its kind
  // running: at the finest slice from `slice` up that the other has
  // simulated, this one has too, faster by kLeadShare. (A chain behind in
  // its steps and slower at the last it took seldom catches up: each
  // halving gains less than the one before. Closer than that they cross:
  // 2 x MI250's allreduce, halves in turn, 128 KiB: the shortened rail
  // forest 165.0, the rail forest 164.7 GB/s; 32 KiB: 166.8 and 168.7.)
  bool leadsAt(ChainId chain, uint64_t slice, double algbw) {
    std::lock_guard guard(sliceMu_);
    for (const ChainId& other : chainsRunning_) {
      if (other == chain || other.second != chain.second) continue;
      bool ahead = false;
      for (auto at = sliceRates_.lower_bound(slice); at != sliceRates_.end(); ++at) {
        const auto theirs = at->second.find(other);
        // Whole-call chains only at the same slice: their rates cross by
        // more (2 x MI250's allreduce, halves in turn: the shortened rail
        // forest 0.9 % ahead at 256 KiB, 1.1 % behind at 32 KiB).
        if (chain.second && at->first != slice) break;
        if (theirs == at->second.end()) continue;
        const auto mine = at->second.find(chain);
        const double rate = at->first == slice         ? algbw
                            : mine != at->second.end() ? mine->second
                                                       : 0;
        ahead = theirs->second * (1 + kLeadShare) <= rate;
        break;
      }
      if (!ahead) return false;
    }
    return true;
  }
  // Whether work of about `seconds` ends by the deadline.
  bool affords(double seconds) const {
    return !o_.deadline || Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(seconds)) <=
                               *o_.deadline;
  }

  // Options that cannot work here; every route asked for once, before any
  // thread runs (the topology caches routes as they are asked for: a
  // write, and the packers and simulations share it); the boxes.
  Status prepare() {
    if (blink_ && rooted_)
      return Status(StatusCode::kInvalidArgument,
                    "--method blink packs allgather-family trees (every rank a root)");
    t_.routeEveryPair();
    out_.bytes = o_.bytes;
    boxes_ = !linksBetweenBoxes(t_).empty();
    // Ranks in more than one box (a box's own routes may still cross the
    // links between boxes, as MI250 GCDs without an xGMI link between them).
    for (int r = 1; r < t_.ranks(); ++r)
      manyBoxes_ = manyBoxes_ || t_.nodes[static_cast<size_t>(t_.nodeOfRank(r))].box !=
                                     t_.nodes[static_cast<size_t>(t_.nodeOfRank(0))].box;
    if (o_.headroom > 0 && !boxes_)
      return Status(StatusCode::kInvalidArgument,
                    "--headroom needs links between boxes (this topology is one box)");
    return Status::ok();
  }

  std::vector<Maker> makers() const {
    const topo::Topology& t = t_;
    const SearchOptions& o = o_;
    const int root = root_;
    std::vector<Maker> makers;
    if (blink_) {
      makers.push_back({"blink", 0,
                        [&t, &o](bool reversed) {
                          return blinkForest(t, reversed, {.treesPerRoot = o.trees}, o.maxPieces);
                        },
                        true});
      return makers;
    }
    // The hierarchical forest (every shard into each box once) where ranks
    // sit in several boxes, unless --headroom asks for the packed ones.
    // First: it is the cheapest to simulate (8 x DGX A100: 0.02 s against
    // 0.5 s for the packed forest), so on a tie with another it goes first
    // and under a budget it is never left out.
    if (manyBoxes_ && !rooted_ && o.headroom <= 0)
      makers.push_back(
          {"hierarchical", 0, [&t](bool reversed) { return hierarchicalForest(t, reversed); }});
    // The box's own forest on every rail, where boxes are alike.
    if (manyBoxes_ && !rooted_ && o.headroom <= 0)
      makers.push_back({"rail", 0, [&t, &o](bool reversed) {
                          return railForest(t, reversed, o.maxPieces, o.deadline);
                        }});
    if (o.headroom <= 0)
      makers.push_back({"packed", 0,
                        [&t, &o, root](bool reversed) {
                          return packForest(t, reversed, o.maxPieces, root, o.deadline);
                        },
                        false, linksSymmetric(t)});
    // Headroom: 10 and 25 % besides none, unless --headroom names one; a
    // forest that needs more than 16 pieces per shard for it is passed over
    // then (its finer rates buy nothing the headroom does not, at many more
    // steps).
    std::vector<int> headrooms{10, 25};
    if (o.headroom >= 0) headrooms = {o.headroom};
    for (int h : headrooms) {
      if (h == 0 || !boxes_) continue;
      const int most = o.headroom > 0 ? o.maxPieces : std::min(o.maxPieces, 16);
      makers.push_back({"packed", h,
                        [&t, &o, h, most, root](bool reversed) {
                          return packForest(withHeadroom(t, 1 - h / 100.0), reversed, most, root,
                                            o.deadline);
                        },
                        false, linksSymmetric(withHeadroom(t, 1 - h / 100.0))});
    }
    makers.push_back({"shallow", 0,
                      [&t, root](bool reversed) { return shallowForest(t, reversed, root); },
                      true});
    return makers;
  }

  // Makes makers[from, to) (in parallel) into made[from, to), but for
  // those `made` already says why not (Made::problem).
  void runMakers(const std::vector<Maker>& makers, std::vector<Made>& made, size_t from,
                 size_t to) {
    // Which directions the collective needs: the gather forest (allgather,
    // allreduce, broadcast) and the scatter one (reduce-scatter, allreduce,
    // reduce).
    const bool needGather =
        coll_ != CollectiveKind::kReduceScatter && coll_ != CollectiveKind::kReduce;
    const bool needScatter =
        coll_ != CollectiveKind::kAllGather && coll_ != CollectiveKind::kBroadcast;
    std::atomic<bool> anyMade{false};
    for (size_t i = 0; i < from; ++i)
      anyMade = anyMade || (made[i].problem.empty() && !made[i].skipped);
    parallelFor(to - from, threads_, [&](size_t j) {
      const size_t i = from + j;
      const Maker& m = makers[i];
      Made& r = made[i];
      r.shape.kind = m.kind;
      r.shape.headroom = m.headroom;
      if (!r.problem.empty()) return;
      if (anyMade && passed()) {
        r.skipped = true;
        return;
      }
      for (bool reversed : {false, true}) {
        if (!(reversed ? needScatter : needGather)) continue;
        if (reversed && needGather && m.mirrored) {
          r.shape.scatter = r.shape.gather;
          r.mirrored = true;
          continue;
        }
        Result<Forest> f = m.make(reversed);
        if (!f.isOk()) {
          r.problem = f.status().message();
          r.late = f.status().code() == StatusCode::kTimeout;
          return;
        }
        (reversed ? r.shape.scatter : r.shape.gather) = std::move(f).value();
      }
      anyMade = true;
    });
  }

  // The shapes: every maker's forests, the relaxed one standing in for an
  // exact forest out of reach, the packed ones also shortened.
  Status makeShapes() {
    std::vector<Maker> makers = this->makers();
    std::vector<Made> made(makers.size());
    // The box-rail forest first, with the hierarchical one before it:
    // where the rail forest reaches the optimum in the bandwidth model, the
    // exact packed forest is not packed (4 x MI250: 4.6 s of packing,
    // whose lowerings simulate at 69-74 GB/s of allreduce where the rail
    // forest's plain one gives 111).
    const auto railAt =
        std::find_if(makers.begin(), makers.end(), [](const Maker& m) { return m.kind == "rail"; });
    size_t first = 0;
    if (railAt != makers.end()) {
      first = static_cast<size_t>(railAt - makers.begin()) + 1;
      runMakers(makers, made, 0, first);
      const Made& rail = made[first - 1];
      if (rail.problem.empty() && !rail.skipped && reachesOptimum(rail.shape))
        for (size_t i = first; i < makers.size(); ++i)
          if (makers[i].kind == "packed" && makers[i].headroom == 0)
            made[i].problem = "not packed: the rail forest reaches the optimum already";
    }
    runMakers(makers, made, first, makers.size());
    // An exact forest that needs too many pieces: the fastest rates below
    // the optimum that need fewer stand in for it (relaxedForest).
    const auto exact = std::find_if(made.begin(), made.end(), [](const Made& m) {
      return m.shape.kind == "packed" && m.shape.headroom == 0;
    });
    if (!blink_ && exact != made.end() &&
        exact->problem.find("pieces per shard") != std::string::npos) {
      const size_t from = makers.size();
      // (One root's relaxed pieces are wider, not slower: up to --max-pieces
      // of them; buildForest in forest.cc.)
      const int most = rooted_ ? o_.maxPieces : std::min(o_.maxPieces, kRelaxedPieces);
      // (Rooted collectives: the root's trees, as the exact forest's.)
      makers.push_back({"relaxed", 0,
                        [this, most](bool reversed) {
                          return relaxedForest(t_, reversed, most, root_, o_.deadline);
                        },
                        false, linksSymmetric(t_)});
      made.resize(makers.size());
      runMakers(makers, made, from, makers.size());
    }
    // Where the exact forest's arcs (or, with --headroom, that forest's;
    // or the relaxed one's, standing in for it), each carried the one way
    // its pair is routed, load a link past what the forest's rate allots
    // it (a rank pair's arc split over both spines of a fat tree), the same
    // forest again with every switch split along the routes (routedForest).
    const size_t before = makers.size();
    for (size_t i = 0; i < before && !blink_; ++i) {
      const int h = made[i].shape.headroom;
      const bool relax = makers[i].kind == "relaxed";
      if ((makers[i].kind != "packed" && !relax) || (h > 0 && o_.headroom <= 0) ||
          !made[i].problem.empty() || made[i].skipped || !routesFallShort(made[i].shape))
        continue;
      const int most = relax && !rooted_ ? std::min(o_.maxPieces, kRelaxedPieces) : o_.maxPieces;
      makers.push_back({"routed", h, [this, h, most, relax](bool reversed) {
                          return routedForest(h > 0 ? withHeadroom(t_, 1 - h / 100.0) : t_,
                                              reversed, most, root_, relax, o_.deadline);
                        }});
    }
    if (makers.size() > before) {
      made.resize(makers.size());
      runMakers(makers, made, before, makers.size());
    }
    for (size_t i = 0; i < makers.size(); ++i) {
      Made& m = made[i];
      if (m.skipped) {
        out_.budgetSpent = true;
        out_.notes.push_back(
            fmt::format("the {} forest{} was not packed: the time budget was spent", m.shape.kind,
                        m.shape.headroom > 0 ? " with headroom" : ""));
        continue;
      }
      if (!m.problem.empty()) {
        if (makers[i].required) return Status(StatusCode::kInvalidArgument, m.problem);
        // The default headrooms are tried quietly; an exact forest out of
        // reach is said, the others stand in for it.
        out_.budgetSpent = out_.budgetSpent || m.late;
        if (m.shape.headroom == 0 || o_.headroom > 0 || m.late)
          out_.notes.push_back(
              m.shape.headroom > 0
                  ? fmt::format("with {} % headroom: {}", m.shape.headroom, m.problem)
                  : fmt::format("the exact {} forest: {}", m.shape.kind, m.problem));
        continue;
      }
      for (const auto* f : {&m.shape.gather, &m.shape.scatter})
        if (f->has_value() && !(m.mirrored && f == &m.shape.scatter))
          out_.maxflows += (*f)->maxflows;
      const bool packed = m.shape.kind == "packed" || m.shape.kind == "relaxed" ||
                          m.shape.kind == "rail" || m.shape.kind == "routed";
      out_.shapes.push_back(m.shape);
      // The packed forests shortened (forest.h): any may schedule best.
      if (packed) {
        Shape shorter = m.shape;
        shorter.kind = m.shape.kind == "packed" ? "shortened" : m.shape.kind + " shortened";
        for (std::optional<Forest>* f : {&shorter.gather, &shorter.scatter})
          if (f->has_value()) *f = shortenForest(**f);
        out_.shapes.push_back(std::move(shorter));
      }
    }
    if (o_.headroom > 0 && std::none_of(out_.shapes.begin(), out_.shapes.end(),
                                        [](const Shape& s) { return s.headroom > 0; }))
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("no forest with {} % headroom needs at most {} pieces per shard",
                                o_.headroom, o_.maxPieces));
    return Status::ok();
  }

  // Whether a forest of `shape`, every edge carried the way the simulator
  // routes its pair, falls below the rate it was packed for.
  bool routesFallShort(const Shape& shape) const {
    for (const auto* f : {&shape.gather, &shape.scatter}) {
      if (!f->has_value()) continue;
      Result<Rational> routed = routedRate(t_, f == &shape.scatter, **f, rooted_ ? 1 : t_.ranks());
      const Rational& packed = (*f)->algbw;
      if (routed.isOk() &&
          i128{routed.value().num} * packed.den < i128{packed.num} * routed.value().den)
        return true;
    }
    return false;
  }

  // Whether each forest of `shape` moves its data at the collective's
  // optimum in the bandwidth model (an allreduce's: the allgather's and
  // the reduce-scatter's, each forest the one it serves).
  bool reachesOptimum(const Shape& shape) const {
    for (auto [f, kind] : {std::pair{&shape.gather, CollectiveKind::kAllGather},
                           std::pair{&shape.scatter, CollectiveKind::kReduceScatter}}) {
      if (!f->has_value()) continue;
      Result<Bound> b = optimalBound(t_, kind);
      if (!b.isOk()) return false;
      const Rational& mine = (*f)->algbw;
      const Rational& best = b.value().algbw;
      if (mine.num * best.den < best.num * mine.den) return false;
    }
    return true;
  }

  // The fastest a lowering of `shape` can simulate at, by its forests'
  // rates in the bandwidth model (0: not known; the shallow forest has
  // none): each forest moves all of the collective's data, so an
  // allreduce, both forests, goes no faster than the slower one.
  double rateBound(const Shape& shape) const {
    double out = 0;
    for (const auto* f : {&shape.gather, &shape.scatter}) {
      if (!f->has_value() || (*f)->algbw.num <= 0) continue;
      const double r = (*f)->algbw.value();
      out = out == 0 ? r : std::min(out, r);
    }
    return out;
  }

  // Forests alike are lowered once.
  void markAlikeShapes() {
    std::vector<Shape>& shapes = out_.shapes;
    for (size_t i = 0; i < shapes.size(); ++i)
      for (size_t j = 0; j < i && shapes[i].sameAs < 0; ++j)
        if (shapes[j].sameAs < 0 && sameForest(shapes[i].gather, shapes[j].gather) &&
            sameForest(shapes[i].scatter, shapes[j].scatter))
          shapes[i].sameAs = static_cast<int>(j);
  }

  // The other lowerings of a shape (under the lock).
  void expand(int shape) {
    expanded_[static_cast<size_t>(shape)] = 1;
    const double c = plainCost_[static_cast<size_t>(shape)];
    int slot = 1;
    for (auto [per, chunks] : {std::pair{2, 1}, {1, 2}, {2, 2}})
      queue_.push_back({shape, Item::kVariant, per, chunks, slot++, c});
    queue_.push_back({shape, Item::kFine, 1, 1, slot++, c});
    if (wholeCallForms()) queue_.push_back({shape, Item::kWhole, 1, 1, slot++, c});
    if (o_.instances == 0) queue_.push_back({shape, Item::kInstances, 1, 1, slot++, c});
    for (size_t i = queue_.size() - static_cast<size_t>(slot - 1); i < queue_.size(); ++i)
      std::push_heap(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(i) + 1, later);
  }

  // Whether the search tries the forms by slices that order a connection
  // over the whole call (ordersWholeCall): for Chorus's runtimes, an
  // allreduce's halves in turn, and across boxes a reduce-scatter's own
  // sums after the others.
  bool wholeCallForms() const {
    return o_.lower.target == Target::kChorus &&
           (coll_ == CollectiveKind::kAllReduce ||
            (coll_ == CollectiveKind::kReduceScatter && manyBoxes_ && !o_.lower.boxes.empty()));
  }

  // A shape whose plain lowering is near the best so far gets its other
  // lowerings at once (under the lock): cheap shapes need not wait for
  // costly ones, which a budget may then leave out.
  void maybeExpand(int shape) {
    const double mine = plainAlgbw_[static_cast<size_t>(shape)];
    const double best = *std::max_element(plainAlgbw_.begin(), plainAlgbw_.end());
    if (mine <= 0 || mine < kVariantShare * best) return;
    for (size_t e = 0; e < expanded_.size(); ++e)
      if (expanded_[e] && alike(plainAlgbw_[e], mine)) return;
    expand(shape);
  }

  // Runs one item (outside the lock): its lowerings, in turn.
  // `unstarted`: lowerings of its chain not started, for the budget.
  // `iterations`, `plainAlgbw`: the shape's plain lowering's.
  std::vector<Tried> lowerItem(const Item& it, size_t iterations, double plainAlgbw,
                               std::string* problem, size_t* unstarted) {
    const Shape& shape = out_.shapes[static_cast<size_t>(it.shape)];
    std::vector<Tried> chain;
    // `whole`: in the form that orders over the whole call (wholeCallForms).
    auto make = [&](int per, int chunks, int instances, uint64_t slice, bool whole) {
      Tried t0;
      t0.shape = it.shape;
      t0.perConnection = per;
      t0.chunksPerPiece = chunks;
      t0.instances = instances;
      t0.sliceBytes = slice;
      t0.halvesInTurn = whole && coll_ == CollectiveKind::kAllReduce;
      t0.laterLocalSums = whole && coll_ == CollectiveKind::kReduceScatter ? 1 : 0;
      return t0;
    };
    auto keep = [&](Tried tried) -> const Tried& {
      chain.push_back(std::move(tried));
      if (chain.back().algbw > 0) anyServed_ = true;
      for (double best = bestSimulated_; chain.back().algbw > best;)
        if (bestSimulated_.compare_exchange_weak(best, chain.back().algbw)) break;
      return chain.back();
    };
    // `yields`: stopped where another chain's halvings run side by side.
    auto one = [&](int per, int chunks, int instances, uint64_t slice = 0, bool whole = false,
                   bool yields = false) -> const Tried& {
      return keep(lowerAndSimulate(t_, o_, shape, make(per, chunks, instances, slice, whole),
                                   anyServed_, problem, yields ? &sideBySide_[whole] : nullptr));
    };
    // A chain stops with the budget, and where its shape's forests bound it
    // below what a lowering simulates at already (less the margin within
    // which a simpler one is kept, so the pick stays what it would be):
    // 2 x MI250 allgather for Chorus's runtimes, the relaxed forest's
    // slices once the rail forest's reach 338 GB/s.
    bool leading = false;  // this chain's halvings run side by side
    const bool wholeItem = it.kind == Item::kWhole;
    auto stop = [&] {
      const double bound = bound_[static_cast<size_t>(it.shape)];
      return (passed() && anyServed_) || (sideBySide_[wholeItem] && !leading) ||
             (bound > 0 && bound < bestSimulated_ * (1 - kSimplerShare));
    };
    // Slices from `slice` down to kLeastSlice, each half the last, while
    // faster than the last (at first: `last`) by more than kSimplerShare:
    // a step costs twice the one before (kHalvedSliceCost), and one past the
    // deadline is not started. `whole`: as one().
    // Where the next two halvings would not both end by the deadline one
    // after the other but would side by side, both at once, the second on a
    // thread of its own, for a chain ahead of the others of its kind
    // running (leadsAt); those stop meanwhile, leaving it both cores. A step's
    // simulation costs twice the last, so in a slow stretch the last
    // halving (4 x MI250's reduce-scatter, 16 -> 8 KiB: 5-7 s, 94.49 ->
    // 95.04 % of the optimum) fits only when started beside the one before
    // it; and where even the step before those two no longer fits ahead of
    // them (32 KiB, 1.8 s), it is left out and the two run from here (plain
    // chains only; the one beside kept where the one here gained the share
    // a step, twice over).
    auto halveSlices = [&](uint64_t slice, double last, bool whole) {
      chainRuns({it.shape, whole}, true);
      for (; slice >= kLeastSlice && !stop(); slice /= 2) {
        const bool halved = anyServed_ && !chain.empty();
        const double next = halved ? kHalvedSliceCost * chain.back().seconds : 0;
        if (halved && !affords(next)) {
          ++*unstarted;
          break;
        }
        // Side by side: the next two halvings (slice, slice / 2), or, where
        // the two after those fit so but not after the next, those two
        // (slice / 2, slice / 4), the next one left out.
        const double k = kHalvedSliceCost;
        const bool jump = halved && !whole && slice / 4 >= kLeastSlice &&
                          !affords(next + k * k * next) && affords(k * k * next);
        const bool now =
            halved && slice / 2 >= kLeastSlice && !affords(next + k * next) && affords(k * next);
        if ((jump || now) && leadsAt({it.shape, whole}, 2 * slice, last) &&
            !sideBySide_[whole].exchange(true)) {
          const uint64_t here = jump ? slice / 2 : slice;
          leading = true;
          Tried beside = make(1, 1, first_, here / 2, whole);
          std::string besideProblem;
          std::thread side([&] {
            beside = lowerAndSimulate(t_, o_, shape, beside, anyServed_, &besideProblem);
          });
          const Tried& t = one(1, 1, first_, here, whole);
          noteSlice({it.shape, whole}, here, t.algbw);
          // Gained as the chain would have asked of it: by the share a step,
          // for each step from the last.
          const double steps = jump ? 2 : 1;
          const bool gained =
              t.passedOver.empty() && t.algbw > last * std::pow(1 + kSimplerShare, steps);
          side.join();
          sideBySide_[whole] = false;
          leading = false;
          if (problem->empty()) *problem = besideProblem;
          // Kept where this one gained (the chain would have gone on to it).
          if (gained) {
            noteSlice({it.shape, whole}, here / 2, beside.algbw);
            keep(std::move(beside));
          }
          break;
        }
        const Tried& t = one(1, 1, first_, slice, whole, true);
        noteSlice({it.shape, whole}, slice, t.algbw);
        if (!t.passedOver.empty() || t.algbw <= last * (1 + kSimplerShare)) break;
        last = t.algbw;
      }
      chainRuns({it.shape, whole}, false);
    };
    switch (it.kind) {
      case Item::kPlain:
      case Item::kVariant:
        one(it.per, it.chunks, first_);
        break;
      case Item::kFine: {
        // Steps of a quarter slice: where a slow link is busy to the end,
        // the last slice it carries is still to be forwarded after it; a
        // smaller last step shortens that (4 x DGX A100 allgather: 96.2 ->
        // 98.8 %).
        // Then twice as many while that is faster: each hop forwards a
        // chunk once it has all come, so deep trees on links many
        // connections share want small ones (8 x 8 torus allgather: 8
        // chunks 94.0 %, 16 chunks 96.7 %).
        // Where the executor's limits pass over that many, first fewer,
        // busier connections (2, 4, 8 pieces per connection: fewer
        // threadblocks, and fewer for others to wait on), then half as
        // many chunks, until they fit (4 x MI250: 4 chunks put dependencies
        // past threadblock 127 with a connection per piece, and fit with 4
        // pieces per connection, 53.3 -> 67.5 %; 2 x MI250: 16 chunks put
        // 78 steps on a threadblock; 8 fit).
        // For Chorus's runtimes, first smaller slices of the plain lowering
        // (kLeastSlice): half as large while that is faster. Where the forms
        // that need chunks (a box's own sums later, the halves in turn) do
        // not win, this is the schedule kept, in a fraction of the steps.
        // An allgather or broadcast has no such form: its chunks would
        // only pipeline what the slices do (2 x MI250's rail forest: 256
        // chunks 337.76 GB/s, 32 KiB slices 338.27), and are not tried.
        const bool sliced = o_.lower.target == Target::kChorus;
        // A chain for Chorus's runtimes (slices down to 16 KiB, chunks up
        // to 256: each step costs twice the last) goes on only while a step
        // gains more than the share within which the simpler lowering is
        // kept: DGX H100 x 4 allreduce, 512 KiB -> 32 KiB slices and 64 ->
        // 256 chunks gained 0.08-0.14 % a step, for 14 of its 17-21 s.
        const double gain = sliced ? kSimplerShare : 1e-9;
        const bool slicesOnly =
            sliced && (coll_ == CollectiveKind::kAllGather || coll_ == CollectiveKind::kBroadcast);
        if (sliced) {
          const ir::Protocol protocol =
              ir::parseProtocol(o_.lower.protocol).value_or(ir::Protocol::kSimple);
          halveSlices(ir::defaultSliceBytes(protocol) / 2, plainAlgbw, false);
        }
        if (!slicesOnly) {
          // (From at most MSCCL's 64 either way; past them only by doubling
          // while faster, so Chorus's runtimes get 128 or 256 chunks only
          // where they pay.)
          size_t fine = std::min(std::bit_ceil(4 * iterations), kMostChunks);
          int per = 1;
          double last = 0;  // the last fitting lowering's rate
          auto fits = [&](size_t chunks) {
            for (int p = per; p <= kBusiestConnection && !stop(); p *= 2) {
              const Tried& t = one(p, static_cast<int>(chunks), first_);
              if (t.passedOver.empty()) {
                per = p;
                last = t.algbw;
                return true;
              }
              if (!t.crowded) return false;  // busier connections only add steps
            }
            return false;
          };
          size_t fitted = 0, tooMany = 0;  // the most chunks that fit, the fewest that did not
          // Its steps, and so its cost, scale with the chunks: the first
          // such lowering takes about that many times the plain one. Not
          // started where it would end past the deadline (2 x MI250
          // allreduce for Chorus's runtimes, --time-budget 3: 32 chunks,
          // about 1.3 s, were started at the end and stopped, twice).
          const bool affordable = !anyServed_ || affords(it.cost * static_cast<double>(fine));
          if (!affordable) ++*unstarted;
          while (affordable && fine > 2 && !stop()) {
            if (fits(fine)) {
              fitted = fine;
              break;
            }
            tooMany = fine;
            fine /= 2;
          }
          // Then, where the first fit, twice as many while that is faster.
          for (fine *= 2; affordable && tooMany == 0 && fine <= mostChunks_ && !stop(); fine *= 2) {
            if (anyServed_ && !affords(kDoubledCost * chain.back().seconds)) {
              ++*unstarted;
              break;
            }
            const double before = last;
            if (!fits(fine)) {
              tooMany = fine;
              break;
            }
            fitted = fine;
            if (last <= before * (1 + gain)) break;
          }
          // Where twice as many did not fit, the most in between that do, by
          // halving the gap down to an eighth of them (4 x MI250's rail
          // forest: 16 chunks put 65 steps on a threadblock, 12 fit).
          if (fitted >= 4 && tooMany == 2 * fitted) {
            size_t lo = fitted, hi = tooMany;
            while (hi - lo > std::max<size_t>(1, fitted / 8) && !stop()) {
              const size_t mid = (lo + hi) / 2;
              (fits(mid) ? lo : hi) = mid;
            }
          }
          // Where the busiest connections move several chunks per step
          // (lower.cc, chunksPerStep), the most chunks below the last that
          // fills their steps exactly: with S pieces per connection, 64 g / S
          // (4 x MI250, 3 per connection: 42 chunks, steps of 2, fill 63 of
          // 64; 64 chunks take steps of 4 and fill 48; reduce-scatter 79.3
          // -> 81.1 %).
          if (fitted >= 4 && maxSteps(o_.lower.target) > 0 && !stop()) {
            LowerOptions lo = o_.lower;
            lo.piecesPerConnection = per;
            const auto busiest = static_cast<size_t>(busiestConnection(
                o_.collective, t_.ranks(), shape.gather ? &*shape.gather : nullptr,
                shape.scatter ? &*shape.scatter : nullptr, lo));
            const size_t steps = static_cast<size_t>(maxSteps(o_.lower.target));
            if (busiest > 1 && busiest * fitted > steps) {
              const size_t g = (busiest * fitted - 1) / steps;  // full steps below `fitted`
              const size_t full = g * steps / busiest;
              // (Powers of two were tried above.)
              if (full > fitted / 2 && full < fitted && !std::has_single_bit(full)) fits(full);
            }
          }
        }
        break;
      }
      case Item::kWhole: {
        // By slices, the forms that order each connection over the whole
        // call (ordersWholeCall), as rounds of chunks do over 128-256
        // chunks, in a few steps: their own chain, beside the plain one,
        // half the slice while faster, from kWholeSlice (2 x MI250
        // allreduce, halves in turn: 1 MiB 148.0, 256 KiB 160.1, 32 KiB
        // 168.7, 16 KiB 169.3 GB/s; reduce-scatter, own sums after the
        // others: 64 KiB 337.0 where plain slices give 329.7).
        halveSlices(kWholeSlice, 0, true);
        break;
      }
      case Item::kInstances:
        // Instances cut the chunks: fewer, slower steps per connection
        // hide the per-step latency, but a tree's depth then costs more
        // of a chunk; tried while the last had 16 slices per chunk to split.
        for (int instances = 2; instances <= 8 && iterations >= 16 && !stop(); instances *= 2)
          iterations = one(1, 1, instances).iterations;
        break;
    }
    return chain;
  }

  // A pool thread: takes the cheapest item until nothing is queued or
  // running; results are keyed by (shape, slot, position in the chain), so
  // the pick does not depend on which thread finished first.
  void worker() {
    std::unique_lock lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return !queue_.empty() || inFlight_ == 0; });
      if (queue_.empty()) return;  // nothing queued, nothing running: done
      if (!anyServed_ && passed()) takeBestBoundFirst();
      std::pop_heap(queue_.begin(), queue_.end(), later);
      const Item it = queue_.back();
      queue_.pop_back();
      if (anyServed_ && passed()) {
        ++skipped_;
        // (The deferred shapes are still said: lowered, skipped, or not.)
        if (it.kind == Item::kPlain && plainsLeft_ > 0 && --plainsLeft_ == 0) queueDeferred();
        continue;
      }
      ++inFlight_;
      const size_t iterationsBefore = plainIterations_[static_cast<size_t>(it.shape)];
      const double plainBefore = plainAlgbw_[static_cast<size_t>(it.shape)];
      lock.unlock();
      std::string problem;
      size_t unstarted = 0;
      std::vector<Tried> chain = lowerItem(it, iterationsBefore, plainBefore, &problem, &unstarted);
      lock.lock();
      --inFlight_;
      skipped_ += unstarted;
      if (!problem.empty() && bug_.empty()) bug_ = problem;
      for (size_t k = 0; k < chain.size(); ++k)
        results_.emplace_back(
            (static_cast<size_t>(it.shape) * 16 + static_cast<size_t>(it.slot)) * kChainSlots + k,
            chain[k]);
      if (it.kind == Item::kPlain && !chain.empty()) {
        plainAlgbw_[static_cast<size_t>(it.shape)] = chain.front().algbw;
        plainCost_[static_cast<size_t>(it.shape)] = chain.front().seconds;
        plainIterations_[static_cast<size_t>(it.shape)] = chain.front().iterations;
        maybeExpand(it.shape);
        if (plainsLeft_ > 0 && --plainsLeft_ == 0) queueDeferred();
      }
      wake_.notify_all();
    }
  }

  // Past the deadline with nothing served yet, the one lowering still
  // made is the plain one of the shape whose forests bound it highest,
  // not the cheapest: 8 x 8 fat tree allgather, --time-budget 4, whose
  // forests took the budget: the 25 % headroom forest's (71 % of the
  // optimum) came first, where the hierarchical forest's gives 93 %.
  // (Under the lock.)
  void takeBestBoundFirst() {
    auto best = queue_.end();
    for (auto it = queue_.begin(); it != queue_.end(); ++it)
      if (it->kind == Item::kPlain &&
          (best == queue_.end() ||
           bound_[static_cast<size_t>(it->shape)] > bound_[static_cast<size_t>(best->shape)]))
        best = it;
    if (best == queue_.end() || bound_[static_cast<size_t>(best->shape)] <= 0) return;
    best->cost = -std::numeric_limits<double>::infinity();
    std::make_heap(queue_.begin(), queue_.end(), later);
  }

  Status runPool() {
    std::vector<std::thread> pool;
    for (int w = 1; w < threads_; ++w) pool.emplace_back([this] { worker(); });
    worker();
    for (std::thread& th : pool) th.join();
    if (!bug_.empty()) return Status(StatusCode::kInternal, bug_);
    return Status::ok();
  }

  // Before any has run, the rank-to-rank arcs a forest uses stand for its
  // cost: each is a route the simulator shares out at every event (8 x DGX
  // A100: the hierarchical forest 0.02 s, the packed one 1.6 s).
  size_t arcsOf(size_t s) const {
    std::set<std::pair<int, int>> arcs;
    for (const auto* f : {&out_.shapes[s].gather, &out_.shapes[s].scatter})
      if (f->has_value())
        for (const Tree& tree : (*f)->trees) arcs.insert(tree.edges.begin(), tree.edges.end());
    return arcs.size();
  }

  void queuePlain(size_t s, double cost) {
    queue_.push_back({static_cast<int>(s), Item::kPlain, 1, 1, 0, cost});
    std::push_heap(queue_.begin(), queue_.end(), later);
  }

  // The deferred shapes' plain lowerings, once every other shape's plain
  // result is in (under the lock), first in the queue; or why not.
  void queueDeferred() {
    const double bestPlain = *std::max_element(plainAlgbw_.begin(), plainAlgbw_.end());
    for (size_t s : deferred_) {
      if (bound_[s] >= kHopelessShare * bestPlain) {
        queuePlain(s, -1);
        continue;
      }
      Tried tr;
      tr.shape = static_cast<int>(s);
      tr.instances = first_;
      tr.passedOver = fmt::format(
          "not lowered: its forests' rates bound it to {:.3f} GB/s in the bandwidth model, "
          "under half of the {:.3f} GB/s another shape's plain lowering simulates at",
          bound_[s], bestPlain);
      results_.emplace_back(s * 16 * kChainSlots, std::move(tr));
    }
  }

  // Lowerings, each simulated at the size asked for, on a pool of threads
  // taking the cheapest first: every shape's plain lowering, then (as they
  // come) the others of the shapes near the best; then those that every
  // plain result says are near the best.
  Status lowerShapes() {
    const size_t n = out_.shapes.size();
    expanded_.assign(n, 0);
    plainAlgbw_.assign(n, 0);
    plainCost_.assign(n, 0);
    plainIterations_.assign(n, 0);
    chosen_.assign(n, 0);
    // Shapes far below the fastest bound go after the others' plain
    // lowerings, and only where no simulated schedule shows them hopeless
    // (kHopelessShare); which ones depends on the bounds and the plain
    // results alone, not on the threads. They are queued as soon as the
    // last of the others' plain results is in (queueDeferred), ahead of
    // every shape's other lowerings: those can take the whole budget (8 x
    // 8 fat tree allreduce: the packed forest's 32- and 64-chunk lowerings,
    // 10 s each, where the deferred hierarchical forest's, 98.8 %, come
    // after them).
    bound_.assign(n, 0);
    for (size_t s = 0; s < n; ++s) bound_[s] = rateBound(out_.shapes[s]);
    const double bestBound = *std::max_element(bound_.begin(), bound_.end());
    deferred_.clear();
    plainsLeft_ = 0;
    for (size_t s = 0; s < n; ++s) {
      if (out_.shapes[s].sameAs >= 0) continue;
      if (bound_[s] > 0 && bound_[s] < kHopelessShare * bestBound) {
        deferred_.push_back(s);
      } else {
        queuePlain(s, static_cast<double>(arcsOf(s)));
        ++plainsLeft_;
      }
    }
    if (plainsLeft_ == 0) queueDeferred();
    CHORUS_RETURN_IF_ERROR(runPool());
    // Which shapes get their other lowerings is decided on every plain
    // result, so the pick does not depend on the order they came in: the
    // shapes near the best and the first of shapes alike. Those not yet
    // expanded are now; lowerings of shapes expanded early that this leaves
    // out are dropped (pick()).
    std::vector<std::pair<double, int>> ranked;
    for (size_t s = 0; s < n; ++s)
      if (plainAlgbw_[s] > 0) ranked.emplace_back(plainAlgbw_[s], static_cast<int>(s));
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    double last = 0;
    for (const auto& [algbw, s] : ranked) {
      if (algbw < kVariantShare * ranked.front().first) break;
      if (alike(algbw, last)) continue;
      last = algbw;
      chosen_[static_cast<size_t>(s)] = 1;
      if (!expanded_[static_cast<size_t>(s)]) expand(s);
    }
    return runPool();
  }

  // The lowerings tried, in the search's order, and the fastest of them.
  Status pick() {
    // Dropped only when the search ran to the end (then the same set comes
    // out whatever the timing); under a spent budget the best found stays.
    const bool complete =
        skipped_ == 0 && std::none_of(results_.begin(), results_.end(), [](const auto& r) {
          return r.second.passedOver.find("time budget") != std::string::npos;
        });
    if (complete)
      std::erase_if(results_, [&](const auto& r) {
        const Tried& tr = r.second;
        const bool plainOne = tr.perConnection == 1 && tr.chunksPerPiece == 1 &&
                              tr.instances == first_ && r.first % (16 * kChainSlots) == 0;
        return !plainOne && !chosen_[static_cast<size_t>(tr.shape)];
      });
    std::sort(results_.begin(), results_.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string passedOver;
    for (auto& [order, tr] : results_) {
      if (tr.algbw <= 0 && passedOver.empty()) passedOver = tr.passedOver;
      out_.tried.push_back(std::move(tr));
    }
    // The first within kSimplerShare of the fastest: the simplest of those
    // (results are in work-item order, plain lowerings before their
    // variants). A lowering with 64 times the chunks for 0.01 % more
    // (2 x DGX A100 allgather) is not worth its size.
    double top = 0;
    for (const Tried& tr : out_.tried) top = std::max(top, tr.algbw);
    for (size_t i = 0; i < out_.tried.size() && out_.best < 0; ++i)
      if (out_.tried[i].algbw > 0 && out_.tried[i].algbw >= top * (1 - kSimplerShare))
        out_.best = static_cast<int>(i);
    if (out_.best < 0)
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("no lowering serves {} bytes: {}", o_.bytes, passedOver));
    return Status::ok();
  }

  // What the time budget left undone: lowerings not started (queued, or
  // predicted to end past the deadline) and those stopped.
  void noteBudget() {
    const auto stopped = std::count_if(out_.tried.begin(), out_.tried.end(), [](const Tried& tr) {
      return tr.passedOver.find("time budget") != std::string::npos;
    });
    if (skipped_ > 0 || stopped > 0) {
      out_.budgetSpent = true;
      out_.notes.push_back(fmt::format("{} lowering(s) not tried{}: the time budget was spent",
                                       skipped_,
                                       stopped > 0 ? fmt::format(", {} stopped", stopped) : ""));
    }
  }

  // For each shape whose fastest lowering pipelined by chunks simulates
  // within kNearTurnShare of `of` (its own shape's included), the one of
  // the most chunks per piece (its chunk chain's last), of shapes whose
  // chains ran to the end (`ranToTheEnd`).
  template <typename RanToTheEnd>
  std::vector<const Tried*> finestNear(const Tried& of, RanToTheEnd ranToTheEnd) const {
    std::vector<const Tried*> fastest(out_.shapes.size(), nullptr),
        finest(out_.shapes.size(), nullptr);
    for (const Tried& tr : out_.tried) {
      if (tr.sliceBytes > 0 || tr.algbw <= 0 || tr.halvesInTurn || tr.laterLocalSums > 0 ||
          tr.fewerLocalConnections > 0 || !ranToTheEnd(tr))
        continue;
      const size_t sh = static_cast<size_t>(tr.shape);
      if (fastest[sh] == nullptr || tr.algbw > fastest[sh]->algbw) fastest[sh] = &tr;
      if (finest[sh] == nullptr || tr.chunksPerPiece > finest[sh]->chunksPerPiece) finest[sh] = &tr;
    }
    std::vector<const Tried*> out;
    for (size_t sh = 0; sh < out_.shapes.size(); ++sh)
      if (fastest[sh] != nullptr && fastest[sh]->algbw >= kNearTurnShare * of.algbw)
        out.push_back(finest[sh]);
    return out;
  }

  // The lowering kept once more in other forms, kept where faster:
  // - Across boxes, a box's own pieces (of roots in the box, on arcs
  //   inside it) given way to those its NICs send or bring; also on
  //   another shape's fastest lowering near the kept one (below).
  //   - A reduce-scatter: the box's own sums behind the others on shared
  //     connections (LowerOptions::laterLocalSums: half the chunks, then
  //     an eighth). All start together otherwise, and a sum bound for a
  //     NIC crosses 3-5 hops inside its box at a share of links the box's
  //     own sums fill too, so the NICs, which bind, start late (2 x MI250:
  //     86.3 -> 92.2 %, 4 x MI250: 81.1 -> 84.8 %).
  //   - An allgather: the box's own pieces on a quarter of each arc's
  //     connections (LowerOptions::fewerLocalConnections), so that the
  //     pieces from the NICs keep up with them rather than queue for the
  //     end (4 x MI250: 92.8 -> 94.2 %).
  //   Not for a pipelined allreduce, whose two forests share the
  //   connections: 2 x MI250 90.9 -> 90.0 % with the later sums, 4 x MI250
  //   72.9 % with fewer connections where it keeps 81.5 %.
  // - For Chorus's runtimes (no limit on steps), an allreduce's halves in
  //   turn (LowerOptions::halvesInTurn), one piece per connection, and so
  //   with each half's box-own form: each forest spread over every channel
  //   as if alone (4 x MI250 at 128 chunks: 94.0 -> 95.8 %). Not the
  //   first form: where a half alone is far from the forest's rate the
  //   other half waits for it (DGX H100 x 4: 99.3 -> 92.7 %), and under
  //   MSCCL's 64 steps both halves share each threadblock's steps (4 x
  //   MI250: 81.5 -> 78.9 %).
  //   Also, plainly, on the finest chunks of each shape near the kept one
  //   (kNearTurnShare).
  // A lowering that does not compile is our bug, as in the pool.
  Status keptOtherForms() {
    const bool rs = coll_ == CollectiveKind::kReduceScatter;
    const bool ar = coll_ == CollectiveKind::kAllReduce;
    const bool boxes = manyBoxes_ && !o_.lower.boxes.empty();
    // The forms below order a connection's pieces by rounds of chunks: where
    // the kept lowering is pipelined by slices (one chunk), they vary the
    // fastest one pipelined by chunks instead. (An allreduce's halves in
    // turn on slices would take each slice across its reduce-scatter tree,
    // then its allgather tree, before the next starts on a connection: 2 x
    // MI250 at 64 KiB slices, 165.2 -> 78.1 GB/s.)
    // (Only lowerings of shapes whose chains the bound rule could not stop
    // (lowerItem): how far the others got depends on the threads' timing.)
    const double top = bestSimulated_;
    auto ranToTheEnd = [&](const Tried& tr) {
      const double bound = bound_[static_cast<size_t>(tr.shape)];
      return bound <= 0 || bound >= top * (1 - kSimplerShare);
    };
    const Tried* chunked = &out_.kept();
    if (chunked->sliceBytes > 0) {
      chunked = nullptr;
      for (const Tried& tr : out_.tried)
        if (tr.sliceBytes == 0 && tr.algbw > 0 && ranToTheEnd(tr) &&
            (chunked == nullptr || tr.algbw > chunked->algbw))
          chunked = &tr;
    }
    // Another shape's fastest lowering within kNearShare of `of`, if any.
    auto nearOther = [&](const Tried& of) {
      const Tried* other = nullptr;
      for (const Tried& tr : out_.tried)
        if (tr.shape != of.shape && tr.sliceBytes == of.sliceBytes && ranToTheEnd(tr) &&
            tr.algbw >= kNearShare * of.algbw && (other == nullptr || tr.algbw > other->algbw))
          other = &tr;
      return other;
    };
    std::vector<Tried> variants;
    if (ar && o_.lower.target == Target::kChorus && chunked != nullptr) {
      const Tried kept = *chunked;
      Tried turn = kept;
      turn.halvesInTurn = true;
      turn.perConnection = 1;
      variants.push_back(turn);
      if (kept.perConnection != 1) variants.emplace_back(turn).perConnection = kept.perConnection;
      if (boxes && kept.chunksPerPiece >= 8) {
        turn.laterLocalSums = kept.chunksPerPiece / 8;
        turn.fewerLocalConnections = 4;
        variants.push_back(turn);
      }
      // Each near shape's finest chunks in turn (kNearTurnShare), plainly.
      for (const Tried* finest : finestNear(kept, ranToTheEnd)) {
        Tried t = *finest;
        t.halvesInTurn = true;
        t.perConnection = 1;
        if (t.shape != kept.shape || t.chunksPerPiece != kept.chunksPerPiece) variants.push_back(t);
      }
    } else if (boxes) {
      // The kept lowering (and the fastest pipelined by chunks), each with
      // the fastest of another shape, if within kNearShare of it (4 x MI250
      // reduce-scatter for Chorus's runtimes: the rail forest's 128 chunks
      // simulate 0.7 % below the shortened one's, and 93.9 % of the
      // optimum with later sums, where the shortened one's lose).
      std::vector<Tried> bases;
      std::vector<const Tried*> of{&out_.kept()};
      if (chunked != nullptr && chunked != of.front()) of.push_back(chunked);
      for (const Tried* o : of) {
        bases.push_back(*o);
        if (const Tried* other = nearOther(*o)) bases.push_back(*other);
      }
      for (const Tried& base : bases) {
        // (A lowering pipelined by slices has no rounds to put the box's
        // own sums behind, but its pieces can give way.)
        if (coll_ == CollectiveKind::kAllGather &&
            (base.chunksPerPiece >= 8 || base.sliceBytes > 0))
          variants.emplace_back(base).fewerLocalConnections = 4;
        else if (rs && base.chunksPerPiece >= 8)
          for (int later : {base.chunksPerPiece / 2, base.chunksPerPiece / 8})
            variants.emplace_back(base).laterLocalSums = later;
      }
    }
    // Side by side (each lowering and simulation is alone on its core),
    // kept in order.
    std::vector<char> ran(variants.size(), 0);
    std::vector<std::string> bugs(variants.size());
    std::atomic<size_t> unstarted{0};
    parallelFor(variants.size(), threads_, [&](size_t i) {
      // As long as the lowering it varies (the same chunks).
      if (!affords(variants[i].seconds)) {
        ++unstarted;
        return;
      }
      Tried& t = variants[i];
      t.algbw = t.busbw = t.seconds = 0;
      t.passedOver.clear();
      t = lowerAndSimulate(t_, o_, out_.shapes[static_cast<size_t>(t.shape)], t, true, &bugs[i]);
      ran[i] = 1;
    });
    skipped_ += unstarted;
    for (size_t i = 0; i < variants.size(); ++i) {
      if (!bugs[i].empty()) return Status(StatusCode::kInternal, bugs[i]);
      if (ran[i] == 0) continue;
      out_.tried.push_back(variants[i]);
      if (variants[i].algbw > out_.kept().algbw * (1 + kSimplerShare))
        out_.best = static_cast<int>(out_.tried.size() - 1);
    }
    return Status::ok();
  }

  const topo::Topology& t_;
  const SearchOptions& o_;
  const CollectiveKind coll_;
  const bool rooted_;
  const int root_;
  const bool blink_;
  const int threads_;
  const int first_;          // instances of the plain lowerings
  const size_t mostChunks_;  // chunks per piece at most (kMostChunks, kMostChunksUnlimited)
  bool boxes_ = false, manyBoxes_ = false;
  Found out_;

  // The lowering pool: its queue (a heap, cheapest first) and what it found.
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<Item> queue_;
  int inFlight_ = 0;
  size_t skipped_ = 0;
  std::atomic<bool> anyServed_{false};
  // A chain's two halvings run side by side (halveSlices).
  // (Plain chains and whole-call ones apart: each kind yields to its own.)
  std::atomic<bool> sideBySide_[2] = {false, false};
  // The chains of slices running, and what each chain's slices simulated
  // at, by slice.
  std::mutex sliceMu_;
  std::set<ChainId> chainsRunning_;
  std::map<uint64_t, std::map<ChainId, double>> sliceRates_;
  std::string bug_;
  std::vector<std::pair<size_t, Tried>> results_;  // (order, tried)
  std::vector<char> expanded_, chosen_;
  std::vector<double> plainAlgbw_, plainCost_;
  std::vector<size_t> plainIterations_;
  std::vector<double> bound_;             // per shape: rateBound
  std::atomic<double> bestSimulated_{0};  // the fastest lowering simulated so far
  std::vector<size_t> deferred_;          // shapes whose plain lowering waits for the others'
  size_t plainsLeft_ = 0;                 // plain lowerings of the others not yet in
};

}  // namespace

LowerOptions Found::keptLowering(const LowerOptions& base) const {
  return loweringOf(base, kept(), bytes);
}

Result<Found> searchSchedule(const topo::Topology& t, const SearchOptions& o) {
  return ScheduleSearch(t, o).run();
}

}  // namespace chorus::synth
