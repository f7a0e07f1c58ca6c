#include "runtime/driver.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>
#include <tuple>

#include "runtime/local_transport.h"
#include "runtime/reduce.h"

namespace chorus::runtime {

namespace {

bool reducesToOutput(CollectiveKind k) {
  return k == CollectiveKind::kAllReduce || k == CollectiveKind::kReduceScatter ||
         k == CollectiveKind::kReduce;
}

// Everything one call needs on every rank: connections, scratch, executors
// and (for the threaded driver) one doorbell per rank.
}  // namespace

struct Session {
  Geometry geometry;
  bool dirty = false;  // a previous run stopped midway: connections hold messages
  int slots = 0;
  std::map<std::tuple<int, int, int>, std::unique_ptr<LocalConnection>> conns;
  std::vector<std::vector<unsigned char>> scratch;
  std::vector<std::unique_ptr<Doorbell>> bells;
  std::vector<std::unique_ptr<RankExecutor>> ranks;

  // Persistent rank threads, started by the first threaded run and parked
  // on `start` between runs: a call costs wake-ups, not thread creation.
  std::vector<std::thread> workers;
  Doorbell start;  // rung once per run (and at shutdown)
  std::atomic<bool> shutdown{false};
  std::atomic<bool> abort{false};
  std::atomic<uint64_t> progress{0};
  std::unique_ptr<std::atomic<int>[]> state;  // per rank: 0 running, 1 asleep, 2 finished
  int yieldsBeforeSleep = 16;                 // set by each run before `start` rings
  std::mutex finishMutex;
  std::condition_variable finishedCv;
  size_t finished = 0;  // guarded by finishMutex

  ~Session() {
    if (workers.empty()) return;
    shutdown.store(true, std::memory_order_release);
    start.ring();
    for (auto& t : workers) t.join();
  }

  // One rank's part of one run: advance until done, sleeping on the rank's
  // doorbell while blocked, until the run finishes or is aborted.
  void runRank(size_t r) {
    RankExecutor& x = *ranks[r];
    Doorbell& bell = *bells[r];
    while (!abort.load(std::memory_order_acquire)) {
      uint32_t seen = bell.value();  // read before trying: no lost wake-up
      Progress p = x.advance();
      if (x.done()) break;
      if (p == Progress::kProgress) {
        progress.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // Blocked: yield a few times (a peer may be about to deliver), then
      // sleep until a peer rings. Never spin: ranks outnumber cores.
      for (int i = 0; i < yieldsBeforeSleep && bell.value() == seen; ++i) std::this_thread::yield();
      if (bell.value() != seen) continue;
      state[r].store(1, std::memory_order_release);
      bell.wait(seen);
      state[r].store(0, std::memory_order_release);
    }
    state[r].store(2, std::memory_order_release);
    std::lock_guard<std::mutex> lock(finishMutex);
    if (++finished == ranks.size()) finishedCv.notify_one();
  }

  void workerMain(size_t r) {
    uint32_t served = 0;  // the value of `start` when this thread was created
    for (;;) {
      start.wait(served);
      served = start.value();
      if (shutdown.load(std::memory_order_acquire)) return;
      runRank(r);
    }
  }
};

namespace {

Result<std::unique_ptr<Session>> prepare(const VerifiedAlgorithm& va,
                                         const std::vector<CallArgs>& calls, size_t sliceBytes,
                                         int slots, bool withBells) {
  const ir::Algorithm& a = va.algo();
  Result<Geometry> plan = planCall(va, calls, sliceBytes);
  if (!plan.isOk()) return plan.status();
  const Geometry& g = plan.value();
  if (calls[0].op == ReduceOp::kAvg && !reducesToOutput(a.collective)) {
    return Status(StatusCode::kInvalidArgument,
                  "avg needs a reducing collective, not " + a.collectiveName);
  }
  if (slots < 1) return Status(StatusCode::kInvalidArgument, "slots must be >= 1");

  auto s = std::make_unique<Session>();
  s->geometry = g;
  s->slots = slots;
  if (withBells)
    for (int r = 0; r < a.ngpus; ++r) s->bells.push_back(std::make_unique<Doorbell>());
  auto bell = [&](int r) { return withBells ? s->bells[static_cast<size_t>(r)].get() : nullptr; };

  // One connection per (channel, sender, receiver), sized for the largest
  // message any step sends on it in one iteration.
  std::map<std::tuple<int, int, int>, size_t> largest;
  size_t sliceChunkBytes = std::min(g.sliceElems, g.chunkElems) * g.elemSize;
  for (const ir::Rank& r : a.ranks)
    for (const ir::Threadblock& tb : r.tbs)
      for (const ir::Step& st : tb.steps)
        if (ir::sends(st.type)) {
          size_t& l = largest[{tb.channel, r.id, tb.sendPeer}];
          l = std::max(l, static_cast<size_t>(st.count) * sliceChunkBytes);
        }
  for (const auto& [key, bytes] : largest) {
    auto c = std::make_unique<LocalConnection>(slots, bytes);
    c->setDoorbells(bell(std::get<1>(key)), bell(std::get<2>(key)));
    s->conns[key] = std::move(c);
  }

  s->scratch.resize(a.ranks.size());
  for (const ir::Rank& r : a.ranks) {
    std::vector<SendPort*> sendPorts;
    std::vector<RecvPort*> recvPorts;
    for (const ir::Threadblock& tb : r.tbs) {
      auto out = s->conns.find({tb.channel, r.id, tb.sendPeer});
      auto in = s->conns.find({tb.channel, tb.recvPeer, r.id});
      sendPorts.push_back(out != s->conns.end() ? &out->second->sender() : nullptr);
      recvPorts.push_back(in != s->conns.end() ? &in->second->receiver() : nullptr);
    }
    auto& scratch = s->scratch[static_cast<size_t>(r.id)];
    scratch.resize(static_cast<size_t>(r.scratchChunks) * g.chunkElems * g.elemSize);
    s->ranks.push_back(std::make_unique<RankExecutor>(va, r.id, calls[static_cast<size_t>(r.id)], g,
                                                      std::move(sendPorts), std::move(recvPorts),
                                                      scratch.data()));
  }
  return s;
}

Status deadlock(const Session& s, const std::string& why) {
  std::string msg = why;
  for (size_t r = 0; r < s.ranks.size(); ++r)
    for (const std::string& w : s.ranks[r]->waiting())
      msg += "\n  rank " + std::to_string(r) + " " + w;
  return Status(StatusCode::kDeadlock, msg);
}

// avg: the reduced outputs divided by the number of ranks.
void finishAverage(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls) {
  const ir::Algorithm& a = va.algo();
  if (calls[0].op != ReduceOp::kAvg) return;
  for (int r = 0; r < a.ngpus; ++r) {
    if (a.collective == CollectiveKind::kReduce && r != va.root()) continue;
    // allreduce, reduce and reducescatter outputs all hold `count` elements.
    divideInPlace(calls[0].type, calls[static_cast<size_t>(r)].recvbuff, calls[0].count, a.ngpus);
  }
}

}  // namespace

Result<std::unique_ptr<PreparedCall>> PreparedCall::make(const VerifiedAlgorithm& va,
                                                         const std::vector<CallArgs>& calls,
                                                         size_t sliceBytes, int slots) {
  auto prepared = prepare(va, calls, sliceBytes, slots, /*withBells=*/true);
  if (!prepared.isOk()) return prepared.status();
  std::unique_ptr<PreparedCall> pc(new PreparedCall());
  pc->va_ = &va;
  pc->calls_ = calls;
  pc->s_ = std::move(prepared).value();
  return pc;
}

PreparedCall::~PreparedCall() = default;

const Geometry& PreparedCall::geometry() const { return s_->geometry; }

Status PreparedCall::finish(Status st) {
  if (!st.isOk()) {
    s_->dirty = true;
    return st;
  }
  finishAverage(*va_, calls_);
  return st;
}

Status PreparedCall::runDeterministic(const DeterministicOptions& options) {
  Session& s = *s_;
  if (s.dirty)
    for (auto& [key, c] : s.conns) c->reset();
  s.dirty = false;
  for (auto& x : s.ranks) x->reset();

  std::vector<int> order(s.ranks.size());
  std::iota(order.begin(), order.end(), 0);
  if (options.order == DeterministicOptions::Order::kReverse)
    std::reverse(order.begin(), order.end());
  std::mt19937_64 rng(options.seed);
  for (;;) {
    if (options.order == DeterministicOptions::Order::kRandom)
      std::shuffle(order.begin(), order.end(), rng);
    bool moved = false, allDone = true;
    for (int r : order) {
      RankExecutor& x = *s.ranks[static_cast<size_t>(r)];
      moved = (x.advance() == Progress::kProgress) || moved;
      allDone = allDone && x.done();
    }
    if (allDone) break;
    if (!moved) {
      return finish(deadlock(s, "no rank can make progress (" + std::to_string(s.slots) +
                                    " slot(s) per connection):"));
    }
  }
  return finish(Status::ok());
}

Status PreparedCall::runThreaded(const ThreadedOptions& options) {
  Session& s = *s_;
  if (s.dirty)
    for (auto& [key, c] : s.conns) c->reset();
  s.dirty = false;
  for (auto& x : s.ranks) x->reset();
  const size_t n = s.ranks.size();
  if (s.workers.empty()) {
    s.state = std::make_unique<std::atomic<int>[]>(n);
    s.workers.reserve(n);
    for (size_t r = 0; r < n; ++r) s.workers.emplace_back([&s, r] { s.workerMain(r); });
  }
  {
    std::lock_guard<std::mutex> lock(s.finishMutex);
    s.finished = 0;
  }
  for (size_t r = 0; r < n; ++r) s.state[r].store(0, std::memory_order_relaxed);
  s.abort.store(false, std::memory_order_relaxed);
  s.progress.store(0, std::memory_order_relaxed);
  s.yieldsBeforeSleep = options.yieldsBeforeSleep;
  s.start.ring();  // release: the resets above happen before the ranks run

  // Watchdog: if no rank moved between two checks and every unfinished rank
  // is asleep, nothing can wake them: a deadlock.
  bool deadlocked = false;
  uint64_t last = 0;
  int quiet = 0;
  std::unique_lock<std::mutex> lock(s.finishMutex);
  while (!s.finishedCv.wait_for(lock, std::chrono::milliseconds(options.watchdogMs),
                                [&] { return s.finished == n; })) {
    bool allAsleep = true;
    for (size_t r = 0; r < n; ++r)
      allAsleep = allAsleep && s.state[r].load(std::memory_order_acquire) != 0;
    uint64_t now = s.progress.load();
    quiet = (now == last && allAsleep) ? quiet + 1 : 0;
    last = now;
    if (quiet >= 2) {
      deadlocked = true;
      s.abort.store(true, std::memory_order_release);
      for (auto& b : s.bells) b->ring();
      s.finishedCv.wait(lock, [&] { return s.finished == n; });
      break;
    }
  }
  lock.unlock();
  if (deadlocked) {
    return finish(deadlock(
        s, "ranks wait on each other (" + std::to_string(s.slots) + " slot(s) per connection):"));
  }
  return finish(Status::ok());
}

Status runDeterministic(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                        const DeterministicOptions& options) {
  auto pc = PreparedCall::make(va, calls, options.sliceBytes, options.slots);
  if (!pc.isOk()) return pc.status();
  return pc.value()->runDeterministic(options);
}

Status runThreaded(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                   const ThreadedOptions& options) {
  auto pc = PreparedCall::make(va, calls, options.sliceBytes, options.slots);
  if (!pc.isOk()) return pc.status();
  return pc.value()->runThreaded(options);
}

}  // namespace chorus::runtime
