#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>

#include "ir/slicing.h"

namespace chorus::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Events this close (seconds) are one: flows that end a picosecond apart
// would otherwise each cost a recomputation of every rate.
constexpr double kSameTime = 1e-12;

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

enum class Why : uint8_t { kStart, kOrder, kDependency, kData, kSlot };
const char* whyName(Why w) {
  static const char* names[] = {"start", "order", "dependency", "data", "slot"};
  return names[static_cast<int>(w)];
}

struct Connection {
  int senderTb = -1, receiverTb = -1;
  int route = -1;      // Engine::routes_: its links, then the ranks' caps
  double latency = 0;  // the route's links
  // Messages sent, arrived, taken by their receive step, and whose receive
  // step has finished (its slot is free again then, as in the runtime).
  size_t sent = 0, arrived = 0, consumed = 0, released = 0;
  // Messages arrive in the order they were sent (one sender, one latency).
  std::vector<size_t> senders;    // message seq -> step instance that sent it
  std::vector<double> arrivedAt;  // message seq -> when it arrived
  std::vector<size_t> consumers;  // message seq -> step instance that consumed it
  std::vector<double> freedAt;    // message seq -> when its slot was freed
};

struct Tb {
  int rank = 0, index = 0;
  const ir::Threadblock* ir = nullptr;
  size_t base = 0;  // first step instance id of iteration 0
  size_t iter = 0;
  int pos = 0;
  size_t part = 0;  // of the current step's slice (Options::partsPerSlice)
  bool recvDone = false, busy = false, done = false;
  int sendConn = -1, recvConn = -1;
  double stepStart = 0;
  // What let the current step go on last, and when.
  size_t blocker = SIZE_MAX;
  Why why = Why::kStart;
  double blockTime = 0;
  std::vector<int> waiters;  // tbs waiting for a step of this one
};

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
// its target, the first of them at the top of `due`.
struct Route {
  std::vector<int> links;  // then the ranks' caps (ids past the links)
  int flows = 0;           // moving now
  int flowsRated = 0;      // when the rates were computed last
  bool listed = false;     // in Engine::active_
  bool changed = false;    // in Engine::changed_
  bool fixed = false;      // computeRates
  double rate = 0;         // per flow
  double served = 0;       // bytes per flow since the start
  // (served at which it is done, flow slot), a min-heap.
  std::vector<std::pair<double, int>> due;
};

struct Timer {
  double time;
  uint64_t seq;
  int kind;  // 0: local work done (tb), 1: a message arrives (connection)
  int id;
  bool operator>(const Timer& o) const { return std::tie(time, seq) > std::tie(o.time, o.seq); }
};

class Engine {
 public:
  Engine(const ir::Algorithm& a, const topo::Topology& t, const Options& o) : a_(a), t_(t), o_(o) {}
  chorus::Status run(Result& out);

 private:
  chorus::Status setup(Result& out);
  // Elements of a chunk in the threadblock's current slice iteration.
  size_t sliceElems(const Tb& tb) const { return slicing_.sliceLen(tb.iter); }
  // A step moves its slice in parts (none empty), each forwarded on its own.
  size_t partsOf(const Tb& tb) const { return std::min(parts_, sliceElems(tb)); }
  size_t bytesOf(const Tb& tb, const ir::Step& s) const {
    size_t elems = sliceElems(tb), parts = partsOf(tb);
    size_t each = (elems + parts - 1) / parts;
    size_t mine = std::min(each, elems - std::min(elems, tb.part * each));
    return static_cast<size_t>(s.count) * mine * o_.elementSize;
  }
  double localCost(size_t bytes) const {
    return t_.memoryBandwidth > 0 ? static_cast<double>(bytes) / (t_.memoryBandwidth * 1e9) : 0;
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
  void startSend(int t);
  void finishFlow(Flow& f);
  void arrive(int conn);
  void computeRates();
  // A flow came to or left route `r`: the rates are recomputed before time
  // moves on, unless every route ends up with the flows it had.
  void routeChanged(int r) {
    Route& route = routes_[static_cast<size_t>(r)];
    if (!route.changed) {
      route.changed = true;
      changed_.push_back(r);
    }
    ratesDirty_ = true;
  }
  void addTimer(double at, int kind, int id) { timers_.push(Timer{at, seq_++, kind, id}); }
  // Adds bytes moving at `rate` from now_ to `until` to the timeline's
  // buckets they fall in.
  void spread(std::vector<double>& buckets, double rate, double until) const {
    const double step = o_.timelineStep;
    for (double t = now_; t < until;) {
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
  std::vector<std::vector<int>> tbOf_;  // [rank][tb id] -> tbs_ index
  std::vector<Connection> conns_;
  std::vector<Route> routes_;
  std::vector<int> active_;     // routes with flows (or had, since computeRates)
  std::vector<int> changed_;    // routes whose flows came or went since computeRates
  std::vector<Flow> flows_;     // moving bytes, in slots
  std::vector<int> freeFlows_;  // slots of flows_ free again
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  uint64_t seq_ = 0;
  std::vector<int> ready_;
  double now_ = 0;
  bool ratesDirty_ = false;
  ir::Slicing slicing_;  // the runtime's chunk and slice geometry (ir/slicing.h)
  size_t iterations_ = 0, stepsPerIter_ = 0, transfers_ = 0;
  size_t parts_ = 1;
  double stepLatency_ = 0, overhead_ = 1;
  std::vector<double> linkBytes_, linkCap_;
  std::vector<std::vector<double>> timeline_;  // Options::timelineStep
  // computeRates' buffers, reused (per link, sized once).
  std::vector<int> count_, touched_, onLink_;
  std::vector<size_t> first_, fill_;
  std::vector<double> left_;
  std::vector<std::pair<double, int>> heap_;
  // Per step instance (iteration-major), for the critical path and trace.
  bool keepPath_ = false;
  std::vector<double> startOf_, endOf_;
  std::vector<size_t> predOf_;
  std::vector<Why> whyOf_;
  nlohmann::json events_ = nlohmann::json::array();
  std::vector<ir::StepInstance> order_;
};

chorus::Status Engine::setup(Result& out) {
  const int n = a_.ngpus;
  if (n > t_.ranks())
    return chorus::Status(StatusCode::kInvalidArgument, "the algorithm has " + std::to_string(n) +
                                                            " ranks; topology '" + t_.name +
                                                            "' has " + std::to_string(t_.ranks()));
  size_t m = ir::countMultiplier(a_), quantum = ir::countQuantum(a_);
  size_t count = o_.bytes / (o_.elementSize * m) / quantum * quantum;
  if (count == 0)
    return chorus::Status(StatusCode::kInvalidArgument,
                          std::to_string(o_.bytes) + " bytes is below the smallest call " +
                              a_.name + " serves (" + std::to_string(quantum * m * o_.elementSize) +
                              " bytes)");
  out.count = count;
  size_t slice = o_.sliceBytes > 0 ? o_.sliceBytes : ir::defaultSliceBytes(a_.protocol);
  slicing_ =
      ir::Slicing::make(o_.elementSize, count * m, static_cast<size_t>(a_.nchunksPerLoop), slice);
  iterations_ = slicing_.iterations;
  parts_ = o_.partsPerSlice > 0 ? o_.partsPerSlice : defaultPartsPerSlice(a_.protocol);
  out.iterations = iterations_;
  stepLatency_ = o_.stepLatency >= 0 ? o_.stepLatency : protocolLatency(a_.protocol);
  overhead_ = protocolOverhead(a_.protocol);
  tbOf_.assign(static_cast<size_t>(n), {});
  std::map<std::tuple<int, int, int>, int> connOf;  // (from, to, channel)
  auto connection = [&](int from, int to, int channel) {
    auto [it, fresh] = connOf.try_emplace({from, to, channel}, static_cast<int>(conns_.size()));
    if (fresh) conns_.emplace_back();
    return it->second;
  };
  for (const ir::Rank& r : a_.ranks)
    for (const ir::Threadblock& irTb : r.tbs) {
      Tb tb;
      tb.rank = r.id;
      tb.index = irTb.id;
      tb.ir = &irTb;
      tb.base = stepsPerIter_;
      stepsPerIter_ += irTb.steps.size();
      int me = static_cast<int>(tbs_.size());
      if (irTb.sendPeer >= 0) {
        tb.sendConn = connection(r.id, irTb.sendPeer, irTb.channel);
        conns_[static_cast<size_t>(tb.sendConn)].senderTb = me;
      }
      if (irTb.recvPeer >= 0) {
        tb.recvConn = connection(irTb.recvPeer, r.id, irTb.channel);
        conns_[static_cast<size_t>(tb.recvConn)].receiverTb = me;
      }
      auto& ids = tbOf_[static_cast<size_t>(r.id)];
      if (ids.size() <= static_cast<size_t>(irTb.id))
        ids.resize(static_cast<size_t>(irTb.id) + 1, -1);
      ids[static_cast<size_t>(irTb.id)] = me;
      tbs_.push_back(tb);
    }
  std::map<std::pair<int, int>, int> routeOf;  // (from, to)
  for (auto& [key, id] : connOf) {
    auto [from, to, channel] = key;
    Connection& c = conns_[static_cast<size_t>(id)];
    auto [it, fresh] = routeOf.try_emplace({from, to}, static_cast<int>(routes_.size()));
    c.route = it->second;
    if (fresh) {
      std::vector<int> route = t_.route(from, to);
      if (route.empty())
        return chorus::Status(StatusCode::kInvalidArgument,
                              "rank " + std::to_string(from) + " cannot reach rank " +
                                  std::to_string(to) + " on topology '" + t_.name + "'");
      // A rank's caps act as one more link its flows out (in) all cross.
      const int links = static_cast<int>(t_.links.size());
      if (t_.nodes[static_cast<size_t>(t_.nodeOfRank(from))].sendCap > 0)
        route.push_back(links + 2 * from);
      if (t_.nodes[static_cast<size_t>(t_.nodeOfRank(to))].recvCap > 0)
        route.push_back(links + 2 * to + 1);
      routes_.emplace_back().links = std::move(route);
    }
    for (int l : routes_[static_cast<size_t>(c.route)].links)
      if (static_cast<size_t>(l) < t_.links.size())
        c.latency += t_.links[static_cast<size_t>(l)].latency;
  }
  const size_t all = t_.links.size() + 2 * static_cast<size_t>(n);
  linkBytes_.assign(all, 0);
  if (o_.timelineStep > 0) timeline_.assign(t_.links.size(), {});
  linkCap_.resize(all);
  count_.assign(all, 0);
  first_.assign(all, 0);
  fill_.assign(all, 0);
  left_.assign(all, 0);
  for (size_t l = 0; l < t_.links.size(); ++l) linkCap_[l] = t_.links[l].bandwidth * 1e9;
  for (int r = 0; r < n; ++r) {
    const topo::Node& node = t_.nodes[static_cast<size_t>(t_.nodeOfRank(r))];
    linkCap_[t_.links.size() + 2 * static_cast<size_t>(r)] = node.sendCap * 1e9;
    linkCap_[t_.links.size() + 2 * static_cast<size_t>(r) + 1] = node.recvCap * 1e9;
  }
  size_t instances = stepsPerIter_ * iterations_;
  keepPath_ = (o_.criticalPath || o_.trace || o_.stepTimes) && instances <= (size_t{1} << 25);
  if (keepPath_) {
    startOf_.assign(instances, 0);
    endOf_.assign(instances, -1);
    predOf_.assign(instances, SIZE_MAX);
    whyOf_.assign(instances, Why::kStart);
  }
  return chorus::Status::ok();
}

bool stepDone(const Tb& tb, size_t iter, int step) {
  return tb.done || tb.iter > iter || (tb.iter == iter && tb.pos > step);
}

void Engine::advance(int t) {
  Tb& tb = tbs_[static_cast<size_t>(t)];
  while (!tb.done && !tb.busy) {
    const ir::Step& s = tb.ir->steps[static_cast<size_t>(tb.pos)];
    if (s.depTb >= 0) {
      const auto& ids = tbOf_[static_cast<size_t>(tb.rank)];
      int d = ids[static_cast<size_t>(s.depTb)];
      Tb& dep = tbs_[static_cast<size_t>(d)];
      if (!stepDone(dep, tb.iter, s.depStep)) {
        dep.waiters.push_back(t);
        return;
      }
      if (keepPath_) {
        size_t di = tb.iter * stepsPerIter_ + dep.base + static_cast<size_t>(s.depStep);
        satisfied(tb, di, endOf_[di], Why::kDependency);
      }
    }
    if (ir::receives(s.type) && !tb.recvDone) {
      Connection& c = conns_[static_cast<size_t>(tb.recvConn)];
      if (c.arrived <= c.consumed) return;  // woken by the arrival
      size_t seq = c.consumed++;
      if (keepPath_) {
        satisfied(tb, c.senders[seq], c.arrivedAt[seq], Why::kData);
        c.consumers.push_back(instance(tb));
      }
      tb.recvDone = true;
      double cost = localCost(bytesOf(tb, s));
      if (cost > 0) {
        tb.busy = true;
        addTimer(now_ + cost, 0, t);
        return;
      }
    }
    if (ir::sends(s.type)) {
      startSend(t);
      return;
    }
    if (!ir::receives(s.type) && s.type != ir::StepType::kNop) {
      double cost = localCost(bytesOf(tb, s));
      if (cost > 0 && !tb.recvDone) {
        tb.recvDone = true;  // the local work is under way
        tb.busy = true;
        addTimer(now_ + cost, 0, t);
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
    satisfied(tb, c.consumers[k], c.freedAt[k], Why::kSlot);
  }
  ++c.sent;
  ++transfers_;
  tb.busy = true;
  Flow f;
  f.conn = tb.sendConn;
  f.route = c.route;
  f.tb = t;
  f.instance = instance(tb);
  f.bytes = static_cast<double>(bytesOf(tb, tb.ir->steps[static_cast<size_t>(tb.pos)])) * overhead_;
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
  r.due.emplace_back(r.served + f.bytes, slot);
  std::push_heap(r.due.begin(), r.due.end(), std::greater<>());
  ++r.flows;
  if (!r.listed) {
    r.listed = true;
    active_.push_back(f.route);
  }
  routeChanged(f.route);
}

void Engine::complete(Tb& tb) {
  const ir::Step& s = tb.ir->steps[static_cast<size_t>(tb.pos)];
  if (ir::receives(s.type)) {
    // Its slot is free again.
    Connection& c = conns_[static_cast<size_t>(tb.recvConn)];
    ++c.released;
    if (keepPath_) c.freedAt.push_back(now_);
    if (c.senderTb >= 0) ready_.push_back(c.senderTb);
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
    predOf_[i] = tb.blocker;
  }
  if (o_.trace) {
    events_.push_back({{"name", std::string(ir::stepTypeName(s.type))},
                       {"ph", "X"},
                       {"ts", tb.stepStart * 1e6},
                       {"dur", (now_ - tb.stepStart) * 1e6},
                       {"pid", tb.rank},
                       {"tid", tb.index},
                       {"args", {{"step", tb.pos}, {"iteration", tb.iter}, {"count", s.count}}}});
  }
  size_t previous = instance(tb);
  if (++tb.pos == static_cast<int>(tb.ir->steps.size())) {
    tb.pos = 0;
    if (++tb.iter == iterations_) tb.done = true;
  }
  tb.stepStart = now_;
  tb.blocker = previous;
  tb.why = Why::kOrder;
  tb.blockTime = now_;
  for (int w : tb.waiters) ready_.push_back(w);
  tb.waiters.clear();
}

// The sender's bytes have left: its step is done, the message arrives a
// latency later (the protocol's per-step latency and the route's links).
void Engine::finishFlow(Flow& f) {
  Connection& c = conns_[static_cast<size_t>(f.conn)];
  if (keepPath_) c.senders.push_back(f.instance);  // only the critical path reads it
  addTimer(now_ + stepLatency_ + c.latency, 1, f.conn);
  Tb& tb = tbs_[static_cast<size_t>(f.tb)];
  complete(tb);
  ready_.push_back(f.tb);
}

// A connection's messages arrive in the order they were sent (one latency
// each, one sender).
void Engine::arrive(int conn) {
  Connection& c = conns_[static_cast<size_t>(conn)];
  if (keepPath_) c.arrivedAt.push_back(now_);
  ++c.arrived;
  if (c.receiverTb >= 0) ready_.push_back(c.receiverTb);
}

// Max-min fair rates by progressive filling: the link with the smallest
// fair share fixes the rate of its flows, which leave the others. Per
// route, weighted by its flows (Route).
void Engine::computeRates() {
  ratesDirty_ = false;
  // A connection's next message often starts as its last one ends: the
  // same flows per route, the same rates.
  bool same = true;
  for (int r : changed_) {
    Route& route = routes_[static_cast<size_t>(r)];
    same = same && route.flows == route.flowsRated;
    route.changed = false;
  }
  changed_.clear();
  if (same) return;
  // Routes without flows leave the active list.
  size_t keep = 0;
  for (int r : active_) {
    Route& route = routes_[static_cast<size_t>(r)];
    route.flowsRated = route.flows;
    if (route.flows > 0) {
      active_[keep++] = r;
      route.fixed = false;
    } else {
      route.listed = false;
    }
  }
  active_.resize(keep);
  // Routes per link as one flat array (counting sort), in reused buffers;
  // count_ is the flows on a link still to be fixed.
  for (int l : touched_) {
    count_[static_cast<size_t>(l)] = 0;
    first_[static_cast<size_t>(l)] = 0;
  }
  touched_.clear();
  for (int r : active_) {
    const Route& route = routes_[static_cast<size_t>(r)];
    for (int l : route.links) {
      auto li = static_cast<size_t>(l);
      if (count_[li] == 0) touched_.push_back(l);
      count_[li] += route.flows;
      ++first_[li];  // routes on it, for now
    }
  }
  size_t total = 0;
  for (int l : touched_) {
    auto li = static_cast<size_t>(l);
    size_t routes = first_[li];
    first_[li] = total;
    fill_[li] = total;
    total += routes;
    left_[li] = linkCap_[li];
  }
  onLink_.resize(total);
  for (int r : active_)
    for (int l : routes_[static_cast<size_t>(r)].links)
      onLink_[fill_[static_cast<size_t>(l)]++] = r;
  using Entry = std::pair<double, int>;
  heap_.clear();
  for (int l : touched_)
    heap_.push_back({left_[static_cast<size_t>(l)] / count_[static_cast<size_t>(l)], l});
  std::make_heap(heap_.begin(), heap_.end(), std::greater<Entry>());
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<Entry>());
    auto [share, l] = heap_.back();
    heap_.pop_back();
    auto li = static_cast<size_t>(l);
    if (count_[li] == 0 || share != left_[li] / count_[li]) continue;  // stale
    for (size_t k = first_[li]; k < fill_[li]; ++k) {
      Route& route = routes_[static_cast<size_t>(onLink_[k])];
      if (route.fixed) continue;
      route.fixed = true;
      route.rate = share;
      for (int l2 : route.links) {
        auto l2i = static_cast<size_t>(l2);
        left_[l2i] -= share * route.flows;
        if ((count_[l2i] -= route.flows) > 0) {
          heap_.push_back({left_[l2i] / count_[l2i], l2});
          std::push_heap(heap_.begin(), heap_.end(), std::greater<Entry>());
        }
      }
    }
  }
}

chorus::Status Engine::run(Result& out) {
  CHORUS_RETURN_IF_ERROR(setup(out));
  for (size_t t = 0; t < tbs_.size(); ++t) {
    if (tbs_[t].ir->steps.empty()) tbs_[t].done = true;
    ready_.push_back(static_cast<int>(t));
  }
  for (uint64_t events = 1;; ++events) {
    if (o_.deadline && events % 4096 == 0 && std::chrono::steady_clock::now() > *o_.deadline)
      return chorus::Status(StatusCode::kTimeout, "the time budget was spent");
    while (!ready_.empty()) {
      int t = ready_.back();
      ready_.pop_back();
      advance(t);
    }
    if (ratesDirty_) computeRates();
    double next = timers_.empty() ? kInf : timers_.top().time;
    for (int r : active_) {
      const Route& route = routes_[static_cast<size_t>(r)];
      if (route.flows > 0 && route.rate > 0)
        next = std::min(next, now_ + (route.due.front().first - route.served) / route.rate);
    }
    if (next == kInf) break;
    double dt = next - now_;
    for (int r : active_) {
      Route& route = routes_[static_cast<size_t>(r)];
      if (route.flows == 0 || route.rate <= 0) continue;
      route.served += route.rate * dt;
      const double moved = route.rate * dt * route.flows;
      for (int l : route.links) {
        linkBytes_[static_cast<size_t>(l)] += moved;
        if (static_cast<size_t>(l) < timeline_.size())
          spread(timeline_[static_cast<size_t>(l)], route.rate * route.flows, next);
      }
    }
    now_ = next;
    // Finished flows (within rounding), then every timer due now.
    for (int r : active_) {
      Route& route = routes_[static_cast<size_t>(r)];
      while (!route.due.empty()) {
        const double left = route.due.front().first - route.served;
        if (!(left <= 1e-6 || (route.rate > 0 && left / route.rate <= kSameTime))) break;
        const int slot = route.due.front().second;
        std::pop_heap(route.due.begin(), route.due.end(), std::greater<>());
        route.due.pop_back();
        --route.flows;
        routeChanged(r);
        freeFlows_.push_back(slot);
        Flow done = flows_[static_cast<size_t>(slot)];
        finishFlow(done);
      }
    }
    while (!timers_.empty() && timers_.top().time <= now_ + kSameTime) {
      Timer tm = timers_.top();
      timers_.pop();
      if (tm.kind == 0) {
        Tb& tb = tbs_[static_cast<size_t>(tm.id)];
        tb.busy = false;
        ready_.push_back(tm.id);
        const ir::Step& s = tb.ir->steps[static_cast<size_t>(tb.pos)];
        if (!ir::sends(s.type)) complete(tb);
      } else {
        arrive(tm.id);
      }
    }
  }
  for (const Tb& tb : tbs_)
    if (!tb.done) {
      const ir::Step& s = tb.ir->steps[static_cast<size_t>(tb.pos)];
      return chorus::Status(StatusCode::kDeadlock,
                            "rank " + std::to_string(tb.rank) + " tb " + std::to_string(tb.index) +
                                " step " + std::to_string(tb.pos) + " (" +
                                std::string(ir::stepTypeName(s.type)) + ", iteration " +
                                std::to_string(tb.iter) + ") waits forever with " +
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
  if (a_.collective == CollectiveKind::kAllGather ||
      a_.collective == CollectiveKind::kReduceScatter || a_.collective == CollectiveKind::kAllToAll)
    bytes = static_cast<double>(out.count * static_cast<size_t>(a_.ngpus) * o_.elementSize);
  out.algbw = now_ > 0 ? bytes / now_ / 1e9 : 0;
  out.busbw = out.algbw * busBandwidthFactor(a_.collective, a_.ngpus);
  if (keepPath_ && (o_.criticalPath || o_.stepTimes)) {
    std::vector<std::pair<int, int>> where(stepsPerIter_);  // instance -> (tb, step)
    for (size_t t = 0; t < tbs_.size(); ++t)
      for (size_t k = 0; k < tbs_[t].ir->steps.size(); ++k)
        where[tbs_[t].base + k] = {static_cast<int>(t), static_cast<int>(k)};
    auto pathStep = [&](size_t i) {
      auto [t, k] = where[i % stepsPerIter_];
      const Tb& tb = tbs_[static_cast<size_t>(t)];
      PathStep p{tb.rank,
                 tb.index,
                 k,
                 static_cast<int>(i / stepsPerIter_),
                 tb.ir->steps[static_cast<size_t>(k)].type,
                 startOf_[i],
                 endOf_[i],
                 whyName(whyOf_[i])};
      if (size_t by = predOf_[i]; by != SIZE_MAX) {
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
      for (size_t i = last; i != SIZE_MAX && path.size() < endOf_.size(); i = predOf_[i])
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
  if (!(options.timelineStep >= 0))
    return chorus::Status(StatusCode::kInvalidArgument, "the timeline's step must be >= 0");
  Engine e(algo, topo, options);
  Result out;
  chorus::Status st = e.run(out);
  if (!st.isOk()) return st;
  return out;
}

}  // namespace chorus::sim
