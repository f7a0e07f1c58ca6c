#include "runtime/exec/driver.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <thread>

#include "runtime/exec/reduce.h"

namespace chorus::runtime {

namespace {

enum RankState : int { kRunning = 0, kAsleep = 1, kFinished = 2 };

}  // namespace

// Everything one call needs on every rank: the fabric (shared with other
// calls of the same algorithm), scratch, executors, and for the threaded
// driver persistent rank threads.
struct Session {
  Geometry geometry;
  bool dirty = false;  // a previous run stopped midway: connections hold messages
  std::shared_ptr<LocalFabric> fabric;
  std::vector<shared_buffers::Block> scratch;
  std::vector<std::unique_ptr<RankExecutor>> ranks;
  std::unique_ptr<std::atomic<int>[]> state;  // per rank, RankState (for the watchdog)
  std::atomic<uint64_t> progress{0};

  // Persistent rank threads, started by the first threaded run and parked
  // on `start` between runs: a call costs wake-ups, not thread creation.
  std::vector<std::thread> workers;
  Doorbell start;  // rung once per run (and at shutdown)
  std::atomic<bool> shutdown{false};
  std::atomic<bool> abort{false};
  RankRunOptions workerOptions;  // set by each run before `start` rings
  std::mutex finishMutex;
  std::condition_variable finishedCv;
  size_t finished = 0;  // guarded by finishMutex

  ~Session() {
    if (workers.empty()) return;
    shutdown.store(true, std::memory_order_release);
    start.ring();
    for (auto& t : workers) t.join();
  }

  Status runRank(size_t r, const RankRunOptions& o);

  void workerMain(size_t r) {
    uint32_t served = 0;  // the value of `start` when this thread was created
    for (;;) {
      start.wait(served);
      served = start.value();
      if (shutdown.load(std::memory_order_acquire)) return;
      (void)runRank(r, workerOptions);  // the watchdog reports deadlocks
      std::lock_guard<std::mutex> lock(finishMutex);
      if (++finished == ranks.size()) finishedCv.notify_one();
    }
  }
};

Status Session::runRank(size_t r, const RankRunOptions& o) {
  return runRankLoop(*ranks[r], fabric->bell(static_cast<int>(r)), static_cast<int>(r), o,
                     &progress, &state[r]);
}

WaitPolicy WaitPolicy::forRanks(int ranksOnHost, int spinUs) {
  WaitPolicy w;
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  w.spinUs = spinUs >= 0 ? spinUs : ranksOnHost <= online ? 50 : 0;
  return w;
}

int& spinBudgetUs(const WaitPolicy& w) {
  // Measured on this 2-core VM: a fixed 50 us spin made a 2-thread in-place
  // 4 MiB allgather run 1 run in 3 at 230 instead of 45 us per call (the
  // scheduler had put both ranks on one core: each wait cost the whole
  // spin; bench/stall_check.sh), while not spinning at all made a
  // 2-process 4 KiB allgather 0.85 instead of 0.38 us.
  thread_local int budget = -1;
  if (budget < 0 || budget > w.spinUs) budget = w.spinUs;
  return budget;
}

// One rank's part of one run: advance until done, sleeping on the rank's
// doorbell while blocked; then wait for the messages it lent by reference.
Status runRankLoop(Steppable& x, Doorbell& bell, int rank, const RankRunOptions& o,
                   std::atomic<uint64_t>* progress, std::atomic<int>* state) {
  auto setState = [state](int v) {
    if (state != nullptr) state->store(v, std::memory_order_release);
  };
  x.reset();
  setState(kRunning);
  Poller* const poller = o.poller;
  x.pollDuring(poller);
  if (poller != nullptr) poller->enter();
  // When the rank last made progress: read when it first blocks after some
  // (a clock read per step cost ~6 % of a 4 KiB call), so the timeout
  // counts from then; a call that never blocks reads no clock.
  std::chrono::steady_clock::time_point blockedSince;
  bool blocked = false;
  Status result;
  for (;;) {
    if (o.abort != nullptr && o.abort->load(std::memory_order_acquire)) {
      std::string msg = "rank " + std::to_string(rank) + ": call aborted";
      for (const std::string& w : x.waiting()) msg += "\n  " + w;
      result = Status(StatusCode::kAborted, msg);
      break;
    }
    uint32_t seen = bell.value();  // read before trying: no lost wake-up
    Progress p = x.advance();
    if (!x.failure().isOk()) {
      result = x.failure();
      break;
    }
    if (x.done() && x.sendsDrained()) break;
    if (p == Progress::kProgress) {
      if (progress != nullptr) progress->fetch_add(1, std::memory_order_relaxed);
      blocked = false;
      continue;
    }
    if (!blocked) {
      blockedSince = std::chrono::steady_clock::now();
      blocked = true;
    }
    // Blocked: poll (a peer is likely about to deliver), then sleep until
    // a peer rings. A rank that drives its transport counts what moves
    // there as progress.
    bool moved = false;
    if (pollUntil(
            [&] {
              moved = poller != nullptr && poller->poll();
              return moved || bell.value() != seen;
            },
            o.wait)) {
      if (moved) blocked = false;
      continue;
    }
    if (o.timeoutMs >= 0) {
      auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
                        std::chrono::steady_clock::now() - blockedSince)
                        .count();
      if (waited >= o.timeoutMs) {
        std::string msg =
            "rank " + std::to_string(rank) + ": no progress for " + std::to_string(waited) + " ms";
        for (const std::string& w : x.waiting()) msg += "\n  " + w;
        result = Status(StatusCode::kTimeout, msg);
        break;
      }
    }
    setState(kAsleep);
    // Sleep in bounded naps so aborts and timeouts are noticed: in the
    // transport if it serves all the rank's peers, else on the doorbell
    // while the transport's own thread drives it.
    const int napMs = o.abort != nullptr || o.timeoutMs >= 0 ? 50 : -1;
    if (poller == nullptr || !poller->sleep(napMs)) {
      if (poller != nullptr) poller->leave(true);
      bell.wait(seen, napMs);
      if (poller != nullptr) poller->enter();
    }
    setState(kRunning);
  }
  // Nothing may write to the call's buffers once it has returned.
  if (!result.isOk()) x.abandon();
  if (poller != nullptr) poller->leave(false);
  setState(kFinished);
  return result;
}

namespace {

// Rank `rank`'s executor with its ports on `fabric` and its scratch in
// `scratch` (sized here: memory its peers can map when a port would have
// them read it in place).
Result<std::unique_ptr<RankExecutor>> makeExecutor(const VerifiedAlgorithm& va, int rank,
                                                   const CallArgs& call, const Geometry& g,
                                                   Fabric& fabric, shared_buffers::Block& scratch) {
  const ir::Rank& r = va.algo().ranks[static_cast<size_t>(rank)];
  std::vector<SendPort*> sendPorts;
  std::vector<RecvPort*> recvPorts;
  for (const ir::Threadblock& tb : r.tbs) {
    Connection* out = fabric.find(tb.channel, r.id, tb.sendPeer);
    Connection* in = fabric.find(tb.channel, tb.recvPeer, r.id);
    sendPorts.push_back(out != nullptr ? &out->sender() : nullptr);
    recvPorts.push_back(in != nullptr ? &in->receiver() : nullptr);
  }
  CHORUS_RETURN_IF_ERROR(
      scratch.assign(static_cast<size_t>(r.scratchChunks) * g.chunkElems * g.elemSize,
                     anyTakesSharedRefs(sendPorts)));
  return std::make_unique<RankExecutor>(va, rank, call, g, std::move(sendPorts),
                                        std::move(recvPorts), scratch.data());
}

Result<std::unique_ptr<Session>> prepare(const VerifiedAlgorithm& va,
                                         const std::vector<CallArgs>& calls, size_t sliceBytes,
                                         int slots, std::shared_ptr<LocalFabric> fabric) {
  const ir::Algorithm& a = va.algo();
  Result<Geometry> plan = planCall(va, calls, sliceBytes);
  if (!plan.isOk()) return plan.status();
  const Geometry& g = plan.value();
  if (slots < 1) return Status(StatusCode::kInvalidArgument, "slots must be >= 1");

  auto s = std::make_unique<Session>();
  s->geometry = g;
  size_t unit = std::max<size_t>(1, g.largestSliceBytes());
  if (fabric == nullptr || fabric->unitBytes() < unit || fabric->slots() != slots)
    fabric = std::make_shared<LocalFabric>(a, unit, slots);
  s->fabric = std::move(fabric);
  s->state = std::make_unique<std::atomic<int>[]>(static_cast<size_t>(a.ngpus));

  s->scratch.resize(a.ranks.size());
  for (const ir::Rank& r : a.ranks) {
    auto x = makeExecutor(va, r.id, calls[static_cast<size_t>(r.id)], g, *s->fabric,
                          s->scratch[static_cast<size_t>(r.id)]);
    if (!x.isOk()) return x.status();
    s->ranks.push_back(std::move(x).value());
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

// avg: rank r's reduced output divided by the number of ranks.
void finishAverage(const VerifiedAlgorithm& va, const CallArgs& call, int r) {
  const ir::Algorithm& a = va.algo();
  if (call.op != ReduceOp::kAvg || !traits(a.collective).reduces) return;
  if (traits(a.collective).writes == Ranks::kRoot && r != va.root()) return;
  // allreduce, reduce and reducescatter outputs all hold `count` elements.
  divideInPlace(call.type, call.recvbuff, call.count, a.ngpus);
}

}  // namespace

Result<std::unique_ptr<PreparedCall>> PreparedCall::make(const VerifiedAlgorithm& va,
                                                         const std::vector<CallArgs>& calls,
                                                         size_t sliceBytes, int slots,
                                                         std::shared_ptr<LocalFabric> fabric) {
  auto prepared = prepare(va, calls, sliceBytes, slots, std::move(fabric));
  if (!prepared.isOk()) return prepared.status();
  std::unique_ptr<PreparedCall> pc(new PreparedCall());
  pc->va_ = &va;
  pc->calls_ = calls;
  pc->s_ = std::move(prepared).value();
  return pc;
}

PreparedCall::~PreparedCall() = default;

const Geometry& PreparedCall::geometry() const { return s_->geometry; }

const std::shared_ptr<LocalFabric>& PreparedCall::fabric() const { return s_->fabric; }

size_t PreparedCall::bytes() const {
  size_t b = 0;
  for (const auto& s : s_->scratch) b += s.size();
  return b;
}

int PreparedCall::refSteps() const {
  int n = 0;
  for (const auto& x : s_->ranks) n += x->refSteps();
  return n;
}

void PreparedCall::recover() {
  s_->fabric->reset();
  s_->dirty = false;
}

Status PreparedCall::finish(Status st) {
  if (!st.isOk()) {
    s_->dirty = true;
    return st;
  }
  for (size_t r = 0; r < calls_.size(); ++r) finishAverage(*va_, calls_[r], static_cast<int>(r));
  return st;
}

Status PreparedCall::runRank(int r, const RankRunOptions& options) {
  Status st = s_->runRank(static_cast<size_t>(r), options);
  if (st.isOk()) finishAverage(*va_, calls_[static_cast<size_t>(r)], r);
  return st;
}

Status PreparedCall::runDeterministic(const DeterministicOptions& options) {
  Session& s = *s_;
  if (s.dirty) recover();
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
      if (!x.failure().isOk()) return finish(x.failure());
      allDone = allDone && x.done();
    }
    if (allDone) break;
    if (!moved) {
      return finish(deadlock(s, "no rank can make progress (" + std::to_string(s.fabric->slots()) +
                                    " slot(s) per connection):"));
    }
  }
  return finish(Status::ok());
}

Status PreparedCall::runInOrder(const std::vector<ir::StepInstance>& order) {
  Session& s = *s_;
  if (s.dirty) recover();
  for (auto& x : s.ranks) x->reset();
  for (size_t k = 0; k < order.size(); ++k) {
    const ir::StepInstance& e = order[k];
    if (e.rank < 0 || static_cast<size_t>(e.rank) >= s.ranks.size())
      return finish(Status(StatusCode::kInvalidArgument,
                           "entry " + std::to_string(k) + ": no rank " + std::to_string(e.rank)));
    Status st = s.ranks[static_cast<size_t>(e.rank)]->runStep(e.tb, e.step, e.iteration);
    if (!st.isOk())
      return finish(Status(st.code(), "entry " + std::to_string(k) + ": " + st.message()));
  }
  for (size_t r = 0; r < s.ranks.size(); ++r)
    if (!s.ranks[r]->done())
      return finish(Status(StatusCode::kInvalidArgument,
                           "the order ends before rank " + std::to_string(r) + " is done"));
  return finish(Status::ok());
}

Status PreparedCall::runThreaded(const ThreadedOptions& options) {
  Session& s = *s_;
  if (s.dirty) recover();
  const size_t n = s.ranks.size();
  if (s.workers.empty()) {
    s.workers.reserve(n);
    for (size_t r = 0; r < n; ++r) s.workers.emplace_back([&s, r] { s.workerMain(r); });
  }
  {
    std::lock_guard<std::mutex> lock(s.finishMutex);
    s.finished = 0;
  }
  for (size_t r = 0; r < n; ++r) s.state[r].store(kRunning, std::memory_order_relaxed);
  s.abort.store(false, std::memory_order_relaxed);
  s.progress.store(0, std::memory_order_relaxed);
  s.workerOptions = RankRunOptions{};
  s.workerOptions.wait = options.wait;
  s.workerOptions.abort = &s.abort;
  s.start.ring();  // release: the settings above happen before the ranks run

  // Watchdog: if no rank moved between two checks and every unfinished rank
  // is asleep, nothing can wake them: a deadlock.
  uint64_t last = 0;
  int quiet = 0;
  std::unique_lock<std::mutex> lock(s.finishMutex);
  while (!s.finishedCv.wait_for(lock, std::chrono::milliseconds(options.watchdogMs),
                                [&] { return s.finished == n; })) {
    bool allAsleep = true;
    for (size_t r = 0; r < n; ++r)
      allAsleep = allAsleep && s.state[r].load(std::memory_order_acquire) != kRunning;
    uint64_t now = s.progress.load();
    quiet = (now == last && allAsleep) ? quiet + 1 : 0;
    last = now;
    if (quiet >= 2) {
      // Describe the deadlock before the ranks leave their positions.
      lock.unlock();
      Status st = deadlock(s, "ranks wait on each other (" + std::to_string(s.fabric->slots()) +
                                  " slot(s) per connection):");
      s.abort.store(true, std::memory_order_release);
      s.fabric->ringAll();
      lock.lock();
      s.finishedCv.wait(lock, [&] { return s.finished == n; });
      lock.unlock();
      return finish(st);
    }
  }
  lock.unlock();
  return finish(Status::ok());
}

Result<std::unique_ptr<RankCall>> RankCall::make(const VerifiedAlgorithm& va, int rank,
                                                 const CallArgs& call, size_t sliceBytes,
                                                 std::shared_ptr<Fabric> fabric) {
  Result<Geometry> plan = planRankCall(va, rank, call, sliceBytes);
  if (!plan.isOk()) return plan.status();
  const Geometry& g = plan.value();
  size_t unit = std::max<size_t>(1, g.largestSliceBytes());
  if (fabric->unitBytes() < unit)
    return Status(StatusCode::kInternal, "the fabric's slots are smaller than the call's slices");
  std::unique_ptr<RankCall> rc(new RankCall());
  rc->va_ = &va;
  rc->rank_ = rank;
  rc->call_ = call;
  rc->geometry_ = g;
  rc->fabric_ = std::move(fabric);
  auto x = makeExecutor(va, rank, call, g, *rc->fabric_, rc->scratch_);
  if (!x.isOk()) return x.status();
  rc->exec_ = std::move(x).value();
  return rc;
}

RankCall::~RankCall() = default;

Status RankCall::run(const RankRunOptions& options) {
  Status st = runRankLoop(*exec_, fabric_->bell(rank_), rank_, options);
  if (st.isOk()) finishAverage(*va_, call_, rank_);
  return st;
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
