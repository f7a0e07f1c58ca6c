#include "synth/search.h"

#include <fmt/core.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

#include "ir/validate.h"
#include "sim/simulator.h"
#include "synth/blink.h"

namespace chorus::synth {

namespace {

using Clock = std::chrono::steady_clock;

// Pieces per shard of the relaxed forest. Fewer pieces lower its bound but
// lower what the simulator finds more slowly: 2 x MI250 allgather at 1 GiB,
// 5 pieces: 90.4 % bound, 75.2 % simulated; 11 pieces (8 to 16 allowed):
// 99.4 %, 64.9 % (docs/synthesis.md).
constexpr int kRelaxedPieces = 8;

// Chunks per piece at most (MSCCL's executor runs 64 steps per
// threadblock).
constexpr size_t kMostChunks = 64;

int usableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// Runs fn(0) ... fn(n - 1) on up to `threads` threads, each taking the next
// index as it finishes one.
void parallelFor(size_t n, int threads, const std::function<void(size_t)>& fn) {
  const size_t workers = std::min(n, static_cast<size_t>(std::max(1, threads)));
  if (workers <= 1) {
    for (size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < n;) fn(i);
  };
  std::vector<std::thread> pool;
  for (size_t w = 1; w < workers; ++w) pool.emplace_back(work);
  work();
  for (std::thread& th : pool) th.join();
}

bool sameForest(const std::optional<Forest>& a, const std::optional<Forest>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->k == b->k && a->trees == b->trees);
}

// Lowers a shape one way and simulates it (no verification: the caller
// proves what it keeps). `bug` is set where the compiler refuses a forest.
// `stoppable`: the simulation may stop at the deadline (not before some
// lowering has served, so there is always an answer).
Tried lowerAndSimulate(const topo::Topology& t, const SearchOptions& o, const Shape& shape,
                       Tried tried, bool stoppable, std::string* bug) {
  const auto t0 = Clock::now();
  LowerOptions lo = o.lower;
  lo.piecesPerConnection = tried.perConnection;
  lo.chunksPerPiece = tried.chunksPerPiece;
  lo.instances = tried.instances;
  const Forest* g = shape.gather ? &*shape.gather : nullptr;
  const Forest* s = shape.scatter ? &*shape.scatter : nullptr;
  compiler::Compiled c = lowerForests(o.collective, t.ranks(), g, s, lo);
  auto done = [&] {
    tried.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return tried;
  };
  if (!c.ok()) {
    *bug = "the lowered forest does not compile (a bug):\n" +
           (c.diagnostics.items().empty() ? std::string() : c.diagnostics.items().front().format());
    tried.passedOver = "does not compile";
    return done();
  }
  // Many chunks per piece can exceed what MSCCL's executor runs (steps per
  // threadblock, offsets): such a lowering is passed over.
  if (tried.chunksPerPiece > 2) {
    DiagnosticList limits;
    ir::checkExecutorLimits(c.algo, limits);
    if (!limits.items().empty()) {
      tried.passedOver = limits.items().front().format();
      return done();
    }
  }
  sim::Options so;
  so.bytes = o.bytes;
  so.inplace = o.lower.inplace;
  so.criticalPath = false;
  if (stoppable) so.deadline = o.deadline;
  auto r = sim::simulate(c.algo, t, so);
  if (!r.isOk()) {
    tried.passedOver = "simulating it: " + r.status().message();
    return done();
  }
  tried.algbw = r.value().algbw;
  tried.busbw = r.value().busbw;
  tried.iterations = r.value().iterations;
  return done();
}

}  // namespace

LowerOptions Found::keptLowering(const LowerOptions& base) const {
  LowerOptions lo = base;
  lo.piecesPerConnection = kept().perConnection;
  lo.chunksPerPiece = kept().chunksPerPiece;
  lo.instances = kept().instances;
  return lo;
}

Result<Found> searchSchedule(const topo::Topology& t, const SearchOptions& o) {
  Found out;
  const CollectiveKind coll = o.collective;
  const bool rooted = coll == CollectiveKind::kBroadcast || coll == CollectiveKind::kReduce;
  const int root = rooted ? o.root : -1;
  const bool blink = o.method == "blink";
  const int threads = o.threads > 0 ? o.threads : usableCores();
  if (blink && rooted)
    return Status(StatusCode::kInvalidArgument,
                  "--method blink packs allgather-family trees (every rank a root)");
  // Which directions the collective needs: the gather forest (allgather,
  // allreduce, broadcast) and the scatter one (reduce-scatter, allreduce,
  // reduce).
  const bool needGather = coll != CollectiveKind::kReduceScatter && coll != CollectiveKind::kReduce;
  const bool needScatter = coll != CollectiveKind::kAllGather && coll != CollectiveKind::kBroadcast;
  // Every route asked for once here, before any thread runs: the
  // topology caches routes as they are asked for (a write), and the
  // packers and simulations below share it.
  for (int a = 0; a < t.ranks(); ++a)
    for (int b = 0; b < t.ranks(); ++b) (void)t.route(a, b);
  const bool boxes = !linksBetweenBoxes(t).empty();
  // Ranks in more than one box (a box's own routes may still cross the
  // links between boxes, as MI250 GCDs without an xGMI link between them).
  bool manyBoxes = false;
  for (int r = 1; r < t.ranks(); ++r)
    manyBoxes = manyBoxes || t.nodes[static_cast<size_t>(t.nodeOfRank(r))].box !=
                                 t.nodes[static_cast<size_t>(t.nodeOfRank(0))].box;
  if (o.headroom > 0 && !boxes)
    return Status(StatusCode::kInvalidArgument,
                  "--headroom needs links between boxes (this topology is one box)");
  auto passed = [&] { return o.deadline && Clock::now() > *o.deadline; };

  // The shapes, each packed by a maker (in parallel; a maker makes a
  // forest for one direction).
  struct Maker {
    std::string kind;
    int headroom = 0;
    std::function<Result<Forest>(bool reversed)> make;
    bool required = false;  // its failure is the command's
  };
  std::vector<Maker> makers;
  if (blink) {
    makers.push_back({"blink", 0,
                      [&](bool reversed) {
                        return blinkForest(t, reversed, {.treesPerRoot = o.trees}, o.maxPieces);
                      },
                      true});
  } else {
    // The hierarchical forest (every shard into each box once) where ranks
    // sit in several boxes, unless --headroom asks for the packed ones.
    // First: it is the cheapest to simulate (8 x DGX A100: 0.02 s against
    // 0.5 s for the packed forest), so on a tie with another it goes first
    // and under a budget it is never left out.
    if (manyBoxes && !rooted && o.headroom <= 0)
      makers.push_back(
          {"hierarchical", 0, [&](bool reversed) { return hierarchicalForest(t, reversed); }});
    if (o.headroom <= 0)
      makers.push_back({"packed", 0, [&](bool reversed) {
                          return packForest(t, reversed, o.maxPieces, root, o.deadline);
                        }});
    // Headroom: 10 and 25 % besides none, unless --headroom names one; a
    // forest that needs more than 16 pieces per shard for it is passed over
    // then (its finer rates buy nothing the headroom does not, at many more
    // steps).
    std::vector<int> headrooms{10, 25};
    if (o.headroom >= 0) headrooms = {o.headroom};
    for (int h : headrooms) {
      if (h == 0 || !boxes) continue;
      const int most = o.headroom > 0 ? o.maxPieces : std::min(o.maxPieces, 16);
      makers.push_back({"packed", h, [&t, &o, h, most, root](bool reversed) {
                          return packForest(withHeadroom(t, 1 - h / 100.0), reversed, most, root,
                                            o.deadline);
                        }});
    }
    makers.push_back(
        {"shallow", 0, [&](bool reversed) { return shallowForest(t, reversed, root); }, true});
  }
  struct Made {
    Shape shape;
    std::string problem;  // empty: made
    bool skipped = false, late = false;
  };
  std::vector<Made> made(makers.size());
  std::atomic<bool> anyMade{false};
  auto runMakers = [&](size_t from) {
    parallelFor(makers.size() - from, threads, [&](size_t j) {
      const size_t i = from + j;
      const Maker& m = makers[i];
      Made& r = made[i];
      r.shape.kind = m.kind;
      r.shape.headroom = m.headroom;
      if (anyMade && passed()) {
        r.skipped = true;
        return;
      }
      for (bool reversed : {false, true}) {
        if (!(reversed ? needScatter : needGather)) continue;
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
  };
  runMakers(0);
  // An exact forest that needs too many pieces: the fastest rates below the
  // optimum that need fewer stand in for it (relaxedForest).
  const auto exact = std::find_if(made.begin(), made.end(), [](const Made& m) {
    return m.shape.kind == "packed" && m.shape.headroom == 0;
  });
  if (!blink && exact != made.end() &&
      exact->problem.find("pieces per shard") != std::string::npos) {
    const size_t from = makers.size();
    const int most = std::min(o.maxPieces, kRelaxedPieces);
    makers.push_back({"relaxed", 0, [&t, &o, most](bool reversed) {
                        return relaxedForest(t, reversed, most, o.deadline);
                      }});
    made.resize(makers.size());
    runMakers(from);
  }
  for (size_t i = 0; i < makers.size(); ++i) {
    Made& m = made[i];
    if (m.skipped) {
      out.budgetSpent = true;
      out.notes.push_back(fmt::format("the {} forest{} was not packed: the time budget was spent",
                                      m.shape.kind, m.shape.headroom > 0 ? " with headroom" : ""));
      continue;
    }
    if (!m.problem.empty()) {
      if (makers[i].required) return Status(StatusCode::kInvalidArgument, m.problem);
      // The default headrooms are tried quietly; an exact forest out of
      // reach is said, the others stand in for it.
      out.budgetSpent = out.budgetSpent || m.late;
      if (m.shape.headroom == 0 || o.headroom > 0 || m.late)
        out.notes.push_back(m.shape.headroom > 0
                                ? fmt::format("with {} % headroom: {}", m.shape.headroom, m.problem)
                                : fmt::format("the exact {} forest: {}", m.shape.kind, m.problem));
      continue;
    }
    for (const auto* f : {&m.shape.gather, &m.shape.scatter})
      if (f->has_value()) out.maxflows += (*f)->maxflows;
    const bool packed = m.shape.kind == "packed" || m.shape.kind == "relaxed";
    out.shapes.push_back(m.shape);
    // The packed forests shortened (forest.h): any may schedule best.
    if (packed) {
      Shape shorter = m.shape;
      shorter.kind = m.shape.kind == "packed" ? "shortened" : m.shape.kind + " shortened";
      for (std::optional<Forest>* f : {&shorter.gather, &shorter.scatter})
        if (f->has_value()) *f = shortenForest(**f);
      out.shapes.push_back(std::move(shorter));
    }
  }
  if (o.headroom > 0 && std::none_of(out.shapes.begin(), out.shapes.end(),
                                     [](const Shape& s) { return s.headroom > 0; }))
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("no forest with {} % headroom needs at most {} pieces per shard",
                              o.headroom, o.maxPieces));
  // Forests alike are lowered once.
  for (size_t i = 0; i < out.shapes.size(); ++i)
    for (size_t j = 0; j < i && out.shapes[i].sameAs < 0; ++j)
      if (out.shapes[j].sameAs < 0 && sameForest(out.shapes[i].gather, out.shapes[j].gather) &&
          sameForest(out.shapes[i].scatter, out.shapes[j].scatter))
        out.shapes[i].sameAs = static_cast<int>(j);

  // Lowerings, each simulated at the size asked for, on a pool of threads
  // taking the cheapest first. A work item is one lowering or a chain run
  // one after another (instances: each needs the last one's iterations);
  // results are ordered by (shape, place, position in the chain), so the
  // pick does not depend on which thread finished first.
  std::string bug;
  std::mutex mu;
  std::condition_variable wake;
  std::atomic<bool> anyServed{false};
  struct Item {
    int shape;
    enum Kind { kPlain, kVariant, kFine, kInstances } kind;
    int per = 1, chunks = 1;
    int slot = 0;  // its place among its shape's lowerings: the results' order
    // Cheapest first: a plain lowering by its forests' arcs, the others by the
    // seconds their shape's plain lowering took (so before plain ones left).
    double cost = 0;
  };
  const int first = o.instances > 0 ? o.instances : 1;
  std::vector<std::pair<size_t, Tried>> results;  // (order, tried)
  std::vector<Item> queue;                        // a heap: cheapest, then in order
  auto later = [](const Item& a, const Item& b) {
    return std::tie(a.cost, a.shape, a.slot) > std::tie(b.cost, b.shape, b.slot);
  };
  int inFlight = 0;
  size_t skipped = 0;
  std::vector<char> expanded(out.shapes.size(), 0);
  std::vector<double> plainAlgbw(out.shapes.size(), 0), plainCost(out.shapes.size(), 0);
  std::vector<size_t> plainIterations(out.shapes.size(), 0);
  // The other lowerings of a shape (under the lock).
  auto expand = [&](int shape) {
    expanded[static_cast<size_t>(shape)] = 1;
    const double c = plainCost[static_cast<size_t>(shape)];
    int slot = 1;
    for (auto [per, chunks] : {std::pair{2, 1}, {1, 2}, {2, 2}})
      queue.push_back({shape, Item::kVariant, per, chunks, slot++, c});
    queue.push_back({shape, Item::kFine, 1, 1, slot++, c});
    if (o.instances == 0) queue.push_back({shape, Item::kInstances, 1, 1, slot++, c});
    for (size_t i = queue.size() - static_cast<size_t>(slot - 1); i < queue.size(); ++i)
      std::push_heap(queue.begin(), queue.begin() + static_cast<std::ptrdiff_t>(i) + 1, later);
  };
  // Shapes alike in their plain lowerings' results (4 x DGX A100: the
  // packed forest, shortened and with either headroom) are taken as alike.
  auto alike = [](double a, double b) { return std::abs(a - b) <= 1e-9 * std::max(a, b); };
  // A shape whose plain lowering is near the best so far gets its other
  // lowerings at once (under the lock): cheap shapes need not wait for
  // costly ones, which a budget may then leave out.
  auto maybeExpand = [&](int shape) {
    const double mine = plainAlgbw[static_cast<size_t>(shape)];
    const double best = *std::max_element(plainAlgbw.begin(), plainAlgbw.end());
    if (mine <= 0 || mine < kVariantShare * best) return;
    for (size_t e = 0; e < expanded.size(); ++e)
      if (expanded[e] && alike(plainAlgbw[e], mine)) return;
    expand(shape);
  };
  auto worker = [&] {
    std::unique_lock lock(mu);
    for (;;) {
      wake.wait(lock, [&] { return !queue.empty() || inFlight == 0; });
      if (queue.empty()) return;  // nothing queued, nothing running: done
      std::pop_heap(queue.begin(), queue.end(), later);
      const Item it = queue.back();
      queue.pop_back();
      if (anyServed && passed()) {
        ++skipped;
        continue;
      }
      ++inFlight;
      const size_t iterationsBefore = plainIterations[static_cast<size_t>(it.shape)];
      lock.unlock();
      const Shape& shape = out.shapes[static_cast<size_t>(it.shape)];
      std::string problem;
      std::vector<Tried> chain;
      auto one = [&](int per, int chunks, int instances) -> const Tried& {
        Tried t0;
        t0.shape = it.shape;
        t0.perConnection = per;
        t0.chunksPerPiece = chunks;
        t0.instances = instances;
        chain.push_back(lowerAndSimulate(t, o, shape, t0, anyServed, &problem));
        if (chain.back().algbw > 0) anyServed = true;
        return chain.back();
      };
      size_t iterations = iterationsBefore;
      switch (it.kind) {
        case Item::kPlain:
        case Item::kVariant:
          one(it.per, it.chunks, first);
          break;
        case Item::kFine:
          // Steps of a quarter slice: where a slow link is busy to the end,
          // the last slice it carries is still to be forwarded after it; a
          // smaller last step shortens that (4 x DGX A100 allgather: 96.2 ->
          // 98.8 %).
          if (const size_t fine = std::bit_ceil(4 * iterations); fine > 2 && fine <= kMostChunks)
            one(1, static_cast<int>(fine), first);
          break;
        case Item::kInstances:
          // Instances cut the chunks: fewer, slower steps per connection
          // hide the per-step latency, but a tree's depth then costs more
          // of a chunk; tried while the last had 16 slices per chunk to split.
          for (int instances = 2; instances <= 8 && iterations >= 16 && !(passed() && anyServed);
               instances *= 2)
            iterations = one(1, 1, instances).iterations;
          break;
      }
      lock.lock();
      --inFlight;
      if (!problem.empty() && bug.empty()) bug = problem;
      for (size_t k = 0; k < chain.size(); ++k)
        results.emplace_back(
            (static_cast<size_t>(it.shape) * 16 + static_cast<size_t>(it.slot)) * kMostChunks + k,
            chain[k]);
      if (it.kind == Item::kPlain && !chain.empty()) {
        plainAlgbw[static_cast<size_t>(it.shape)] = chain.front().algbw;
        plainCost[static_cast<size_t>(it.shape)] = chain.front().seconds;
        plainIterations[static_cast<size_t>(it.shape)] = chain.front().iterations;
        maybeExpand(it.shape);
      }
      wake.notify_all();
    }
  };
  auto runAll = [&] {
    std::vector<std::thread> pool;
    for (int w = 1; w < threads; ++w) pool.emplace_back(worker);
    worker();
    for (std::thread& th : pool) th.join();
  };
  // Every shape's plain lowering, then (as they come) the others of the
  // shapes near the best.
  // Before any has run, the rank-to-rank arcs a forest uses stand for its
  // cost: each is a route the simulator shares out at every event (8 x DGX
  // A100: the hierarchical forest 0.02 s, the packed one 1.6 s).
  for (size_t s = 0; s < out.shapes.size(); ++s)
    if (out.shapes[s].sameAs < 0) {
      std::set<std::pair<int, int>> arcs;
      for (const auto* f : {&out.shapes[s].gather, &out.shapes[s].scatter})
        if (f->has_value())
          for (const Tree& tree : (*f)->trees) arcs.insert(tree.edges.begin(), tree.edges.end());
      queue.push_back(
          {static_cast<int>(s), Item::kPlain, 1, 1, 0, static_cast<double>(arcs.size())});
      std::push_heap(queue.begin(), queue.end(), later);
    }
  runAll();
  if (!bug.empty()) return Status(StatusCode::kInternal, bug);
  // Which shapes get their other lowerings is decided on every plain
  // result, so the pick does not depend on the order they came in: the
  // shapes near the best and the first of shapes alike. Those not yet
  // expanded are now; lowerings of shapes expanded early that this leaves
  // out are dropped.
  std::vector<std::pair<double, int>> ranked;
  for (size_t s = 0; s < out.shapes.size(); ++s)
    if (plainAlgbw[s] > 0) ranked.emplace_back(plainAlgbw[s], static_cast<int>(s));
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<char> chosen(out.shapes.size(), 0);
  double last = 0;
  for (const auto& [algbw, s] : ranked) {
    if (algbw < kVariantShare * ranked.front().first) break;
    if (alike(algbw, last)) continue;
    last = algbw;
    chosen[static_cast<size_t>(s)] = 1;
    if (!expanded[static_cast<size_t>(s)]) expand(s);
  }
  runAll();
  if (!bug.empty()) return Status(StatusCode::kInternal, bug);
  // Dropped only when the search ran to the end (then the same set comes
  // out whatever the timing); under a spent budget the best found stays.
  const bool complete =
      skipped == 0 && std::none_of(results.begin(), results.end(), [](const auto& r) {
        return r.second.passedOver.find("time budget") != std::string::npos;
      });
  if (complete)
    std::erase_if(results, [&](const auto& r) {
      const Tried& tr = r.second;
      const bool plainOne = tr.perConnection == 1 && tr.chunksPerPiece == 1 &&
                            tr.instances == first && r.first % (16 * kMostChunks) == 0;
      return !plainOne && !chosen[static_cast<size_t>(tr.shape)];
    });
  std::sort(results.begin(), results.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string passedOver;
  for (auto& [order, tr] : results) {
    if (tr.algbw <= 0 && passedOver.empty()) passedOver = tr.passedOver;
    out.tried.push_back(std::move(tr));
  }
  const auto stopped = std::count_if(out.tried.begin(), out.tried.end(), [](const Tried& tr) {
    return tr.passedOver.find("time budget") != std::string::npos;
  });
  if (skipped > 0 || stopped > 0) {
    out.budgetSpent = true;
    out.notes.push_back(fmt::format("{} lowering(s) not tried{}: the time budget was spent",
                                    skipped,
                                    stopped > 0 ? fmt::format(", {} stopped", stopped) : ""));
  }
  // The fastest; on a tie (within rounding) the first, the simplest.
  for (size_t i = 0; i < out.tried.size(); ++i)
    if (out.tried[i].algbw > 0 &&
        (out.best < 0 || out.tried[i].algbw > out.kept().algbw * (1 + 1e-9)))
      out.best = static_cast<int>(i);
  if (out.best < 0)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("no lowering serves {} bytes: {}", o.bytes, passedOver));
  return out;
}

}  // namespace chorus::synth
