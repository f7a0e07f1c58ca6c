// Drivers run the executors of all ranks of one call. The deterministic
// driver runs every rank in the calling thread in a seeded order (the order
// tests use to explore interleavings reproducibly) and reports a deadlock,
// with what each threadblock waits for, when a full sweep makes no progress.
// The threaded driver runs each rank on its own thread; a blocked rank
// sleeps on a doorbell that its peers ring, so it never spins.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "core/status.h"
#include "runtime/exec/executor.h"
#include "runtime/transport/local_transport.h"
#include "runtime/transport/shared_buffers.h"

namespace chorus::runtime {

struct DeterministicOptions {
  enum class Order { kRoundRobin, kReverse, kRandom };
  Order order = Order::kRoundRobin;
  uint64_t seed = 1;      // for kRandom: a new permutation of ranks every sweep
  size_t sliceBytes = 0;  // 0: the algorithm's (ir::sliceBytesOf)
  int slots = 8;          // messages in flight per connection
};

// How a blocked rank waits for a peer: it polls its doorbell, spinning
// (a pause between polls) while it may own a core, then yielding the core to
// whoever can use it, then it sleeps on the doorbell's futex until a peer
// rings (one system call for the peer, only when someone sleeps). Peers
// usually answer within microseconds, and a wake-up from a sleep costs more
// than that (and, on a loaded machine, up to a scheduler period: a woken
// thread does not preempt a running one), so sleeping is the last resort.
struct WaitPolicy {
  int spinUs = 0;    // busy-poll this long first
  int yieldUs = 50;  // then poll with a yield between polls this long
  // Spin where the host has a core for each of its `ranksOnHost` ranks
  // (otherwise spinning ranks take the cores their peers need); the spin
  // adapts per thread (spinBudgetUs). `spinUs` >= 0 overrides
  // (CHORUS_SPIN_US; 0: never spin).
  static WaitPolicy forRanks(int ranksOnHost, int spinUs = -1);
};

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long the calling thread spins now: WaitPolicy::spinUs at most,
// halved each time a spin ends without the peer (it is not running: it may
// share this core, where spinning only delays it), doubled each time one
// catches it. Per thread: a rank keeps its thread.
int& spinBudgetUs(const WaitPolicy& w);

// Polls `ready()` as `w` says; true once it holds, false when the policy's
// time is up (then sleep on whatever signals it).
template <class Ready>
bool pollUntil(Ready ready, const WaitPolicy& w) {
  using Clock = std::chrono::steady_clock;
  if (ready()) return true;
  const auto start = Clock::now();
  int spun = 0;
  if (w.spinUs > 0) {
    int& budget = spinBudgetUs(w);
    spun = budget;
    const auto end = start + std::chrono::microseconds(budget);
    do {
      for (int i = 0; i < 64; ++i) {
        if (ready()) {
          budget = std::min(w.spinUs, budget * 2);
          return true;
        }
        cpuRelax();
      }
    } while (Clock::now() < end);
    budget = std::max(1, budget / 2);
  }
  const auto end = start + std::chrono::microseconds(spun + w.yieldUs);
  do {
    std::this_thread::yield();
    if (ready()) return true;
  } while (Clock::now() < end);
  return false;
}

// How one rank runs on the calling thread (PreparedCall::runRank).
struct RankRunOptions {
  WaitPolicy wait;                           // how a blocked rank waits
  int timeoutMs = -1;                        // kTimeout after this long without progress; < 0: none
  const std::atomic<bool>* abort = nullptr;  // kAborted once another thread sets it
  // A transport the rank drives itself while it waits (instead of sleeping
  // while another thread does): polled with the doorbell, left while the
  // rank sleeps.
  Poller* poller = nullptr;
};

struct ThreadedOptions {
  WaitPolicy wait;        // how a blocked rank waits
  int watchdogMs = 50;    // deadlock check period (two quiet checks = deadlock)
  size_t sliceBytes = 0;  // for the one-shot runThreaded() only
  int slots = 8;          // for the one-shot runThreaded() only
};

struct Session;

// Everything one call needs on every rank, built once and reused for every
// repetition of the same call: connections (preallocated, prefaulted slots),
// scratch buffers and executors. Building it touches all its memory; running
// it allocates nothing. The buffers in `calls` must outlive it.
class PreparedCall {
 public:
  // Errors: kInvalidArgument (see planCall; avg on a non-reducing collective).
  // `fabric`: connections to reuse (nullptr, or one whose slots are too
  // small for this call's slices: a new one is made; see fabric()).
  static Result<std::unique_ptr<PreparedCall>> make(const VerifiedAlgorithm& va,
                                                    const std::vector<CallArgs>& calls,
                                                    size_t sliceBytes = 0, int slots = 8,
                                                    std::shared_ptr<LocalFabric> fabric = nullptr);
  ~PreparedCall();
  PreparedCall(const PreparedCall&) = delete;
  PreparedCall& operator=(const PreparedCall&) = delete;

  const Geometry& geometry() const;
  // Runs the call once with the deterministic driver (order and seed from
  // `options`; its sliceBytes and slots are fixed at make()).
  Status runDeterministic(const DeterministicOptions& options = {});
  // Runs the call once, one step at a time in exactly `order` (e.g. the
  // order the simulator finished them in: sim::Result::order). Each step
  // must be able to run when its turn comes, and the order must finish
  // the call; kInvalidArgument naming the first entry that cannot.
  Status runInOrder(const std::vector<ir::StepInstance>& order);
  // Runs the call once with one thread per rank.
  Status runThreaded(const ThreadedOptions& options = {});
  // Runs rank r's part of one run on the calling thread; every rank's
  // runRank must be called (from different threads) for the run to finish.
  // Returns once r is done and every message it sent by reference has been
  // consumed. A rank that has not started the previous run's successor may
  // not be reset under a peer: callers start a run only when all ranks have
  // finished the previous one. After an error the connections hold stale
  // messages: call recover() with no rank running before the next run.
  Status runRank(int r, const RankRunOptions& options);
  void recover();
  const std::shared_ptr<LocalFabric>& fabric() const;
  // Steps sent by reference (one copy per hop) across all ranks.
  int refSteps() const;
  // Scratch bytes it holds (every rank's).
  size_t bytes() const;

 private:
  PreparedCall() = default;
  Status finish(Status st);
  const VerifiedAlgorithm* va_ = nullptr;
  std::vector<CallArgs> calls_;
  std::unique_ptr<Session> s_;
};

// Runs one rank's executor on the calling thread until it is done and every
// message it lent by reference is released, sleeping on `bell` while
// blocked. kTimeout / kAborted per `options`. `progress` and `state` (both
// optional) feed a watchdog.
Status runRankLoop(Steppable& x, Doorbell& bell, int rank, const RankRunOptions& options,
                   std::atomic<uint64_t>* progress = nullptr, std::atomic<int>* state = nullptr);

// One rank's part of a call whose other ranks run in other processes: its
// executor over a fabric that connects it to them. Built once per call
// shape and buffers, run many times; the other ranks must run theirs.
class RankCall {
 public:
  // Errors as planRankCall; kInternal if the fabric's slots are too small.
  static Result<std::unique_ptr<RankCall>> make(const VerifiedAlgorithm& va, int rank,
                                                const CallArgs& call, size_t sliceBytes,
                                                std::shared_ptr<Fabric> fabric);
  ~RankCall();
  const Geometry& geometry() const { return geometry_; }
  Status run(const RankRunOptions& options);
  // Scratch bytes it holds.
  size_t bytes() const { return scratch_.size(); }

 private:
  RankCall() = default;
  const VerifiedAlgorithm* va_ = nullptr;
  int rank_ = 0;
  CallArgs call_;
  Geometry geometry_;
  std::shared_ptr<Fabric> fabric_;
  shared_buffers::Block scratch_;
  std::unique_ptr<RankExecutor> exec_;
};

// One-shot conveniences: prepare, run once. Errors as PreparedCall plus
// kDeadlock (with each rank's waiting threadblocks).
Status runDeterministic(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                        const DeterministicOptions& options = {});
Status runThreaded(const VerifiedAlgorithm& va, const std::vector<CallArgs>& calls,
                   const ThreadedOptions& options = {});

}  // namespace chorus::runtime
