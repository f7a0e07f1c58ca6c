#include "sim/simulator.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>

#include "core/parallel.h"
#include "ir/slicing.h"

namespace chorus::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Events this close (seconds) are one: flows that end a picosecond apart
// would otherwise each cost a recomputation of every rate.
constexpr double kSameTime = 1e-12;
// Step instances the critical path keeps per-instance records for, at most.
constexpr size_t kMostPathInstances = size_t{1} << 25;
constexpr uint32_t kNoStep = UINT32_MAX;

// Parts a step's slice moves in, each sent (and forwarded) as soon as it
// is there: MSCCL's executor moves a Simple chunk (NCCL_STEPS / 2 steps) in
// slices of NCCL_STEPS / 4 steps, so two; LL and LL128 chunks are one step.
size_t defaultPartsPerSlice(ir::Protocol p) { return p == ir::Protocol::kSimple ? 2 : 1; }

double protocolLatency(ir::Protocol p) {
  switch (p) {
    case ir::Protocol::kLL:
      return 0.6e-6;
    case ir::Protocol::kLL128:
      return 1.9e-6;
    case ir::Protocol::kSimple:
      return 3.4e-6;
  }
  return 3.4e-6;
}

// Wire bytes per useful byte.
double protocolOverhead(ir::Protocol p) {
  switch (p) {
    case ir::Protocol::kLL:
      return 2.0;
    case ir::Protocol::kLL128:
      return 128.0 / 120.0;
    case ir::Protocol::kSimple:
      return 1.0;
  }
  return 1.0;
}

// Elements per rank of a call of `o.bytes` as nccl-tests counts them: the
// most that split into the algorithm's chunks.
chorus::Result<size_t> callCount(const ir::Algorithm& a, const topo::Topology& t,
                                 const Options& o) {
  if (a.ngpus > t.ranks())
    return chorus::Status(StatusCode::kInvalidArgument,
                          "the algorithm has " + std::to_string(a.ngpus) + " ranks; topology '" +
                              t.name + "' has " + std::to_string(t.ranks()));
  const size_t m = ir::countMultiplier(a), quantum = ir::countQuantum(a);
  const size_t count = o.bytes / (o.elementSize * m) / quantum * quantum;
  if (count == 0)
    return chorus::Status(StatusCode::kInvalidArgument,
                          std::to_string(o.bytes) + " bytes is below the smallest call " + a.name +
                              " serves (" + std::to_string(quantum * m * o.elementSize) +
                              " bytes)");
  return count;
}

// The slots' layout the algorithm runs on (Options::protocol).
ir::Protocol layoutOf(const ir::Algorithm& a, const Options& o) {
  return o.protocol >= 0 ? static_cast<ir::Protocol>(o.protocol) : a.protocol;
}

// The links a transfer from rank `from` to rank `to` crosses: the
// topology's route, then the ranks' caps, which act as one more link all
// of a rank's flows out (in) cross: ids past the topology's links, 2 per
// rank (capacities()).
chorus::Result<std::vector<int>> routeLinks(const topo::Topology& t, int from, int to) {
  std::vector<int> route = t.route(from, to);
  if (route.empty())
    return chorus::Status(StatusCode::kInvalidArgument,
                          "rank " + std::to_string(from) + " cannot reach rank " +
                              std::to_string(to) + " on topology '" + t.name + "'");
  const int links = static_cast<int>(t.links.size());
  if (t.nodes[static_cast<size_t>(t.nodeOfRank(from))].sendCap > 0)
    route.push_back(links + 2 * from);
  if (t.nodes[static_cast<size_t>(t.nodeOfRank(to))].recvCap > 0)
    route.push_back(links + 2 * to + 1);
  return route;
}

// Bytes per second of every id routeLinks() gives, for `ranks` ranks.
std::vector<double> capacities(const topo::Topology& t, int ranks) {
  std::vector<double> cap(t.links.size() + 2 * static_cast<size_t>(ranks));
  for (size_t l = 0; l < t.links.size(); ++l) cap[l] = t.links[l].bandwidth * 1e9;
  for (int r = 0; r < ranks; ++r) {
    const topo::Node& node = t.nodes[static_cast<size_t>(t.nodeOfRank(r))];
    cap[t.links.size() + 2 * static_cast<size_t>(r)] = node.sendCap * 1e9;
    cap[t.links.size() + 2 * static_cast<size_t>(r) + 1] = node.recvCap * 1e9;
  }
  return cap;
}

enum class Why : uint8_t { kStart, kOrder, kDependency, kData, kSlot };
const char* whyName(Why w) {
  static const char* names[] = {"start", "order", "dependency", "data", "slot"};
  return names[static_cast<int>(w)];
}

// One cache line: the event loop reads a connection at every message.
struct alignas(64) Connection {
  int senderTb = -1, receiverTb = -1;
  int route = -1;      // Engine::routes_: its links, then the ranks' caps
  double latency = 0;  // the route's links
  // Messages sent, arrived, taken by their receive step, and whose receive
  // step has finished (its slot is free again then, as in the runtime).
  // And messages whose bytes have left (a sender has one flow at a time).
  size_t sent = 0, left = 0, arrived = 0, consumed = 0, released = 0;
};
static_assert(sizeof(Connection) == 64);

// For the critical path, per connection and message seq (at seq % slots:
// a message is read at most `slots` messages after it was written, since
// at most `slots` are between their send and their slot's release).
// Messages arrive in the order they were sent (one sender, one latency).
struct Message {
  size_t sender = 0;  // the step instance that sent it
  double arrivedAt = 0;
  size_t consumer = 0;  // the step instance that took it
  double freedAt = 0;   // when its slot was free again
};

constexpr int kNotWaiting = -2;

// What the event loop reads and writes at every step is in the first cache
// line, the critical path's and the trace's in the second: a threadblock
// woken by another's event is a cache miss, and a second line (or its
// step, read from the algorithm) another. The current step's fields the
// loop needs are copied in when it starts (Engine::enter).
struct alignas(64) Tb {
  // Its steps, held here, the current one at `pos`.
  const ir::Step* steps = nullptr;
  // Slice iteration, and its loop's end: the slices' iterations and its
  // largest lag's (Engine::setup refuses calls of more than 32 bits).
  uint32_t iter = 0, end = 0;
  int pos = 0, nsteps = 0;
  int rank = 0;
  int instance = 0;  // Options::instances: it runs iterations instance, + instances, ...
  int sendConn = -1, recvConn = -1;
  // The current step's type, dependency (its threadblock's place within
  // an instance, -1 for none; its step), count and lag.
  ir::StepType type = ir::StepType::kNop;
  bool recvDone = false, busy = false, done = false;
  int depPlace = -1, depStep = 0;
  int count = 0;
  uint16_t lag = 0;
  uint16_t part = 0;  // of the current step's slice (Options::partsPerSlice)
  // The first threadblock waiting for a step of this one; they are linked
  // by Engine::nextWaiter_, latest first.
  int waiters = -1;
  int index = 0;
  size_t base = 0;  // first step instance id of iteration 0
  // For the critical path and the trace: when the current step started,
  // what let it go on last, and when.
  double stepStart = 0;
  size_t blocker = SIZE_MAX;
  Why why = Why::kStart;
  double blockTime = 0;
};
static_assert(offsetof(Tb, index) == 64, "the event loop's fields fill the first cache line");

struct Flow {
  double bytes = 0;  // wire bytes to move
  int conn = -1, route = -1, tb = -1;
  size_t instance = 0;
};

// Flows over the same links get the same max-min fair rate, so rates are
// computed per route with its flows as a weight: many connections between
// the same ranks (one per tree, piece or channel) cost one entry. And time
// moves per route: every flow on it has moved `served` bytes more since it
// started than when it started, so a flow is done when `served` reaches
// its target, the first of them at the top of `due`. `served` is brought
// up to date (settled) only when the route's rate or flows change: until
// then it grows at `rate` from `since`.
struct Route {
  std::vector<int> links;  // then the ranks' caps (ids past the links)
  // The links that can limit its rate (Engine::setup leaves out those no
  // set of the algorithm's flows can fill), and its place in each one's
  // Engine::activeOn_ list while it has flows.
  std::vector<int> binding;
  std::vector<int> place;
  int flows = 0;         // moving now
  int flowsRated = 0;    // when the rates were computed last
  bool listed = false;   // in Engine::activeOn_
  bool changed = false;  // in Engine::changed_
  bool fixed = false;    // computeRates
  uint32_t seen = 0;     // computeRates' search, by epoch
  double rate = 0;       // per flow
  double served = 0;     // bytes per flow since the start, at `since`
  double since = 0;
  // (served at which it is done, flow slot), a min-heap.
  std::vector<std::pair<double, int>> due;
};

struct Timer {
  double time;
  uint64_t seq;
  int kind;  // 0: local work done (tb), 1: a message arrives (connection)
  int id;
  bool operator>(const Timer& o) const { return time != o.time ? time > o.time : seq > o.seq; }
};

// Timers in (time, seq) order. Each is set a delay after the present (a
// connection's latency, a step's local work), and the present only moves
// forward, so the timers of one delay come due in the order they were set
// (rounding is monotone): a first-in first-out lane per delay, and the next
// timer due is the earliest lane's first. A search's simulations have a
// few delays and thousands of timers in flight: one heap of them all spent
// a third of their time sifting. Past kMostLanes delays, the others share
// a heap. The order is the heap's, so the results are the same.
class TimerQueue {
 public:
  void push(double now, double delay, int kind, int id) {
    const Timer t{now + delay, seq_++, kind, id};
    if (next_ != kUnknown && !(t > top())) next_ = kUnknown;  // it may come first
    ++count_;
    for (Lane& lane : lanes_)
      if (lane.delay == delay) {
        lane.timers.push_back(t);
        return;
      }
    if (lanes_.size() < kMostLanes) {
      lanes_.push_back(Lane{delay, {t}, 0});
      return;
    }
    rest_.push(t);
  }
  bool empty() const { return count_ == 0; }
  // The next due (not empty()).
  const Timer& top() const {
    if (next_ == kUnknown) {
      next_ = kRest;
      const Timer* best = rest_.empty() ? nullptr : &rest_.top();
      for (size_t l = 0; l < lanes_.size(); ++l) {
        const Lane& lane = lanes_[l];
        if (lane.head == lane.timers.size()) continue;
        const Timer& first = lane.timers[lane.head];
        if (best == nullptr || *best > first) {
          best = &first;
          next_ = static_cast<int>(l);
        }
      }
    }
    if (next_ == kRest) return rest_.top();
    const Lane& lane = lanes_[static_cast<size_t>(next_)];
    return lane.timers[lane.head];
  }
  void pop() {
    top();
    --count_;
    if (next_ == kRest) {
      rest_.pop();
    } else {
      Lane& lane = lanes_[static_cast<size_t>(next_)];
      if (++lane.head == lane.timers.size()) {
        lane.timers.clear();
        lane.head = 0;
      } else if (lane.head >= 1024 && 2 * lane.head >= lane.timers.size()) {
        lane.timers.erase(lane.timers.begin(),
                          lane.timers.begin() + static_cast<std::ptrdiff_t>(lane.head));
        lane.head = 0;
      }
    }
    next_ = kUnknown;
  }

 private:
  static constexpr size_t kMostLanes = 16;
  static constexpr int kUnknown = -1, kRest = -2;
  struct Lane {
    double delay;
    std::vector<Timer> timers;
    size_t head;  // the first not yet due
  };
  std::vector<Lane> lanes_;
  // Timers held, in the lanes and the rest (empty() is asked at every
  // event: summing the lanes' sizes there was 9 % of the instructions).
  size_t count_ = 0;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> rest_;
  uint64_t seq_ = 0;
  mutable int next_ = kUnknown;  // top()'s lane, kRest, or not known
};

// Ids (links, routes) by a key, least first (ties: the lower id), each at
// most once: a key changes in place. computeRates' links by fair share,
// which changes as the routes over them are fixed, and the routes by when
// their next flow is done. (Heaps of (key, id) entries, a new one per
// change and the old ones skipped when popped, popped two stale entries
// for every live one on 4 x MI250's reduce-scatter, and the finishes'
// heap was a sixth of its simulation.)
class IdHeap {
 public:
  void resize(size_t ids) { place_.assign(ids, -1); }
  bool empty() const { return heap_.empty(); }
  // The least key and its id (not empty()).
  std::pair<double, int> top() const { return {heap_.front().key, heap_.front().id}; }
  bool holds(int id) const { return place_[static_cast<size_t>(id)] >= 0; }
  // Id `id` with key `key`, whether held or not.
  void set(int id, double key) {
    if (holds(id)) {
      const auto i = static_cast<size_t>(place_[static_cast<size_t>(id)]);
      const bool sooner = key < heap_[i].key;
      heap_[i].key = key;
      sooner ? up(i) : down(i);
      return;
    }
    heap_.push_back({key, id});
    up(heap_.size() - 1);
  }
  // Adds the ids (none in it) whose key is not negative, then orders them.
  template <typename Key>
  void build(const std::vector<int>& ids, Key keyOf) {
    for (int id : ids)
      if (const double k = keyOf(id); k >= 0) {
        place_[static_cast<size_t>(id)] = static_cast<int>(heap_.size());
        heap_.push_back({k, id});
      }
    for (size_t i = heap_.size() / 2; i-- > 0;) down(i);
  }
  // The least key's id, taken out.
  std::pair<double, int> pop() {
    const auto out = top();
    remove(out.second);
    return out;
  }
  // Takes id `id` out, if held.
  void remove(int id) {
    if (!holds(id)) return;
    auto i = static_cast<size_t>(place_[static_cast<size_t>(id)]);
    place_[static_cast<size_t>(id)] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == heap_.size()) return;
    // (As std::pop_heap: the hole down to a leaf by the lesser child, one
    // comparison a level where sifting `last` down takes two, then `last`
    // up from there.)
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= heap_.size()) break;
      if (c + 1 < heap_.size() && before(heap_[c + 1], heap_[c])) ++c;
      put(i, heap_[c]);
      i = c;
    }
    heap_[i] = last;
    up(i);
  }

 private:
  // The key beside its id, so that sifting reads one array.
  struct Entry {
    double key;
    int id;
  };
  static bool before(const Entry& a, const Entry& b) {
    return a.key != b.key ? a.key < b.key : a.id < b.id;
  }
  void put(size_t i, const Entry& e) {
    heap_[i] = e;
    place_[static_cast<size_t>(e.id)] = static_cast<int>(i);
  }
  void up(size_t i) {
    const Entry e = heap_[i];
    for (; i > 0 && before(e, heap_[(i - 1) / 2]); i = (i - 1) / 2) put(i, heap_[(i - 1) / 2]);
    put(i, e);
  }
  void down(size_t i) {
    const Entry e = heap_[i];
    for (;;) {
      size_t c = 2 * i + 1;
      if (c >= heap_.size()) break;
      if (c + 1 < heap_.size() && before(heap_[c + 1], heap_[c])) ++c;
      if (!before(heap_[c], e)) break;
      put(i, heap_[c]);
      i = c;
    }
    put(i, e);
  }
  std::vector<Entry> heap_;
  std::vector<int> place_;  // per id: its index in heap_, or -1
};

// std::greater of (time or bytes, id) pairs, in plain comparisons (above).
struct Later {
  bool operator()(const std::pair<double, int>& a, const std::pair<double, int>& b) const {
    return a.first != b.first ? a.first > b.first : a.second > b.second;
  }
};

class Engine {
 public:
  Engine(const ir::Algorithm& a, const topo::Topology& t, const Options& o) : a_(a), t_(t), o_(o) {}
  chorus::Status run(Result& out);

 private:
  chorus::Status setup(Result& out);
  // The iteration whose slice the current step moves (ir::Step::lag: its
  // instance's iterations `lag` before the loop's); none (SIZE_MAX) before
  // the first or past the last.
  size_t sliceOf(const Tb& tb) const {
    const size_t back = static_cast<size_t>(o_.instances) * tb.lag;
    return tb.iter < back || tb.iter - back >= iterations_ ? SIZE_MAX : tb.iter - back;
  }
  // Elements of a chunk in the current step's slice (0: it moves none).
  size_t sliceElems(const Tb& tb) const {
    const size_t at = sliceOf(tb);
    return at == SIZE_MAX ? 0 : slicing_.sliceLen(at);
  }
  // A step moves its slice in parts (none empty), each forwarded on its own.
  size_t partsOf(const Tb& tb) const { return std::min(parts_, sliceElems(tb)); }
  size_t bytesOf(const Tb& tb) const {
    size_t elems = sliceElems(tb), parts = partsOf(tb);
    size_t each = (elems + parts - 1) / parts;
    size_t mine = std::min(each, elems - std::min(elems, tb.part * each));
    return static_cast<size_t>(tb.count) * mine * o_.elementSize;
  }
  // Copies the fields of the step at tb.pos the event loop reads into tb.
  void enter(Tb& tb) const {
    if (tb.pos >= tb.nsteps) return;  // none (an empty threadblock)
    const ir::Step& s = tb.steps[tb.pos];
    tb.type = s.type;
    tb.depPlace = s.depTb >= 0 ? placeOf(tb.rank, s.depTb) : -1;
    tb.depStep = s.depStep;
    tb.count = s.count;
    tb.lag = s.lag;
  }
  // A threadblock's local copies and reductions at the rank's memory
  // bandwidth, shared by its instances (which run alike at once).
  double localCost(size_t bytes) const {
    return t_.memoryBandwidth > 0
               ? static_cast<double>(bytes) * o_.instances / (t_.memoryBandwidth * 1e9)
               : 0;
  }
  size_t instance(const Tb& tb) const {
    return tb.iter * stepsPerIter_ + tb.base + static_cast<size_t>(tb.pos);
  }
  // A constraint of the current step was met at `time`: the latest one met
  // is what the step waited for.
  void satisfied(Tb& tb, size_t by, double time, Why why) {
    if (time < tb.blockTime) return;
    tb.blocker = by;
    tb.why = why;
    tb.blockTime = time;
  }
  void advance(int t);
  void complete(Tb& tb);
  void wake(Tb& tb);
  void startSend(int t);
  void finishFlow(Flow& f);
  void arrive(int conn);
  void computeRates();
  void fillRates();
  // New marks for computeRates' search (cleared when the count wraps).
  void nextEpoch() {
    if (++epoch_ != 0) return;
    std::fill(linkSeen_.begin(), linkSeen_.end(), 0);
    for (Route& route : routes_) route.seen = 0;
    epoch_ = 1;
  }
  void pruneLinks();
  // Brings route `r`'s served bytes, and its links' bytes and timeline, up
  // to now_ at the rate it had.
  void settle(Route& route);
  // Queues when route `r`'s first flow will be done, at its rate now.
  void scheduleFinish(int r);
  // A flow came to or left route `r` (settled): the rates are recomputed
  // before time moves on, unless every route ends up with the flows it had.
  void routeChanged(int r) {
    Route& route = routes_[static_cast<size_t>(r)];
    if (!route.changed) {
      route.changed = true;
      changed_.push_back(r);
    }
    ratesDirty_ = true;
  }
  void addTimer(double delay, int kind, int id) { timers_.push(now_, delay, kind, id); }
  // Adds bytes moving at `rate` from now_ to `until` to the timeline's
  // buckets they fall in.
  void spread(std::vector<double>& buckets, double rate, double from, double until) const {
    const double step = o_.timelineStep;
    for (double t = from; t < until;) {
      auto b = static_cast<size_t>(t / step);
      double end = std::min(until, static_cast<double>(b + 1) * step);
      if (end <= t) end = std::nextafter(t, until);  // rounding at a bucket's edge
      if (buckets.size() <= b) buckets.resize(b + 1, 0);
      buckets[b] += (end - t) * rate;
      t = end;
    }
  }

  const ir::Algorithm& a_;
  const topo::Topology& t_;
  const Options& o_;
  std::vector<Tb> tbs_;
  // Per threadblock, the next one waiting for the same step (Tb::waiters),
  // or kNotWaiting: dense, where the records' second lines are not.
  std::vector<int> nextWaiter_;
  // A threadblock's place among its instance's in tbs_ (instance i's
  // follow at i x tbsPerInstance_), by rank and id: one flat table, where a
  // table per rank and instance cost the event loop a cache miss more at
  // every dependency.
  std::vector<int> placeOf_;
  std::vector<std::pair<size_t, size_t>> rankIds_;  // per rank: its first in placeOf_, how many
  size_t tbsPerInstance_ = 0;
  // The place of `rank`'s threadblock `id`, -1 where there is none.
  int placeOf(int rank, int id) const {
    const auto [first, count] = rankIds_[static_cast<size_t>(rank)];
    return id >= 0 && static_cast<size_t>(id) < count ? placeOf_[first + static_cast<size_t>(id)]
                                                      : -1;
  }
  // Whether any step lags (ir::Step::lag): where none does, a dependency's
  // slice is the step's own, and its step is not read (a cache miss).
  bool lagged_ = false;
  std::vector<Connection> conns_;
  std::vector<Message> messages_;  // keepPath_: per connection, its last `slots` messages
  Message& message(const Connection& c, size_t seq) {
    const auto slots = static_cast<size_t>(o_.slots);
    return messages_[static_cast<size_t>(&c - conns_.data()) * slots + seq % slots];
  }
  std::vector<Route> routes_;
  std::vector<int> changed_;  // routes whose flows came or went since computeRates
  // Per link that can bind, the routes over it with flows (Route::place).
  std::vector<std::vector<int>> activeOn_;
  // Routes with flows by when their first flow is done (scheduleFinish).
  IdHeap finishes_;
  std::vector<Flow> flows_;     // moving bytes, in slots
  std::vector<int> freeFlows_;  // slots of flows_ free again
  TimerQueue timers_;
  std::vector<int> ready_;
  double now_ = 0;
  bool ratesDirty_ = false;
  ir::Slicing slicing_;  // the runtime's chunk and slice geometry (ir/slicing.h)
  size_t iterations_ = 0, stepsPerIter_ = 0, transfers_ = 0;
  size_t loopIterations_ = 0;  // the longest loop's (lags add to the slices')
  size_t parts_ = 1;
  double stepLatency_ = 0, overhead_ = 1;
  std::vector<double> linkBytes_, linkCap_;
  std::vector<std::vector<double>> timeline_;  // Options::timelineStep
  // computeRates' buffers, reused (per link, sized once): the routes and
  // links whose rates it recomputes, found from the changed ones.
  std::vector<int> count_, touched_, component_;
  std::vector<uint32_t> linkSeen_;
  uint32_t epoch_ = 0;
  std::vector<double> left_;
  IdHeap heap_;  // computeRates' links by fair share
  // Per step instance (iteration-major), for the critical path and trace.
  bool keepPath_ = false;
  std::vector<double> startOf_, endOf_;
  std::vector<uint32_t> predOf_;  // kNoStep for none (instances fit: keepPath_)
  std::vector<Why> whyOf_;
  nlohmann::json events_ = nlohmann::json::array();
  std::vector<ir::StepInstance> order_;
};

chorus::Status Engine::setup(Result& out) {
  const int n = a_.ngpus;
  auto counted = callCount(a_, t_, o_);
  if (!counted.isOk()) return counted.status();
  const size_t count = counted.value(), m = ir::countMultiplier(a_);
  out.count = count;
  size_t slice = o_.sliceBytes > 0 ? o_.sliceBytes : ir::sliceBytesOf(a_);
  slicing_ =
      ir::Slicing::make(o_.elementSize, count * m, static_cast<size_t>(a_.nchunksPerLoop), slice);
  slicing_.splitForInstances(static_cast<size_t>(o_.instances));
  iterations_ = slicing_.iterations;
  const ir::Protocol layout = layoutOf(a_, o_);
  parts_ = o_.partsPerSlice > 0 ? o_.partsPerSlice : defaultPartsPerSlice(layout);
  if (parts_ > UINT16_MAX)  // (Tb::part)
    return chorus::Status(
        StatusCode::kInvalidArgument,
        fmt::format("{} parts per slice: the simulator counts at most {}", parts_, UINT16_MAX));
  out.iterations = iterations_;
  stepLatency_ = o_.stepLatency >= 0 ? o_.stepLatency : protocolLatency(layout);
  overhead_ = protocolOverhead(layout);
  const int k = o_.instances;
  // Each threadblock's place within an instance, then every dependency
  // checked against them.
  rankIds_.assign(static_cast<size_t>(n), {0, 0});
  std::vector<const ir::Threadblock*> byPlace;
  for (const ir::Rank& r : a_.ranks) {
    int most = -1;
    for (const ir::Threadblock& irTb : r.tbs) {
      if (irTb.id < 0)
        return chorus::Status(StatusCode::kInvalidArgument,
                              fmt::format("rank {}: a threadblock's id is {}", r.id, irTb.id));
      most = std::max(most, irTb.id);
    }
    const size_t first = placeOf_.size();
    rankIds_[static_cast<size_t>(r.id)] = {first, static_cast<size_t>(most + 1)};
    placeOf_.resize(first + static_cast<size_t>(most + 1), -1);
    for (const ir::Threadblock& irTb : r.tbs) {
      placeOf_[first + static_cast<size_t>(irTb.id)] = static_cast<int>(byPlace.size());
      byPlace.push_back(&irTb);
    }
  }
  tbsPerInstance_ = byPlace.size();
  for (const ir::Rank& r : a_.ranks)
    for (const ir::Threadblock& irTb : r.tbs)
      for (size_t i = 0; i < irTb.steps.size(); ++i) {
        const ir::Step& s = irTb.steps[i];
        if (s.depTb < 0) continue;
        const int place = placeOf(r.id, s.depTb);
        if (place < 0 || s.depStep < 0 ||
            static_cast<size_t>(s.depStep) >= byPlace[static_cast<size_t>(place)]->steps.size())
          return chorus::Status(StatusCode::kInvalidArgument,
                                fmt::format("rank {} tb {} step {}: it depends on tb {} step {}, "
                                            "which does not exist",
                                            r.id, irTb.id, i, s.depTb, s.depStep));
      }
  // (from, to, channel, instance): each instance has connections of its own.
  std::map<std::tuple<int, int, int, int>, int> connOf;
  auto connection = [&](int from, int to, int channel, int instance) {
    auto [it, fresh] =
        connOf.try_emplace({from, to, channel, instance}, static_cast<int>(conns_.size()));
    if (fresh) conns_.emplace_back();
    return it->second;
  };
  for (int inst = 0; inst < k; ++inst) {
    size_t base = 0;  // the same step ids in every instance (their iterations differ)
    for (const ir::Rank& r : a_.ranks)
      for (const ir::Threadblock& irTb : r.tbs) {
        Tb tb;
        tb.rank = r.id;
        tb.index = irTb.id;
        tb.instance = inst;
        // (Past `end`, iter goes up by k once more: it must not wrap.)
        const size_t end = iterations_ + static_cast<size_t>(k) * irTb.maxLag();
        if (const size_t most = UINT32_MAX - static_cast<size_t>(k); end > most)
          return chorus::Status(
              StatusCode::kInvalidArgument,
              fmt::format("a call of {} slice iterations: the simulator counts at most {}", end,
                          most));
        tb.iter = static_cast<uint32_t>(inst);
        tb.end = static_cast<uint32_t>(end);
        lagged_ = lagged_ || irTb.maxLag() > 0;
        loopIterations_ = std::max(loopIterations_, end);
        tb.steps = irTb.steps.data();
        tb.nsteps = static_cast<int>(irTb.steps.size());
        tb.base = base;
        base += irTb.steps.size();
        enter(tb);
        int me = static_cast<int>(tbs_.size());
        if (irTb.sendPeer >= 0) {
          tb.sendConn = connection(r.id, irTb.sendPeer, irTb.channel, inst);
          conns_[static_cast<size_t>(tb.sendConn)].senderTb = me;
        }
        if (irTb.recvPeer >= 0) {
          tb.recvConn = connection(irTb.recvPeer, r.id, irTb.channel, inst);
          conns_[static_cast<size_t>(tb.recvConn)].receiverTb = me;
        }
        tbs_.push_back(tb);
      }
    stepsPerIter_ = base;
  }
  nextWaiter_.assign(tbs_.size(), kNotWaiting);
  std::map<std::pair<int, int>, int> routeOf;  // (from, to)
  for (auto& [key, id] : connOf) {
    auto [from, to, channel, inst] = key;
    (void)channel;
    (void)inst;
    Connection& c = conns_[static_cast<size_t>(id)];
    auto [it, fresh] = routeOf.try_emplace({from, to}, static_cast<int>(routes_.size()));
    c.route = it->second;
    if (fresh) {
      auto route = routeLinks(t_, from, to);
      if (!route.isOk()) return route.status();
      routes_.emplace_back().links = std::move(route).value();
    }
    for (int l : routes_[static_cast<size_t>(c.route)].links)
      if (static_cast<size_t>(l) < t_.links.size())
        c.latency += t_.links[static_cast<size_t>(l)].latency;
  }
  const size_t all = t_.links.size() + 2 * static_cast<size_t>(n);
  linkBytes_.assign(all, 0);
  if (o_.timelineStep > 0) timeline_.assign(t_.links.size(), {});
  linkCap_ = capacities(t_, n);
  count_.assign(all, 0);
  left_.assign(all, 0);
  heap_.resize(all);
  finishes_.resize(routes_.size());
  linkSeen_.assign(all, 0);
  activeOn_.assign(all, {});
  pruneLinks();
  size_t instances = stepsPerIter_ * loopIterations_;
  keepPath_ = (o_.criticalPath || o_.trace || o_.stepTimes) && instances <= kMostPathInstances;
  if (keepPath_) {
    startOf_.assign(instances, 0);
    endOf_.assign(instances, -1);
    predOf_.assign(instances, kNoStep);
    whyOf_.assign(instances, Why::kStart);
    messages_.resize(conns_.size() * static_cast<size_t>(o_.slots));
  }
  return chorus::Status::ok();
}

bool stepDone(const Tb& tb, size_t iter, int step) {
  return tb.done || tb.iter > iter || (tb.iter == iter && tb.pos > step);
}

void Engine::advance(int t) {
  Tb& tb = tbs_[static_cast<size_t>(t)];
  while (!tb.done && !tb.busy) {
    const size_t slice = sliceOf(tb);
    if (slice == SIZE_MAX) {  // a lagged step with no slice here: nothing to wait for or move
      complete(tb);
      continue;
    }
    if (tb.depPlace >= 0) {
      Tb& dep = tbs_[static_cast<size_t>(tb.instance) * tbsPerInstance_ +
                     static_cast<size_t>(tb.depPlace)];
      // Its iteration of the same slice.
      const size_t at =
          slice + (lagged_ ? static_cast<size_t>(o_.instances) * dep.steps[tb.depStep].lag : 0);
      if (!stepDone(dep, at, tb.depStep)) {
        // (Woken for something else, it may be listed already: a
        // threadblock waits for one step at a time, and is listed once.)
        if (int& next = nextWaiter_[static_cast<size_t>(t)]; next == kNotWaiting) {
          next = dep.waiters;
          dep.waiters = t;
        }
        return;
      }
      if (keepPath_) {
        size_t di = at * stepsPerIter_ + dep.base + static_cast<size_t>(tb.depStep);
        satisfied(tb, di, endOf_[di], Why::kDependency);
      }
    }
    if (ir::receives(tb.type) && !tb.recvDone) {
      Connection& c = conns_[static_cast<size_t>(tb.recvConn)];
      if (c.arrived <= c.consumed) return;  // woken by the arrival
      size_t seq = c.consumed++;
      if (keepPath_) {
        Message& m = message(c, seq);
        satisfied(tb, m.sender, m.arrivedAt, Why::kData);
        m.consumer = instance(tb);
      }
      tb.recvDone = true;
      double cost = localCost(bytesOf(tb));
      if (cost > 0) {
        tb.busy = true;
        addTimer(cost, 0, t);
        return;
      }
    }
    if (ir::sends(tb.type)) {
      startSend(t);
      return;
    }
    if (!ir::receives(tb.type) && tb.type != ir::StepType::kNop) {
      double cost = localCost(bytesOf(tb));
      if (cost > 0 && !tb.recvDone) {
        tb.recvDone = true;  // the local work is under way
        tb.busy = true;
        addTimer(cost, 0, t);
        return;
      }
    }
    complete(tb);
  }
}

void Engine::startSend(int t) {
  Tb& tb = tbs_[static_cast<size_t>(t)];
  Connection& c = conns_[static_cast<size_t>(tb.sendConn)];
  if (c.sent - c.released >= static_cast<size_t>(o_.slots)) return;  // woken by a release
  if (keepPath_ && c.sent >= static_cast<size_t>(o_.slots)) {
    size_t k = c.sent - static_cast<size_t>(o_.slots);
    satisfied(tb, message(c, k).consumer, message(c, k).freedAt, Why::kSlot);
  }
  ++c.sent;
  ++transfers_;
  tb.busy = true;
  Flow f;
  f.conn = tb.sendConn;
  f.route = c.route;
  f.tb = t;
  if (keepPath_) f.instance = instance(tb);  // (base is in the record's second cache line)
  f.bytes = static_cast<double>(bytesOf(tb)) * overhead_;
  if (f.bytes <= 0) {
    finishFlow(f);
    return;
  }
  int slot;
  if (freeFlows_.empty()) {
    slot = static_cast<int>(flows_.size());
    flows_.push_back(f);
  } else {
    slot = freeFlows_.back();
    freeFlows_.pop_back();
    flows_[static_cast<size_t>(slot)] = f;
  }
  Route& r = routes_[static_cast<size_t>(f.route)];
  settle(r);
  r.due.emplace_back(r.served + f.bytes, slot);
  std::push_heap(r.due.begin(), r.due.end(), Later());
  ++r.flows;
  routeChanged(f.route);
}

void Engine::complete(Tb& tb) {
  if (ir::receives(tb.type) && sliceOf(tb) != SIZE_MAX) {
    // Its slot is free again.
    Connection& c = conns_[static_cast<size_t>(tb.recvConn)];
    if (keepPath_) message(c, c.released).freedAt = now_;
    // Its sender waits for this slot only where every slot was taken.
    const bool full = c.sent - c.released >= static_cast<size_t>(o_.slots);
    ++c.released;
    if (c.senderTb >= 0 && full) ready_.push_back(c.senderTb);
  }
  tb.recvDone = false;
  tb.busy = false;
  if (++tb.part < partsOf(tb)) return;  // the step's next part
  tb.part = 0;
  if (o_.recordOrder) order_.push_back(ir::StepInstance{tb.rank, tb.index, tb.pos, tb.iter});
  if (keepPath_) {
    size_t i = instance(tb);
    startOf_[i] = tb.stepStart;
    endOf_[i] = now_;
    whyOf_[i] = tb.why;
    predOf_[i] = tb.blocker == SIZE_MAX ? kNoStep : static_cast<uint32_t>(tb.blocker);
  }
  if (o_.trace) {
    events_.push_back(
        {{"name", std::string(ir::stepTypeName(tb.type))},
         {"ph", "X"},
         {"ts", tb.stepStart * 1e6},
         {"dur", (now_ - tb.stepStart) * 1e6},
         {"pid", tb.rank},
         // Instances of a threadblock on rows of their own.
         {"tid", tb.instance * static_cast<int>(a_.ranks[static_cast<size_t>(tb.rank)].tbs.size()) +
                     tb.index},
         {"args", {{"step", tb.pos}, {"iteration", tb.iter}, {"count", tb.count}}}});
  }
  if (keepPath_ || o_.trace) {
    tb.stepStart = now_;
    tb.blocker = instance(tb);
    tb.why = Why::kOrder;
    tb.blockTime = now_;
  }
  if (++tb.pos == tb.nsteps) {
    tb.pos = 0;
    tb.iter += static_cast<uint32_t>(o_.instances);
    if (tb.iter >= tb.end) tb.done = true;
  }
  enter(tb);
  wake(tb);
}

// The threadblocks waiting for a step of `tb` try again, in the order they
// came to wait.
void Engine::wake(Tb& tb) {
  if (tb.waiters < 0) return;
  const size_t first = ready_.size();
  for (int w = tb.waiters; w >= 0;) {
    ready_.push_back(w);
    int& next = nextWaiter_[static_cast<size_t>(w)];
    w = next;
    next = kNotWaiting;
  }
  std::reverse(ready_.begin() + static_cast<std::ptrdiff_t>(first), ready_.end());
  tb.waiters = -1;
}

// The sender's bytes have left: its step is done, the message arrives a
// latency later (the protocol's per-step latency and the route's links).
void Engine::finishFlow(Flow& f) {
  Connection& c = conns_[static_cast<size_t>(f.conn)];
  if (keepPath_) message(c, c.left).sender = f.instance;  // only the critical path reads it
  ++c.left;
  addTimer(stepLatency_ + c.latency, 1, f.conn);
  Tb& tb = tbs_[static_cast<size_t>(f.tb)];
  complete(tb);
  ready_.push_back(f.tb);
}

// A connection's messages arrive in the order they were sent (one latency
// each, one sender).
void Engine::arrive(int conn) {
  Connection& c = conns_[static_cast<size_t>(conn)];
  if (keepPath_) message(c, c.arrived).arrivedAt = now_;
  // Its receiver waits for this message only where it had taken every
  // other (it takes one as soon as it is at its receive).
  const bool awaited = c.arrived == c.consumed;
  ++c.arrived;
  if (c.receiverTb >= 0 && awaited) ready_.push_back(c.receiverTb);
}

// A link can limit a route's rate only if the routes over it could, all
// at once, ask for more than it carries. A route's flows together never
// move faster than its slowest other link that can bind, so a link whose
// capacity covers the sum of those minima over all its routes never fills,
// and max-min rates are the same without it: every route keeps a full
// link on which it has the largest rate. Leaving such links out (largest
// first, each judged against the links still in) splits the routes into
// small groups that share no link: an NVSwitch route inside a box is alone,
// and on a non-blocking fat tree so is a route over the NICs.
void Engine::pruneLinks() {
  const size_t all = linkCap_.size();
  std::vector<std::vector<int>> routesOn(all);
  for (size_t r = 0; r < routes_.size(); ++r)
    for (int l : routes_[r].links) routesOn[static_cast<size_t>(l)].push_back(static_cast<int>(r));
  std::vector<char> out(all, 0);
  if (o_.incrementalRates) {
    std::vector<int> order;
    for (size_t l = 0; l < all; ++l)
      if (!routesOn[l].empty()) order.push_back(static_cast<int>(l));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return linkCap_[static_cast<size_t>(a)] > linkCap_[static_cast<size_t>(b)];
    });
    for (int l : order) {
      double most = 0;  // what its routes could ask for at once
      for (int r : routesOn[static_cast<size_t>(l)]) {
        double least = kInf;
        for (int other : routes_[static_cast<size_t>(r)].links)
          if (other != l && !out[static_cast<size_t>(other)])
            least = std::min(least, linkCap_[static_cast<size_t>(other)]);
        most += least;  // kInf when it is the route's last link
      }
      if (most <= linkCap_[static_cast<size_t>(l)]) out[static_cast<size_t>(l)] = 1;
    }
  }
  for (Route& route : routes_) {
    for (int l : route.links)
      if (!out[static_cast<size_t>(l)]) route.binding.push_back(l);
    route.place.assign(route.binding.size(), -1);
  }
}

void Engine::settle(Route& route) {
  const double from = route.since, dt = now_ - from;
  route.since = now_;
  if (!(dt > 0) || route.flows == 0 || route.rate <= 0) return;
  route.served += route.rate * dt;
  const double rate = route.rate * route.flows;
  for (int l : route.links) {
    linkBytes_[static_cast<size_t>(l)] += rate * dt;
    if (static_cast<size_t>(l) < timeline_.size())
      spread(timeline_[static_cast<size_t>(l)], rate, from, now_);
  }
}

void Engine::scheduleFinish(int r) {
  Route& route = routes_[static_cast<size_t>(r)];
  if (route.flows == 0 || route.rate <= 0) {
    finishes_.remove(r);
    return;
  }
  const double left = route.due.front().first - route.served;
  finishes_.set(r, route.since + std::max(0.0, left) / route.rate);
}

// Max-min fair rates by progressive filling: the link with the smallest
// fair share fixes the rate of its flows, which leave the others. Per
// route, weighted by its flows (Route). Only the routes that share a
// binding link, directly or through others, with a route whose flows
// changed can get other rates: those are recomputed, the rest keep theirs.
void Engine::computeRates() {
  ratesDirty_ = false;
  nextEpoch();
  touched_.clear();
  component_.clear();
  auto reach = [&](int l) {
    if (linkSeen_[static_cast<size_t>(l)] == epoch_) return;
    linkSeen_[static_cast<size_t>(l)] = epoch_;
    touched_.push_back(l);
  };
  for (int r : changed_) {
    Route& route = routes_[static_cast<size_t>(r)];
    // A connection's next message often starts as its last one ends: the
    // same flows, the same rates.
    if (route.flows == route.flowsRated) continue;
    route.flowsRated = route.flows;
    if (route.flows > 0 && !route.listed) {
      route.listed = true;
      for (size_t i = 0; i < route.binding.size(); ++i) {
        auto& on = activeOn_[static_cast<size_t>(route.binding[i])];
        route.place[i] = static_cast<int>(on.size());
        on.push_back(r);
      }
    } else if (route.flows == 0 && route.listed) {
      route.listed = false;
      for (size_t i = 0; i < route.binding.size(); ++i) {
        const int l = route.binding[i];
        auto& on = activeOn_[static_cast<size_t>(l)];
        const int last = on.back(), at = route.place[i];
        on[static_cast<size_t>(at)] = last;
        on.pop_back();
        Route& moved = routes_[static_cast<size_t>(last)];
        for (size_t j = 0; j < moved.binding.size(); ++j)
          if (moved.binding[j] == l) moved.place[j] = at;
        route.place[i] = -1;
      }
    }
    for (int l : route.binding) reach(l);
  }
  if (!o_.incrementalRates && !touched_.empty()) {
    touched_.clear();  // every link with flows
    nextEpoch();
    for (size_t l = 0; l < activeOn_.size(); ++l)
      if (!activeOn_[l].empty()) reach(static_cast<int>(l));
  }
  // Everything the changed links reach, through routes with flows.
  for (size_t k = 0; k < touched_.size(); ++k)
    for (int r : activeOn_[static_cast<size_t>(touched_[k])]) {
      Route& route = routes_[static_cast<size_t>(r)];
      if (route.seen == epoch_) continue;
      route.seen = epoch_;
      component_.push_back(r);
      for (int l : route.binding) reach(l);
    }
  fillRates();
  for (int r : changed_) {
    routes_[static_cast<size_t>(r)].changed = false;
    scheduleFinish(r);
  }
  changed_.clear();
}

void Engine::fillRates() {
  // A route's rate is fixed at `share`.
  auto fix = [&](int r, Route& route, double share) {
    route.fixed = true;
    if (route.rate == share) return;
    settle(route);  // at the rate it had
    route.rate = share;
    if (!route.changed) scheduleFinish(r);  // changed ones are, after
  };
  // A route alone (most are, once pruneLinks has left out the links that
  // never fill): its binding links' least share.
  if (component_.size() == 1) {
    const int r = component_.front();
    Route& route = routes_[static_cast<size_t>(r)];
    double share = kInf;
    for (int l : route.binding)
      share = std::min(share, linkCap_[static_cast<size_t>(l)] / route.flows);
    fix(r, route, share);
    return;
  }
  for (int l : touched_) {
    count_[static_cast<size_t>(l)] = 0;
    left_[static_cast<size_t>(l)] = linkCap_[static_cast<size_t>(l)];
  }
  for (int r : component_) {
    Route& route = routes_[static_cast<size_t>(r)];
    route.fixed = false;
    for (int l : route.binding) count_[static_cast<size_t>(l)] += route.flows;
  }
  heap_.build(touched_, [&](int l) {
    const auto li = static_cast<size_t>(l);
    return count_[li] > 0 ? left_[li] / count_[li] : -1.0;
  });
  while (!heap_.empty()) {
    auto [share, l] = heap_.pop();
    for (int r : activeOn_[static_cast<size_t>(l)]) {
      Route& route = routes_[static_cast<size_t>(r)];
      if (route.fixed) continue;
      fix(r, route, share);
      for (int l2 : route.binding) {
        auto l2i = static_cast<size_t>(l2);
        left_[l2i] -= share * route.flows;
        count_[l2i] -= route.flows;
        if (!heap_.holds(l2)) continue;  // l itself
        if (count_[l2i] > 0)
          heap_.set(l2, left_[l2i] / count_[l2i]);
        else
          heap_.remove(l2);
      }
    }
  }
}

chorus::Status Engine::run(Result& out) {
  CHORUS_RETURN_IF_ERROR(setup(out));
  for (size_t t = 0; t < tbs_.size(); ++t) {
    if (tbs_[t].nsteps == 0 || tbs_[t].iter >= tbs_[t].end) tbs_[t].done = true;
    ready_.push_back(static_cast<int>(t));
  }
  for (uint64_t events = 1;; ++events) {
    if (events % 4096 == 0) {
      if (o_.deadline && std::chrono::steady_clock::now() > *o_.deadline)
        return chorus::Status(StatusCode::kTimeout, "the time budget was spent");
      if (o_.abort != nullptr && o_.abort->load(std::memory_order_relaxed))
        return chorus::Status(StatusCode::kAborted, "stopped by its caller");
    }
    while (!ready_.empty()) {
      int t = ready_.back();
      ready_.pop_back();
      advance(t);
    }
    if (ratesDirty_) computeRates();
    double next = timers_.empty() ? kInf : timers_.top().time;
    if (!finishes_.empty()) next = std::min(next, finishes_.top().first);
    if (next == kInf) break;
    now_ = std::max(now_, next);
    // Finished flows (within rounding), then every timer due now.
    while (!finishes_.empty() && finishes_.top().first <= now_ + kSameTime) {
      // (computeRates queues its next.)
      const int r = finishes_.pop().second;
      Route& route = routes_[static_cast<size_t>(r)];
      settle(route);
      for (bool first = true; !route.due.empty(); first = false) {
        const double left = route.due.front().first - route.served;
        if (!first && !(left <= 1e-6 || left / route.rate <= kSameTime)) break;
        const int slot = route.due.front().second;
        std::pop_heap(route.due.begin(), route.due.end(), Later());
        route.due.pop_back();
        --route.flows;
        freeFlows_.push_back(slot);
        Flow done = flows_[static_cast<size_t>(slot)];
        finishFlow(done);
      }
      routeChanged(r);
    }
    while (!timers_.empty() && timers_.top().time <= now_ + kSameTime) {
      Timer tm = timers_.top();
      timers_.pop();
      if (tm.kind == 0) {
        Tb& tb = tbs_[static_cast<size_t>(tm.id)];
        tb.busy = false;
        ready_.push_back(tm.id);
        if (!ir::sends(tb.type)) complete(tb);
      } else {
        arrive(tm.id);
      }
    }
  }
  for (const Tb& tb : tbs_)
    if (!tb.done) {
      const ir::Step& s = tb.steps[tb.pos];
      return chorus::Status(
          StatusCode::kDeadlock,
          "rank " + std::to_string(tb.rank) + " tb " + std::to_string(tb.index) +
              (o_.instances > 1 ? " instance " + std::to_string(tb.instance) : std::string()) +
              " step " + std::to_string(tb.pos) + " (" + std::string(ir::stepTypeName(s.type)) +
              ", iteration " + std::to_string(tb.iter) + ") waits forever with " +
              std::to_string(o_.slots) + " slot(s) per connection");
    }
  out.time = now_;
  out.transfers = transfers_;
  out.linkBytes.assign(linkBytes_.begin(),
                       linkBytes_.begin() + static_cast<std::ptrdiff_t>(t_.links.size()));
  out.order = std::move(order_);
  if (!timeline_.empty()) {
    size_t buckets = 0;
    for (const auto& b : timeline_) buckets = std::max(buckets, b.size());
    for (auto& b : timeline_) b.resize(buckets, 0);
    out.timeline = std::move(timeline_);
  }
  double bytes = static_cast<double>(out.count * ir::countMultiplier(a_) * o_.elementSize);
  out.algbw = now_ > 0 ? bytes / now_ / 1e9 : 0;
  out.busbw = out.algbw * busBandwidthFactor(a_.collective, a_.ngpus);
  if (keepPath_ && (o_.criticalPath || o_.stepTimes)) {
    std::vector<std::pair<int, int>> where(stepsPerIter_);  // instance -> (tb, step)
    for (size_t t = 0; t < tbs_.size(); ++t)
      for (int k = 0; k < tbs_[t].nsteps; ++k)
        where[tbs_[t].base + static_cast<size_t>(k)] = {static_cast<int>(t), k};
    auto pathStep = [&](size_t i) {
      auto [t, k] = where[i % stepsPerIter_];
      const Tb& tb = tbs_[static_cast<size_t>(t)];
      PathStep p{tb.rank,          tb.index,    k,         static_cast<int>(i / stepsPerIter_),
                 tb.steps[k].type, startOf_[i], endOf_[i], whyName(whyOf_[i])};
      if (size_t by = predOf_[i]; by != kNoStep) {
        auto [bt, bk] = where[by % stepsPerIter_];
        p.byRank = tbs_[static_cast<size_t>(bt)].rank;
        p.byTb = tbs_[static_cast<size_t>(bt)].index;
        p.byStep = bk;
        p.byIteration = static_cast<int>(by / stepsPerIter_);
      }
      return p;
    };
    if (o_.criticalPath) {
      size_t last = SIZE_MAX;
      double end = -1;
      for (size_t i = 0; i < endOf_.size(); ++i)
        if (endOf_[i] > end) {
          end = endOf_[i];
          last = i;
        }
      std::vector<PathStep> path;
      for (size_t i = last; i != SIZE_MAX && path.size() < endOf_.size();
           i = predOf_[i] == kNoStep ? SIZE_MAX : predOf_[i])
        path.push_back(pathStep(i));
      std::reverse(path.begin(), path.end());
      out.critical = std::move(path);
    }
    if (o_.stepTimes) {
      // tbs_ is in the algorithm's order, so instances of the first
      // iteration are too (base counts steps in that order).
      out.steps.reserve(stepsPerIter_);
      for (size_t i = 0; i < stepsPerIter_; ++i) out.steps.push_back(pathStep(i));
    }
  }
  if (o_.trace) {
    for (int r = 0; r < a_.ngpus; ++r)
      events_.push_back({{"name", "process_name"},
                         {"ph", "M"},
                         {"pid", r},
                         {"args", {{"name", "rank " + std::to_string(r)}}}});
    out.trace = nlohmann::json{{"traceEvents", events_}, {"displayTimeUnit", "ns"}}.dump();
  }
  return chorus::Status::ok();
}

}  // namespace

chorus::Result<Result> simulate(const ir::Algorithm& algo, const topo::Topology& topo,
                                const Options& options) {
  if (options.slots < 1 || options.elementSize < 1)
    return chorus::Status(StatusCode::kInvalidArgument, "slots and element size must be >= 1");
  if (options.instances < 1 || options.instances > ir::kMostInstances)
    return chorus::Status(StatusCode::kInvalidArgument,
                          "instances must be in [1, " + std::to_string(ir::kMostInstances) + "]");
  if (!(options.timelineStep >= 0))
    return chorus::Status(StatusCode::kInvalidArgument, "the timeline's step must be >= 0");
  Engine e(algo, topo, options);
  Result out;
  chorus::Status st = e.run(out);
  if (!st.isOk()) return st;
  return out;
}

chorus::Result<double> linkBound(const ir::Algorithm& algo, const topo::Topology& topo,
                                 const Options& options) {
  if (options.elementSize < 1)
    return chorus::Status(StatusCode::kInvalidArgument, "the element size must be >= 1");
  auto count = callCount(algo, topo, options);
  if (!count.isOk()) return count.status();
  const size_t m = ir::countMultiplier(algo);
  // Every send moves its `count` chunks of each rank's whole call once,
  // whatever the slices, instances and lags (ir::Slicing).
  const double chunkBytes =
      static_cast<double>(count.value() * m / static_cast<size_t>(algo.nchunksPerLoop) *
                          options.elementSize) *
      protocolOverhead(layoutOf(algo, options));
  const std::vector<double> cap = capacities(topo, algo.ngpus);
  std::vector<double> load(cap.size(), 0);
  std::map<std::pair<int, int>, std::vector<int>> routes;
  for (const ir::Rank& r : algo.ranks)
    for (const ir::Threadblock& tb : r.tbs) {
      if (tb.sendPeer < 0) continue;
      double bytes = 0;
      for (const ir::Step& s : tb.steps)
        if (ir::sends(s.type)) bytes += s.count * chunkBytes;
      if (bytes == 0) continue;
      auto [it, fresh] = routes.try_emplace({r.id, tb.sendPeer});
      if (fresh) {
        auto route = routeLinks(topo, r.id, tb.sendPeer);
        if (!route.isOk()) return route.status();
        it->second = std::move(route).value();
      }
      for (int l : it->second) load[static_cast<size_t>(l)] += bytes;
    }
  double time = 0;  // seconds, at least
  for (size_t l = 0; l < cap.size(); ++l)
    if (load[l] > 0) time = std::max(time, load[l] / cap[l]);
  return time > 0 ? static_cast<double>(count.value() * m * options.elementSize) / time / 1e9
                  : kInf;
}

std::vector<double> fastestByBound(const std::vector<const ir::Algorithm*>& algos,
                                   const topo::Topology& topo, const Options& options, int threads,
                                   std::chrono::steady_clock::duration each) {
  std::vector<double> bound(algos.size(), 0), algbw(algos.size(), 0);
  std::vector<size_t> order;
  for (size_t i = 0; i < algos.size(); ++i)
    if (auto b = linkBound(*algos[i], topo, options); b.isOk()) {
      bound[i] = b.value();
      order.push_back(i);
    }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bound[a] > bound[b]; });
  double best = 0;
  for (size_t next = 0; next < order.size();) {
    if (options.deadline && std::chrono::steady_clock::now() > *options.deadline && best > 0) break;
    std::vector<size_t> round;
    const size_t most = next == 0 ? 1 : static_cast<size_t>(std::max(1, threads));
    // (A little over the best: a simulation cannot round past its bound.)
    for (; next < order.size() && round.size() < most && bound[order[next]] * (1 + 1e-9) >= best;
         ++next)
      round.push_back(order[next]);
    if (round.empty()) break;
    parallelFor(round.size(), static_cast<int>(round.size()), [&](size_t k) {
      Options o = options;
      o.deadline = std::chrono::steady_clock::now() + each;
      if (options.deadline) o.deadline = std::min(*o.deadline, *options.deadline);
      if (auto r = simulate(*algos[round[k]], topo, o); r.isOk()) algbw[round[k]] = r.value().algbw;
    });
    for (size_t i : round) best = std::max(best, algbw[i]);
  }
  return algbw;
}

}  // namespace chorus::sim
