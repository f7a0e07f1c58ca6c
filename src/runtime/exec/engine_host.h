// The step engine (engine.h) on the host: a thread stands in for each CUDA
// block. This runs the GPU executor's step and protocol code, with its
// memory ordering expressed as C++ atomics, on every algorithm in CI (and
// under ThreadSanitizer), and is the reference the CUDA executor's results
// are compared with.
//
// A PlanWorld is one communicator's worth of state for one algorithm: the
// plan and the connections (slots and counters, allocated once and reused by
// every call, as the CUDA executor does).
// Calls take host buffers (CallArgs per rank) and run all ranks here.
#pragma once

#include <atomic>
#include <barrier>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/exec/conn_exchange.h"
#include "runtime/exec/engine.h"
#include "runtime/exec/executor.h"
#include "runtime/exec/flat_plan.h"

namespace chorus::runtime {

// The host's Ctx for engine::Block: one thread, C++ atomics.
struct HostCtx {
  static int tid() { return 0; }
  static int nthreads() { return 1; }
  static bool all(bool x) { return x; }
  static bool any(bool x) { return x; }
  static void sync() {}
  static uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint64_t loadRelaxed(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void storeRelaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
  static uint32_t fetchAddAcqRel(uint32_t* p, uint32_t v) {
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
  }
};

// A block run by several host threads together, as a CUDA block's threads
// run it: sync() is a barrier, all() and any() are votes over a barrier, and
// each thread takes its share (tid of nthreads) of every step's data. This
// is how the GPU's division of work, its barriers and its per-thread memory
// ordering run in CI and under ThreadSanitizer without a GPU.
class Team {
 public:
  explicit Team(int size) : size_(size), barrier_(size) {}
  int size() const { return size_; }

 private:
  friend class TeamCtx;
  int size_;
  std::barrier<> barrier_;
  // Vote k counts in votes_[k % 3]; thread 0 clears the next one before
  // the barrier of this one, after every thread has read it (two votes ago).
  std::atomic<int> votes_[3] = {0, 0, 0};
};

class TeamCtx : public HostCtx {
 public:
  TeamCtx(Team* team, int tid) : team_(team), tid_(tid) {}
  int tid() const { return tid_; }
  int nthreads() const { return team_->size(); }
  void sync() const { team_->barrier_.arrive_and_wait(); }
  bool all(bool x) { return count(!x) == 0; }
  bool any(bool x) { return count(x) != 0; }

 private:
  int count(bool x) {
    unsigned k = use_++ % 3;
    if (tid_ == 0) team_->votes_[(k + 1) % 3].store(0, std::memory_order_relaxed);
    if (x) team_->votes_[k].fetch_add(1, std::memory_order_relaxed);
    sync();
    return team_->votes_[k].load(std::memory_order_relaxed);
  }
  Team* team_;
  int tid_;
  unsigned use_ = 0;
};

struct PlanRunOptions {
  // Host threads the blocks are spread over (block b on thread b % threads);
  // 1 polls every block from the calling thread in plan order, a
  // deterministic order.
  int threads = 1;
  size_t sliceBytes = 0;  // 0: the algorithm's (ir::sliceBytesOf)
  // The protocol whose slot layout the connections use; by default the
  // algorithm's. Tests run every algorithm with all three.
  int protocol = -1;   // -1 or an ir::Protocol
  int slots = 8;       // messages in flight per connection
  int stallMs = 2000;  // threads > 1: a deadlock once no block moved this long
  // Blocks per IR threadblock (FlatPlan::lower), each with its share of the
  // slices: what the CUDA executor does to fill a GPU, here on threads.
  int instances = 1;
  // Host threads that run each block together (a Team): 1 is one thread
  // per block; 32 or 256 run the data path as a warp or a CUDA block does.
  int teamThreads = 1;
  // One rank of a world whose other ranks run elsewhere (other processes,
  // other PlanWorlds): >= 0 runs only rank `focus`'s blocks (runRank), its
  // connections in memory shared through `exchange` (conn_exchange.h).
  // What the CUDA executor does for ranks in separate processes.
  int focus = -1;
  std::shared_ptr<ConnectionExchange> exchange;
  // Set from another thread: a block that cannot move gives up and the call
  // fails (kAborted), as a CUDA block does at its next wait.
  const std::atomic<bool>* abort = nullptr;
};

class PlanWorld {
 public:
  // Lowers `va` (which must outlive the world) and checks the options.
  static Result<std::unique_ptr<PlanWorld>> make(const VerifiedAlgorithm& va,
                                                 const PlanRunOptions& options = {});
  const FlatPlan& plan() const { return plan_; }
  ir::Protocol protocol() const { return protocol_; }

  // Runs one call on every rank. Errors: kInvalidArgument as planCall (and
  // avg on a collective that does not reduce); kDeadlock naming each
  // unfinished block's rank, threadblock, step, iteration and what it
  // waits for. Connections grow (once) when a call needs larger slots.
  Status run(const std::vector<CallArgs>& calls);
  // A world with a focus rank: that rank's call. Its peers' worlds run
  // theirs at the same time; the first call and a call that needs larger
  // slots exchange connections with them. After a failure (a deadlock,
  // a failed exchange) the world refuses further calls: its peers' hold
  // half a call.
  Status runRank(const CallArgs& call);

 private:
  PlanWorld() = default;
  Status allocate(size_t msgBytes);
  Status execute(const Geometry& g, std::vector<engine::RankView>& ranks, DataType type,
                 ReduceOp op);
  std::string describe(const engine::CallView& v, uint64_t base) const;
  void resetCounters();

  const VerifiedAlgorithm* va_ = nullptr;
  PlanRunOptions options_;
  FlatPlan plan_;
  ir::Protocol protocol_ = ir::Protocol::kSimple;
  size_t msgBytes_ = 0;  // the largest message the slots hold
  std::vector<engine::ConnCounters> counters_;
  std::vector<std::vector<uint64_t>> slots_;  // per connection (8-byte aligned)
  std::vector<engine::ConnView> conns_;
  // Kept across calls, as on a GPU (engine::CallCounters).
  std::vector<uint64_t> completed_;
  std::vector<uint32_t> ranksFinished_;
  engine::CallCounters calls_{};
  // The blocks this world runs: every rank's, or the focus rank's.
  int32_t firstBlock_ = 0, endBlock_ = 0;
  Status broken_;  // focus worlds: why calls are refused
};

}  // namespace chorus::runtime
