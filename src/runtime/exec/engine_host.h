// The step engine (engine.h) on the host: a thread stands in for each CUDA
// block. This runs the GPU executor's step and protocol code, with its
// memory ordering expressed as C++ atomics, on every algorithm in CI (and
// under ThreadSanitizer), and is the reference the CUDA executor's results
// are compared with.
//
// A PlanWorld is one communicator's worth of state for one algorithm: the
// plan, the connections (slots and counters, allocated once and reused by
// every call, as the CUDA executor does) and the per-block staging memory.
// Calls take host buffers (CallArgs per rank) and run all ranks here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
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
  static void fenceRelease() {}
  static void fenceAcquire() {}
  static uint64_t loadAcquire(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
  static uint64_t loadRelaxed(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
  static void storeRelease(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
  static void storeRelaxed(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }
  static uint32_t fetchAddAcqRel(uint32_t* p, uint32_t v) {
    return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL);
  }
  static void copy(unsigned char* dst, const unsigned char* src, size_t bytes) {
    std::memcpy(dst, src, bytes);
  }
};

struct PlanRunOptions {
  // Host threads the blocks are spread over (block b on thread b % threads);
  // 1 polls every block from the calling thread in plan order, a
  // deterministic order.
  int threads = 1;
  size_t sliceBytes = 0;  // 0: the protocol's default (docs/spec/IR.md section 3)
  // The protocol whose slot layout the connections use; by default the
  // algorithm's. Tests run every algorithm with all three.
  int protocol = -1;   // -1 or an ir::Protocol
  int slots = 8;       // messages in flight per connection
  int stallMs = 2000;  // threads > 1: a deadlock once no block moved this long
  // Blocks per IR threadblock (FlatPlan::lower), each with its share of the
  // slices: what the CUDA executor does to fill a GPU, here on threads.
  int instances = 1;
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

 private:
  PlanWorld() = default;
  void allocate(size_t msgBytes);
  std::string describe(const engine::CallView& v) const;

  const VerifiedAlgorithm* va_ = nullptr;
  PlanRunOptions options_;
  FlatPlan plan_;
  ir::Protocol protocol_ = ir::Protocol::kSimple;
  size_t msgBytes_ = 0;  // the largest message the slots hold
  std::vector<engine::ConnCounters> counters_;
  std::vector<std::vector<uint64_t>> slots_;  // per connection (8-byte aligned)
  std::vector<uint64_t> stage_;
  std::vector<engine::ConnView> conns_;
};

}  // namespace chorus::runtime
